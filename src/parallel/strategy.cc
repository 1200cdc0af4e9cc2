#include "parallel/strategy.h"

#include <cstring>
#include <sstream>

#include "base/error.h"
#include "parallel/model_strategy.h"

namespace dtrain {

const std::vector<uint8_t>* find_section(const StateSections& state, const std::string& name) {
  for (const auto& [n, bytes] : state)
    if (n == name) return &bytes;
  return nullptr;
}

std::vector<uint8_t> float_bytes(std::span<const float> values) {
  std::vector<uint8_t> out(values.size_bytes());
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

void load_floats(const StateSections& state, const std::string& name, std::span<float> out, const char* what) {
  const std::vector<uint8_t>* bytes = find_section(state, name);
  DT_CHECK(bytes != nullptr, Corrupt, "checkpoint has no '" << name << "' section (" << what << ")");
  DT_CHECK_EQ(bytes->size(), out.size_bytes(), Corrupt, "checkpoint section '" << name << "' (" << what << ") size");
  if (!out.empty()) std::memcpy(out.data(), bytes->data(), bytes->size());
}

std::string ModelStrategy::describe() const {
  const auto& tr = model_.train_set();
  std::ostringstream os;
  os << model_.describe() << " on " << tr.source << " (" << tr.rows << " x " << tr.cols << ")";
  if (optimizer_) os << ", optimizer " << optimizer_->kind();
  return os.str();
}

void ModelStrategy::save(StateSections& state) const {
  state.emplace_back("params", float_bytes(model_.params()));
  if (optimizer_) state.emplace_back("optimizer", optimizer_->save_state());
  state.emplace_back("strategy", save_state());
}

void ModelStrategy::load(const StateSections& state) {
  load_floats(state, "params", model_.params(), "the model's parameters");
  if (optimizer_) {
    const auto* opt = find_section(state, "optimizer");
    DT_CHECK(opt != nullptr, Corrupt, "checkpoint has no optimizer state");
    optimizer_->load_state(*opt);
  }
  if (const auto* s = find_section(state, "strategy"); s && !s->empty()) load_state(*s);
}

}  // namespace dtrain

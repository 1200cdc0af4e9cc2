// optim/optimizer.cc — shared optimizer plumbing: span checks, state (de)serialization and
// the factory.
//
// State format (native little-endian, as written by save_state):
//   "DTOPTIM1" | u32 kind length | kind bytes | i64 size | i64 steps | f32 lr |
//   u32 hyper count | f32 hyper... | u32 array count | per array: i64 length | f32 data...
// Loading checks the magic, the kind, the size and every length before touching the state,
// so a mismatched or truncated checkpoint leaves the optimizer unchanged.
#include "optim/optimizer.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace dtrain {

namespace {
constexpr char kMagic[8] = {'D', 'T', 'O', 'P', 'T', 'I', 'M', '1'};

template <class T>
void put(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    T v;
    take(&v, sizeof(T));
    return v;
  }
  void take(void* dst, size_t n) {
    DT_CHECK(pos_ + n <= bytes_.size(), Corrupt,
             "optimizer state is truncated: needed " << n << " bytes at offset " << pos_ << " of " << bytes_.size());
    if (n) std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};
}  // namespace

Optimizer::Optimizer(int64_t size, float lr) : size_(size), lr_(lr) {
  DT_CHECK(size >= 0, InvalidArgument, "optimizer range size must be >= 0, got " << size);
  DT_CHECK(lr >= 0.0f, InvalidArgument, "learning rate must be >= 0, got " << lr);
}

void Optimizer::step(std::span<float> params, std::span<const float> grads) {
  check_spans(params, grads);
  update(params, grads, 0);
  end_step();
}

void Optimizer::check_spans(std::span<float> params, std::span<const float> grads) const {
  DT_CHECK(static_cast<int64_t>(params.size()) == size_ && static_cast<int64_t>(grads.size()) == size_,
           InvalidArgument,
           kind() << " optimizer manages " << size_ << " elements but step() got " << params.size()
                  << " parameters and " << grads.size() << " gradients (slice the flat buffers to the range)");
}

void Optimizer::check_piece(std::span<float> params, std::span<const float> grads, int64_t offset) const {
  const auto len = static_cast<int64_t>(params.size());
  DT_CHECK(static_cast<int64_t>(grads.size()) == len && offset >= 0 && offset + len <= size_, InvalidArgument,
           kind() << " optimizer manages " << size_ << " elements but update() got " << params.size()
                  << " parameters and " << grads.size() << " gradients at offset " << offset);
}

void Optimizer::check_terms(std::span<const float* const> terms) const {
  DT_CHECK(!terms.empty() && terms.size() <= kMaxTerms, InvalidArgument,
           kind() << " optimizer: update_sum takes 1-" << kMaxTerms << " gradient terms, got " << terms.size());
}

void Optimizer::update_sum(std::span<float> out, std::span<const float> params, std::span<const float* const> terms,
                           int64_t offset) {
  check_piece(out, params, offset);
  check_terms(terms);
  if (out.data() != params.data()) std::memcpy(out.data(), params.data(), out.size() * sizeof(float));
  if (terms.size() == 1) {
    update(out, std::span<const float>(terms[0], out.size()), offset);
    return;
  }
  // Through a buffer small enough to stay in the first-level cache, so the sum is read back
  // from there by the update.
  constexpr size_t kChunk = 2048;
  alignas(64) float sum[kChunk];
  for (size_t at = 0; at < out.size(); at += kChunk) {
    const size_t len = std::min(kChunk, out.size() - at);
    for (size_t i = 0; i < len; ++i) {
      float g = terms[0][at + i];
      for (size_t j = 1; j < terms.size(); ++j) g += terms[j][at + i];
      sum[i] = g;
    }
    update(out.subspan(at, len), std::span<const float>(sum, len), offset + static_cast<int64_t>(at));
  }
}

std::vector<uint8_t> Optimizer::save_state() const {
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  std::string k = kind();
  put(out, static_cast<uint32_t>(k.size()));
  out.insert(out.end(), k.begin(), k.end());
  put(out, size_);
  put(out, steps_);
  put(out, lr_);
  std::vector<float> hyper = hyper_params();
  put(out, static_cast<uint32_t>(hyper.size()));
  for (float h : hyper) put(out, h);
  auto arrays = const_cast<Optimizer*>(this)->state_arrays();
  put(out, static_cast<uint32_t>(arrays.size()));
  for (const AlignedVector<float>* a : arrays) {
    put(out, static_cast<int64_t>(a->size()));
    const auto* p = reinterpret_cast<const uint8_t*>(a->data());
    out.insert(out.end(), p, p + a->size() * sizeof(float));
  }
  return out;
}

void Optimizer::load_state(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  char magic[8];
  r.take(magic, 8);
  DT_CHECK(std::memcmp(magic, kMagic, 8) == 0, Corrupt, "not an optimizer state (bad magic)");
  std::string k(r.get<uint32_t>(), '\0');
  DT_CHECK(k.size() < 64, Corrupt, "optimizer state: bad kind length " << k.size());
  r.take(k.data(), k.size());
  DT_CHECK(k == kind(), InvalidArgument, "optimizer state was saved by '" << k << "', this optimizer is '" << kind() << "'");
  int64_t size = r.get<int64_t>();
  DT_CHECK(size == size_, InvalidArgument,
           "optimizer state covers " << size << " elements, this optimizer manages " << size_);
  int64_t steps = r.get<int64_t>();
  float lr = r.get<float>();
  std::vector<float> hyper(r.get<uint32_t>());
  DT_CHECK(hyper.size() == hyper_params().size(), Corrupt, "optimizer state: " << hyper.size() << " hyper-parameters");
  for (float& h : hyper) h = r.get<float>();
  auto arrays = state_arrays();
  uint32_t count = r.get<uint32_t>();
  DT_CHECK(count == arrays.size(), Corrupt, "optimizer state: " << count << " arrays, expected " << arrays.size());
  std::vector<AlignedVector<float>> loaded(count);
  for (uint32_t i = 0; i < count; ++i) {
    int64_t n = r.get<int64_t>();
    DT_CHECK(n == 0 || n == size_, Corrupt, "optimizer state: array " << i << " has " << n << " elements");
    loaded[i].resize(n);
    r.take(loaded[i].data(), n * sizeof(float));
  }
  DT_CHECK(r.done(), Corrupt, "optimizer state has trailing bytes");
  // Everything validated: commit.
  steps_ = steps;
  lr_ = lr;
  set_hyper_params(hyper);
  for (uint32_t i = 0; i < count; ++i) *arrays[i] = std::move(loaded[i]);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, int64_t size) {
  if (c.kind == "sgd") {
    return std::make_unique<Sgd>(size, SgdOptions{c.lr, c.momentum, c.nesterov, c.weight_decay});
  }
  if (c.kind == "adam" || c.kind == "adamw") {
    AdamOptions o{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.kind == "adamw"};
    return std::make_unique<Adam>(size, o);
  }
  DT_THROW(InvalidArgument, "unknown optimizer '" << c.kind << "' (expected sgd, adam or adamw)");
}

}  // namespace dtrain

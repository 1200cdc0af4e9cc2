// nn/mlp.cc — MLP from a dims spec: Linear layers with the hidden activation fused in.
#include "nn/mlp.h"

#include <sstream>

#include "autograd/loss.h"
#include "base/error.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace dtrain {

std::vector<int64_t> MLP::parse_spec(const std::string& spec) {
  std::vector<int64_t> dims;
  std::string cur;
  auto flush = [&] {
    DT_CHECK(!cur.empty(), InvalidArgument,
             "MLP spec '" << spec << "': expected sizes separated by '-', e.g. 784-256-10");
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(cur, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    DT_CHECK(used == cur.size() && v > 0, InvalidArgument,
             "MLP spec '" << spec << "': '" << cur << "' is not a positive size");
    dims.push_back(v);
    cur.clear();
  };
  for (char c : spec) {
    if (c == '-' || c == 'x' || c == ',') flush();
    else if (c != ' ') cur.push_back(c);
  }
  flush();
  DT_CHECK(dims.size() >= 2, InvalidArgument,
           "MLP spec '" << spec << "' needs at least an input and an output size, e.g. 784-10");
  return dims;
}

MLP::MLP(const std::string& spec, const MlpOptions& options) : MLP(parse_spec(spec), options) {}

MLP::MLP(const std::vector<int64_t>& dims, const MlpOptions& options)
    : dims_(dims), dropout_(options.dropout), dropout_seed_(options.dropout_seed) {
  DT_CHECK(dims_.size() >= 2, InvalidArgument, "MLP needs at least two sizes");
  DT_CHECK(dropout_ >= 0.0f && dropout_ < 1.0f, InvalidArgument, "MLP dropout must be in [0, 1), got " << dropout_);
  for (size_t i = 0; i + 1 < dims_.size(); ++i) {
    bool last = i + 2 == dims_.size();
    layers_.push_back(std::make_unique<Linear>(dims_[i], dims_[i + 1], true, last ? Activation::kNone : options.hidden));
    add_child("layers." + std::to_string(i), layers_.back().get());
  }
  if (options.allocate) allocate(options.seed, options.gradients);
}

std::string MLP::spec() const {
  std::ostringstream os;
  for (size_t i = 0; i < dims_.size(); ++i) os << (i ? "-" : "") << dims_[i];
  return os.str();
}

Var MLP::forward(Graph& graph, const Var& x) { return run(graph, x, training()); }

Var MLP::run(Graph& graph, const Var& x, bool training) {
  const Tensor& X = x.value();
  DT_CHECK(X.ndim() == 2 && X.dim(1) == dims_.front(), InvalidArgument,
           "MLP " << spec() << ": input " << shape_str(X.shape()) << " needs shape [B, " << dims_.front() << "]");
  Var h = x;
  bool drop = training && dropout_ > 0.0f;
  uint64_t pass = forward_count_++;
  for (size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i]->forward(graph, h);
    if (drop && i + 1 < layers_.size()) h = dropout(h, dropout_, derive_seed(dropout_seed_, pass * 1024 + i));
  }
  return h;
}

float MLP::loss_and_grad(const Tensor& x, std::span<const int32_t> labels, ThreadPool* pool) {
  Graph g(pool);
  Var loss = cross_entropy(forward(g, g.input(x)), labels);
  g.backward(loss);
  return loss.item();
}

Tensor MLP::logits(const Tensor& x, ThreadPool* pool) {
  Graph g(pool, /*record=*/false);
  return run(g, g.input(x), /*training=*/false).value();
}

std::vector<int32_t> MLP::predict(const Tensor& x, ThreadPool* pool) { return argmax_rows(logits(x, pool)); }

int64_t MLP::macs_per_example() const {
  int64_t m = 0;
  for (size_t i = 0; i + 1 < dims_.size(); ++i) m += dims_[i] * dims_[i + 1];
  return m;
}

}  // namespace dtrain

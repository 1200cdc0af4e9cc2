// nn/mlp.h — multi-layer perceptron from a spec string such as "784-256-128-10".
//
// Usage (single thread):
//
//   #include "nn/mlp.h"
//   #include "autograd/loss.h"
//   #include "optim/sgd.h"
//
//   dtrain::MLP model("784-256-128-10", {.seed = 42});      // owns flat params + grads
//   dtrain::Sgd opt(model.num_params(), {.lr = 0.05f, .momentum = 0.9f});
//   dtrain::Tensor x = dtrain::Tensor::from({B, 784}, features);   // float features (B, D)
//   std::vector<int32_t> y = ...;                                   // labels in [0, 10)
//
//   dtrain::Graph g;                                   // one graph per step
//   dtrain::Var loss = dtrain::cross_entropy(model.forward(g, x), y);
//   g.backward(loss);                                  // grads -> model.grad_span()
//   float l = loss.item();
//   opt.step(model.param_span(), model.grad_span());
//
//   // or, the same three lines in one call:  float l = model.loss_and_grad(x, y);
//   std::vector<int32_t> pred = model.predict(x);      // argmax of the logits
//
// Thread replicas (minibatch SGD over T threads, HOGWILD!): every thread builds its own MLP
// from the same spec and binds the SHARED parameter buffer plus its OWN gradient buffer:
//
//   dtrain::MLP master("784-256-10", {.seed = 1});
//   std::vector<float> grads_t(master.num_params());
//   dtrain::MLP replica("784-256-10", {.allocate = false});
//   replica.bind(master.param_span(), std::span<float>(grads_t));
//
// Contract
// - dims d0-d1-...-dn make n Linear layers; the hidden activation (ReLU by default) follows
//   every layer but the last, fused into the layer's op. forward returns logits (B, dn).
// - Parameters are laid out layer by layer: layers.i.weight (d_{i+1}, d_i), then
//   layers.i.bias (d_{i+1}).
// - A malformed spec throws InvalidArgument quoting it; a batch whose width is not d0 throws
//   naming both shapes.
// Thread-safety: see nn/module.h. forward/logits/predict only read the module, so threads
// may share one MLP for inference; loss_and_grad writes the bound gradient buffer, so
// training threads each use their own replica (own gradient buffer).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace dtrain {

struct MlpOptions {
  uint64_t seed = 0;
  bool allocate = true;  // false: call bind() before use
  bool gradients = true;  // false (with allocate): parameters only, for inference (nn/module.h)
  Activation hidden = Activation::kRelu;
  float dropout = 0.0f;       // between hidden layers, in training mode only
  uint64_t dropout_seed = 0;  // mixed with a per-forward counter
};

class MLP : public Module {
 public:
  explicit MLP(const std::string& spec, const MlpOptions& options = {});
  explicit MLP(const std::vector<int64_t>& dims, const MlpOptions& options = {});

  Var forward(Graph& graph, const Var& x) override;
  using Module::forward;

  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t input_dim() const { return dims_.front(); }
  int64_t output_dim() const { return dims_.back(); }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  Linear& layer(int64_t i) { return *layers_.at(i); }
  std::string spec() const;

  // Forward + cross-entropy + backward on one batch; gradients land in grad_span()
  // (overwritten). Returns the mean loss.
  float loss_and_grad(const Tensor& x, std::span<const int32_t> labels, ThreadPool* pool = nullptr);
  // Inference without recording: logits (B, dn) and argmax class per row.
  Tensor logits(const Tensor& x, ThreadPool* pool = nullptr);
  std::vector<int32_t> predict(const Tensor& x, ThreadPool* pool = nullptr);

  // Multiply-adds of one forward pass per example (sum of d_i * d_{i+1}); a training step
  // costs about 3x that (2 FLOPs per multiply-add).
  int64_t macs_per_example() const;

  // "784-256-10" -> {784, 256, 10}; throws InvalidArgument on anything else.
  static std::vector<int64_t> parse_spec(const std::string& spec);

 private:

  // forward with an explicit mode (logits() evaluates without touching training()).
  Var run(Graph& graph, const Var& x, bool training);

  std::vector<int64_t> dims_;
  std::vector<std::unique_ptr<Linear>> layers_;
  float dropout_;
  uint64_t dropout_seed_;
  std::atomic<uint64_t> forward_count_{0};  // dropout stream per forward; atomic so shared use is safe
};

}  // namespace dtrain

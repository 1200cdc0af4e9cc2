// nn/layers.h — Linear, LayerNorm, Embedding, Sequential-style activation wrapper.
//
// Contract
// - Linear(in, out): weight (out, in) [PyTorch layout], bias (out); forward x (B, in) ->
//   (B, out) = act(x w^T + b) as ONE fused autograd op (gemm with a transposed operand, then
//   bias + activation in one pass). Default init: PyTorch's (uniform fan-in for both).
//   A shape mismatch names both shapes: "Linear(784->256): input [32, 100] needs last dim 784".
// - LayerNorm(C): gamma (C) ones, beta (C) zeros, over the last dim.
// - Embedding(V, D): table (V, D) ~ N(0, 1); forward takes indices, not a Var.
// Thread-safety: see nn/module.h.
#pragma once

#include <cstdint>
#include <span>

#include "autograd/ops.h"
#include "nn/module.h"

namespace dtrain {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true,
         Activation act = Activation::kNone);
  Var forward(Graph& graph, const Var& x) override;
  using Module::forward;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  Activation activation() const { return act_; }
  Parameter& weight() { return *weight_; }
  Parameter* bias() { return bias_; }

 private:
  int64_t in_, out_;
  Activation act_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t features, float eps = 1e-5f);
  Var forward(Graph& graph, const Var& x) override;
  using Module::forward;

 private:
  int64_t features_;
  float eps_;
  Parameter* gamma_;
  Parameter* beta_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t dim);
  // indices (N) -> (N, D)
  Var lookup(Graph& graph, std::span<const int32_t> indices);
  // Treats x's values as indices (rounded); prefer lookup().
  Var forward(Graph& graph, const Var& x) override;
  using Module::forward;

 private:
  int64_t vocab_, dim_;
  Parameter* table_;
};

}  // namespace dtrain

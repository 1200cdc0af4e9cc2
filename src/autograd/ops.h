// autograd/ops.h — differentiable ops on Vars (each records its backward on the Graph).
//
// Contract
// - Shapes follow PyTorch conventions; shape comments use (B, C) for batch x features.
// - Every op checks its shapes and throws InvalidArgument naming both shapes on mismatch.
// - All Vars passed to one op must belong to the same Graph.
// - Backward formulas are checked against finite differences in tests/autograd/ops_test.cc
//   (one table row per op).
// Thread-safety: as Graph.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "autograd/graph.h"

namespace dtrain {

enum class Activation { kNone, kRelu, kGelu, kTanh, kSigmoid };
const char* activation_name(Activation a);
Activation parse_activation(const std::string& name);  // none|relu|gelu|tanh|sigmoid

// --- arithmetic (same shapes) ---
Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var scale(const Var& x, float alpha);
// x (.., C) + bias (C)
Var bias_add(const Var& x, const Var& bias);

// --- matrix products ---
// op(a) (m, k) x op(b) (k, n) -> (m, n); transposes cost nothing.
Var matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false);
// Fused fully connected layer: act(x (B, in) . w^T (out, in) + b (out)) -> (B, out).
// bias may be undefined (Var()). The fused ReLU path makes one pass over the output, and its
// backward masks the output's gradient buffer in place, so after backward the grad() of a
// ReLU linear's output reads as the gradient of the pre-activation.
Var linear(const Var& x, const Var& w, const Var& bias, Activation act = Activation::kNone);

// --- activations ---
Var relu(const Var& x);
Var gelu(const Var& x);  // tanh approximation
Var tanh(const Var& x);
Var sigmoid(const Var& x);
Var activate(const Var& x, Activation act);
Var softmax(const Var& x);      // over the last dim
Var log_softmax(const Var& x);  // over the last dim

// --- normalization, lookup, regularization ---
// Over the last dim C: (x - mean) / sqrt(var + eps) * gamma (C) + beta (C).
Var layernorm(const Var& x, const Var& gamma, const Var& beta, float eps = 1e-5f);
// table (V, D), indices in [0, V) -> (N, D). Out-of-range indices throw.
Var embedding(const Var& table, std::span<const int32_t> indices);
// Zeroes each element with probability p and scales the rest by 1/(1-p). The mask depends
// only on (seed, element index). p == 0 returns x unchanged.
Var dropout(const Var& x, float p, uint64_t seed);

// --- shape ---
Var reshape(const Var& x, const Shape& shape);
Var transpose(const Var& x, int dim0 = 0, int dim1 = 1);  // result is contiguous
Var slice(const Var& x, int dim, int64_t begin, int64_t end);
Var concat(const std::vector<Var>& xs, int dim);

// --- reductions (to a scalar) ---
Var sum(const Var& x);
Var mean(const Var& x);

}  // namespace dtrain

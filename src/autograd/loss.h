// autograd/loss.h — loss functions; each returns a scalar Var (the mean over the batch).
//
// Contract
// - cross_entropy(logits (B, K), labels[B] in [0, K)) = mean_b -log softmax(logits_b)[y_b],
//   computed stably from logits (log-sum-exp). Backward: (softmax - onehot) / B.
// - mse_loss(pred, target): mean of (pred - target)^2 over all elements; target is a
//   constant tensor of the same shape.
// - logistic_loss(scores (B) or (B, 1), labels in {-1, +1} or {0, 1}): mean log(1 + e^{-y s})
//   with y mapped to +-1, computed stably.
// - hinge_loss(scores, labels in {-1, +1} or {0, 1}): mean max(0, 1 - y s).
// - Label count must equal the batch size; bad labels throw InvalidArgument naming the index.
// Thread-safety: as Graph.
#pragma once

#include <cstdint>
#include <span>

#include "autograd/graph.h"

namespace dtrain {

Var cross_entropy(const Var& logits, std::span<const int32_t> labels);
Var mse_loss(const Var& pred, const Tensor& target);
Var logistic_loss(const Var& scores, std::span<const float> labels);
Var hinge_loss(const Var& scores, std::span<const float> labels);

// Fraction of rows whose argmax equals the label (no gradient; a metric).
float accuracy(const Tensor& logits, std::span<const int32_t> labels);

}  // namespace dtrain

// optim/clip.h — gradient clipping by global L2 norm.
//
// Algorithm: norm = sqrt(sum_i g_i^2) over all gradients (accumulated in double, in a fixed
// chunk order, so the result is deterministic); if norm > max_norm, every gradient is scaled
// by max_norm / (norm + 1e-6) (PyTorch clip_grad_norm_). Returns the norm before clipping.
// For sharded gradients (ZeRO), compute grad_sumsq on each shard, all-reduce the sums, and
// call clip_by_norm with the global norm on each shard.
// Thread-safety: pure functions over the spans; the pool as in tensor/ops.h.
#pragma once

#include <span>

namespace dtrain {

class ThreadPool;

double grad_sumsq(std::span<const float> grads, ThreadPool* pool = nullptr);
double global_norm(std::span<const float> grads, ThreadPool* pool = nullptr);
// Scales grads if `norm` (computed by the caller) exceeds max_norm. Returns the scale used.
float clip_by_norm(std::span<float> grads, double norm, float max_norm, ThreadPool* pool = nullptr);
// global_norm + clip_by_norm. Returns the norm before clipping.
double clip_grad_norm(std::span<float> grads, float max_norm, ThreadPool* pool = nullptr);

}  // namespace dtrain

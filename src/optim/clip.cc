// optim/clip.cc — global-norm gradient clipping (formula in optim/clip.h).
#include "optim/clip.h"

#include <cmath>

#include "base/error.h"
#include "tensor/ops.h"

namespace dtrain {

double grad_sumsq(std::span<const float> grads, ThreadPool* pool) { return sumsq(grads, pool); }

double global_norm(std::span<const float> grads, ThreadPool* pool) { return std::sqrt(grad_sumsq(grads, pool)); }

float clip_by_norm(std::span<float> grads, double norm, float max_norm, ThreadPool* pool) {
  DT_CHECK(max_norm > 0.0f, InvalidArgument, "clip max_norm must be > 0, got " << max_norm);
  if (!(norm > max_norm)) return 1.0f;  // also leaves NaN norms alone for the caller to see
  float s = static_cast<float>(max_norm / (norm + 1e-6));
  scale_(grads, s, pool);
  return s;
}

double clip_grad_norm(std::span<float> grads, float max_norm, ThreadPool* pool) {
  double norm = global_norm(grads, pool);
  clip_by_norm(grads, norm, max_norm, pool);
  return norm;
}

}  // namespace dtrain

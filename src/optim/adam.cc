// optim/adam.cc — Adam / AdamW through the fused SIMD kernel, split over a pool.
#include "optim/adam.h"

#include <cmath>

#include "base/error.h"
#include "base/thread_pool.h"
#include "tensor/kernels.h"

namespace dtrain {

Adam::Adam(int64_t size, const AdamOptions& options) : Optimizer(size, options.lr), options_(options) {
  DT_CHECK(options.beta1 >= 0.0f && options.beta1 < 1.0f && options.beta2 >= 0.0f && options.beta2 < 1.0f,
           InvalidArgument, "Adam betas must be in [0, 1), got " << options.beta1 << ", " << options.beta2);
  DT_CHECK(options.eps > 0.0f, InvalidArgument, "Adam eps must be > 0, got " << options.eps);
  DT_CHECK(options.weight_decay >= 0.0f, InvalidArgument, "weight decay must be >= 0, got " << options.weight_decay);
  m_.assign(size, 0.0f);
  v_.assign(size, 0.0f);
}

void Adam::update(std::span<float> params, std::span<const float> grads, int64_t offset) {
  check_piece(params, grads, offset);
  const int64_t t = steps_ + 1;  // the step in progress (end_step counts it)
  AdamUpdate u;
  u.lr = lr_;
  u.beta1 = options_.beta1;
  u.beta2 = options_.beta2;
  u.eps = options_.eps;
  u.weight_decay = options_.weight_decay;
  u.decoupled = options_.decoupled;
  u.bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(options_.beta1), static_cast<double>(t)));
  u.bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(options_.beta2), static_cast<double>(t)));
  float *p = params.data(), *m = m_.data() + offset, *v = v_.data() + offset;
  const float* g = grads.data();
  const auto n = static_cast<int64_t>(params.size());
  const Kernels& k = kernels();
  auto run = [&](int64_t lo, int64_t hi) { k.adam_update(p + lo, g + lo, m + lo, v + lo, hi - lo, u); };
  if (pool_ && pool_->size() > 1 && n >= (1 << 16)) pool_->parallel_for(0, n, 1 << 15, run);
  else run(0, n);
}

std::vector<float> Adam::hyper_params() const {
  return {options_.beta1, options_.beta2, options_.eps, options_.weight_decay, options_.decoupled ? 1.0f : 0.0f};
}

void Adam::set_hyper_params(std::span<const float> h) {
  options_.beta1 = h[0];
  options_.beta2 = h[1];
  options_.eps = h[2];
  options_.weight_decay = h[3];
  options_.decoupled = h[4] != 0.0f;
  options_.lr = lr_;
}

}  // namespace dtrain

// optim/sgd.cc — SGD / momentum / Nesterov through the fused SIMD kernel, split over a pool.
#include "optim/sgd.h"

#include "base/error.h"
#include "base/thread_pool.h"
#include "tensor/kernels.h"

namespace dtrain {

Sgd::Sgd(int64_t size, const SgdOptions& options) : Optimizer(size, options.lr), options_(options) {
  DT_CHECK(options.momentum >= 0.0f && options.momentum < 1.0f, InvalidArgument,
           "SGD momentum must be in [0, 1), got " << options.momentum);
  DT_CHECK(options.weight_decay >= 0.0f, InvalidArgument, "weight decay must be >= 0, got " << options.weight_decay);
  DT_CHECK(!options.nesterov || options.momentum > 0.0f, InvalidArgument, "Nesterov momentum needs momentum > 0");
  if (options.momentum > 0.0f) velocity_.assign(size, 0.0f);
}

void Sgd::update(std::span<float> params, std::span<const float> grads, int64_t offset) {
  check_piece(params, grads, offset);
  const float* g = grads.data();
  step_terms(params, params, std::span<const float* const>(&g, 1), offset);
}

void Sgd::update_sum(std::span<float> out, std::span<const float> params, std::span<const float* const> terms,
                     int64_t offset) {
  check_piece(out, params, offset);
  check_terms(terms);
  step_terms(out, params, terms, offset);
}

void Sgd::step_terms(std::span<float> out, std::span<const float> params, std::span<const float* const> terms,
                     int64_t offset) {
  SgdUpdate u{lr_, options_.momentum, options_.weight_decay, options_.nesterov};
  // PyTorch initializes the momentum buffer to g' on the first step; with v = 0 the formula
  // v = mu v + g' gives exactly that.
  float* v = velocity_.empty() ? nullptr : velocity_.data() + offset;
  const auto n = static_cast<int64_t>(out.size());
  const Kernels& k = kernels();
  const int count = static_cast<int>(terms.size());
  auto run = [&](int64_t lo, int64_t hi) {
    const float* at[kMaxTerms];
    for (int j = 0; j < count; ++j) at[j] = terms[static_cast<size_t>(j)] + lo;
    k.sgd_update_sum(out.data() + lo, params.data() + lo, at, count, v ? v + lo : nullptr, hi - lo, u);
  };
  if (pool_ && pool_->size() > 1 && n >= (1 << 16)) pool_->parallel_for(0, n, 1 << 15, run);
  else run(0, n);
}

std::vector<float> Sgd::hyper_params() const {
  return {options_.momentum, options_.nesterov ? 1.0f : 0.0f, options_.weight_decay};
}

void Sgd::set_hyper_params(std::span<const float> h) {
  options_.momentum = h[0];
  options_.nesterov = h[1] != 0.0f;
  options_.weight_decay = h[2];
  options_.lr = lr_;
}

}  // namespace dtrain

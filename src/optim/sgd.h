// optim/sgd.h — SGD with optional momentum, Nesterov momentum and weight decay.
//
// Algorithm (PyTorch torch.optim.SGD semantics, so results match it step for step):
//   g' = g + wd * p
//   momentum == 0:  p -= lr * g'
//   otherwise:      v = mu * v + g'   (v starts at 0, so the first step sets v = g')
//                   p -= lr * (nesterov ? g' + mu * v : v)
// Contract and thread-safety: see optim/optimizer.h.
#pragma once

#include "optim/optimizer.h"

namespace dtrain {

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;
};

class Sgd : public Optimizer {
 public:
  Sgd(int64_t size, const SgdOptions& options);
  void update(std::span<float> params, std::span<const float> grads, int64_t offset) override;
  void update_sum(std::span<float> out, std::span<const float> params, std::span<const float* const> terms,
                  int64_t offset) override;
  const char* kind() const override { return "sgd"; }
  const SgdOptions& options() const { return options_; }
  std::span<const float> momentum_buffer() const { return velocity_; }

 protected:
  std::vector<AlignedVector<float>*> state_arrays() override { return {&velocity_}; }
  std::vector<float> hyper_params() const override;
  void set_hyper_params(std::span<const float> values) override;

 private:
  // update and update_sum after their checks: out = params stepped with the sum of terms.
  void step_terms(std::span<float> out, std::span<const float> params, std::span<const float* const> terms,
                  int64_t offset);
  SgdOptions options_;
  AlignedVector<float> velocity_;  // empty when momentum == 0
};

}  // namespace dtrain

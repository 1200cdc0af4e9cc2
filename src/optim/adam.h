// optim/adam.h — Adam and AdamW.
//
// Algorithm (PyTorch torch.optim.Adam / AdamW, amsgrad off), step t = 1, 2, ...:
//   Adam:  g' = g + wd * p              AdamW: p -= lr * wd * p; g' = g
//   m = b1 m + (1 - b1) g'
//   v = b2 v + (1 - b2) g'^2
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// Contract and thread-safety: see optim/optimizer.h.
#pragma once

#include "optim/optimizer.h"

namespace dtrain {

struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled = false;  // true: AdamW
};

class Adam : public Optimizer {
 public:
  Adam(int64_t size, const AdamOptions& options);
  void update(std::span<float> params, std::span<const float> grads, int64_t offset) override;
  const char* kind() const override { return options_.decoupled ? "adamw" : "adam"; }
  const AdamOptions& options() const { return options_; }

 protected:
  std::vector<AlignedVector<float>*> state_arrays() override { return {&m_, &v_}; }
  std::vector<float> hyper_params() const override;
  void set_hyper_params(std::span<const float> values) override;

 private:
  AdamOptions options_;
  AlignedVector<float> m_, v_;
};

// AdamW: Adam with decoupled weight decay (set options.weight_decay; PyTorch defaults to 0.01).
class AdamW : public Adam {
 public:
  AdamW(int64_t size, AdamOptions options) : Adam(size, with_decoupled(options)) {}

 private:
  static AdamOptions with_decoupled(AdamOptions o) {
    o.decoupled = true;
    return o;
  }
};

}  // namespace dtrain

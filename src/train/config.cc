#include "train/config.h"

#include <algorithm>

namespace dtrain {

bool TrainConfig::was_given(const std::string& name) const {
  return std::find(given.begin(), given.end(), name) != given.end();
}

void resolve_defaults(TrainConfig& c) {
  if (c.strategy.empty()) c.strategy = c.ranks > 1 ? "ddp" : "single";
  if (c.is_gpt()) {
    if (!c.was_given("optimizer")) c.optimizer = "adamw";
    if (!c.was_given("weight-decay")) c.weight_decay = 0.1f;
    if (!c.was_given("batch")) c.batch = 12;
  }
  if (c.zero < 0) c.zero = c.strategy == "zero" ? 1 : 0;
}

float effective_lr(const TrainConfig& c) {
  if (c.lr) return *c.lr;
  if (c.optimizer == "adam" || c.optimizer == "adamw") return 1e-3f;
  if (c.optimizer == "momentum" || c.optimizer == "nesterov") return 0.05f;
  return 0.1f;
}

OptimizerConfig optimizer_config(const TrainConfig& c) {
  OptimizerConfig o;
  o.lr = effective_lr(c);
  o.weight_decay = c.weight_decay;
  if (c.optimizer == "momentum" || c.optimizer == "nesterov") {
    o.kind = "sgd";
    o.momentum = c.momentum;
    o.nesterov = c.optimizer == "nesterov";
  } else {
    o.kind = c.optimizer;
  }
  if (c.beta2) o.beta2 = *c.beta2;
  else if (c.is_gpt()) o.beta2 = 0.99f;
  return o;
}

}  // namespace dtrain

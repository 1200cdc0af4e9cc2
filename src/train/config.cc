#include "train/config.h"

#include <algorithm>

#include "base/error.h"

namespace dtrain {

bool TrainConfig::was_given(const std::string& name) const {
  return std::find(given.begin(), given.end(), name) != given.end();
}

void resolve_defaults(TrainConfig& c) {
  if (c.strategy.empty()) c.strategy = c.ranks > 1 ? "ddp" : "single";
  if (c.is_gpt()) {
    if (!c.was_given("optimizer")) c.optimizer = "adamw";
    if (!c.was_given("weight-decay")) c.weight_decay = 0.1f;
  }
  // The MLP family's ddp on several ranks shards its optimizer step by default (ZeRO-1,
  // fused into each bucket's all-reduce: parallel/zero.h): the same parameters as --zero 0
  // (bit for bit at 2 ranks), each rank stepping 1/N of them. --deterministic sums fixed-point
  // gradients with a plain all-reduce, so it keeps --zero 0. So does a job over tcp: there the
  // fused step falls back to a reduce-scatter of a padded copy and an all-gather
  // (coll/collectives.cc allreduce_apply), which on loopback tcp took 3.0 model copies more
  // heap than --zero 0 and 0.80-1.10 ms a step against 0.77 at 2 ranks (2026-12-02).
  const bool ddp_mlp = c.strategy == "ddp" && !c.is_gpt() && !c.deterministic && c.transport != "tcp";
  if (c.zero < 0) c.zero = c.strategy == "zero" || ddp_mlp ? 1 : 0;
  if (c.is_gpt() && !c.was_given("batch")) {
    int64_t unit = std::max(c.microbatches, 1);
    if (c.ranks >= 1) {
      try {
        unit *= gpt_mesh(c).dp;
      } catch (const InvalidArgument&) {
        // A mesh that does not fit -n is reported by the strategy's checks.
      }
    }
    c.batch = (12 + unit - 1) / unit * unit;
  }
}

MeshDims gpt_mesh(const TrainConfig& c) {
  int dp = c.dp, tp = c.tp, pp = c.pp;
  const int n = c.ranks;
  const std::string& s = c.strategy;
  if (s == "single") dp = dp ? dp : 1, tp = tp ? tp : 1, pp = pp ? pp : 1;
  else if (s == "tp") dp = dp ? dp : 1, pp = pp ? pp : 1, tp = tp ? tp : std::max(1, n / (dp * pp));
  else if (s == "pp") dp = dp ? dp : 1, tp = tp ? tp : 1, pp = pp ? pp : std::max(1, n / (dp * tp));
  else if (s == "zero" || s == "ddp") tp = tp ? tp : 1, pp = pp ? pp : 1, dp = dp ? dp : std::max(1, n / (tp * pp));
  else if (s == "hybrid") {
    // Two of the three given: the third is what -n leaves (--dp 2 --pp 2 -n 4 is tp 1).
    const int given = (dp > 0) + (tp > 0) + (pp > 0);
    DT_CHECK(given >= 2, InvalidArgument,
             "--strategy hybrid needs at least two of --dp D --tp T --pp P (the third is -n / the other two)");
    if (given == 2) {
      const int known = (dp ? dp : 1) * (tp ? tp : 1) * (pp ? pp : 1);
      DT_CHECK(known > 0 && n % known == 0, InvalidArgument,
               "--strategy hybrid: -n " << n << " is not a multiple of " << known << " (the product of the --dp/--tp/--pp given)");
      (dp ? (tp ? pp : tp) : dp) = n / known;
    }
  }
  DT_CHECK(dp >= 1 && tp >= 1 && pp >= 1 && dp * tp * pp == n, InvalidArgument,
           "--strategy " << s << ": dp " << dp << " x tp " << tp << " x pp " << pp << " must equal -n " << n);
  return {dp, tp, pp};
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

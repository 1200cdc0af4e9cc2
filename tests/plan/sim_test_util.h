// tests/plan/sim_test_util.h — what the simulator's tests share: an ideal cluster (compute is
// FLOPs at 1 GFLOP/s, memory-bound work free, one alpha-beta link) and a small GPT.
#pragma once

#include "plan/cluster.h"
#include "plan/simulator.h"

namespace dtrain::plan::testing {

inline Cluster ideal(int cores = 64) {
  Cluster c;
  c.cores_per_node = cores;
  c.gemm_flops = 1e9;
  c.elementwise_bps = 1e18;  // memory-bound work free: compute is FLOPs only
  c.optimizer_ns_per_param = 0;
  c.intra.alpha_s = 1e-5, c.intra.beta_s_per_byte = 1e-9, c.intra.gamma_s_per_byte = 0;
  c.inter = c.intra;
  return c;
}

// The epoch's order of the default training set, which every MLP strategy's ranks hold
// (plan/sim_costs.h kOrderBytesPerRow: 8 bytes a row of Fashion-MNIST's 60,000).
inline constexpr double kOrder = 8.0 * kDefaultTrainRows;

inline const char* const kGpt = "gpt:layers=4,heads=4,width=64,context=32";

}  // namespace dtrain::plan::testing

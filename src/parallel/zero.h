// parallel/zero.h — ZeRO stages 0-2: data parallelism with sharded optimizer state and gradients.
//
// N data-parallel ranks train replicas of one flat parameter vector of n floats. Plain data
// parallelism (stage 0) all-reduces the gradients and every rank runs the same optimizer
// over all n parameters — so every rank stores n params, n grads and the optimizer state
// (2n floats for Adam): 16n bytes in float32. ZeRO (Rajbhandari et al.) removes the copies:
//   stage 1  the optimizer state is sharded: rank r owns [off_r, off_r + len_r); a
//            reduce-scatter gives it the summed gradient of that range, it steps only that
//            range (state sized to it), then the updated shards are all-gathered so every
//            rank holds all parameters again (reduce-scatter + all-gather = one all-reduce's
//            traffic).
//   stage 2  the gradients too: the shard's gradient lives in a buffer of the shard's size;
//            the full gradient buffer is only scratch during backward (the training loop
//            frees it between steps; without bucketing it exists until the last backward).
//   stage 3  the parameters too: see parallel/zero3.h.
// Shards: len = ceil(n / N) for every rank but the last (which takes what is left); the
// reduce-scatter works on a copy padded to N * len.
//
// Contract
// - step(params, grads) takes this rank's full parameters and its local gradient (the mean
//   over its local batch) and leaves in params the parameters after one optimizer step on
//   the mean gradient over the N ranks — identical on every rank and equal (to float
//   rounding of the reduction) to plain data parallelism, for every stage.
// - Optional global-norm clipping: norm_weight (empty = all 1) weights each element's
//   square (e.g. 1/T for parameters replicated over T tensor-parallel ranks), and
//   extra_reduce (if set) sums the local sum of squares over the other model-parallel
//   groups (tensor and pipeline) before the clip decision.
// - bytes() reports what this rank keeps between steps: parameters, gradients, optimizer
//   state (the optimizer's saved state, measured, not computed); comm() the collective calls
//   and their bus bytes (all-reduce 2(N-1)/N x bytes, all-gather and reduce-scatter
//   (N-1)/N x the full buffer), the nccl-tests convention.
// Thread-safety: one training thread per rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "coll/communicator.h"
#include "optim/optimizer.h"

namespace dtrain {

struct ZeroBytes {
  int64_t params = 0, grads = 0, optimizer = 0;
  int64_t total() const { return params + grads + optimizer; }
};

struct ZeroComm {
  int64_t allreduce = 0, allgather = 0, reduce_scatter = 0;  // calls
  double bus_bytes = 0;
  void add(const char* kind, int64_t full_bytes, int n);
};

struct ClipOptions {
  float max_norm = 0;                                 // 0: no clipping
  std::vector<float> norm_weight;                     // per element, empty = 1
  std::function<double(double)> extra_reduce;         // sums over tp/pp groups
};

// [offset, length) of rank r's shard of n elements over `ranks` ranks.
std::pair<int64_t, int64_t> zero_shard(int64_t n, int ranks, int r);

class ZeroOptimizer {
 public:
  // dp may be nullptr (one rank). stage in 0..2.
  ZeroOptimizer(Communicator* dp, int stage, int64_t n, const OptimizerConfig& config);

  // Returns the global gradient norm before clipping (0 when not clipping).
  double step(std::span<float> params, std::span<float> grads, float lr, const ClipOptions& clip = {});

  int stage() const { return stage_; }
  ZeroBytes bytes() const;
  const ZeroComm& comm() const { return comm_; }
  Optimizer& optimizer() { return *opt_; }

 private:
  Communicator* dp_;
  int stage_;
  int ranks_, rank_;
  int64_t n_, off_, len_;
  std::unique_ptr<Optimizer> opt_;
  std::vector<float> shard_grad_;  // stage 2
  ZeroComm comm_;
};

// sum_i w_i g_i^2 over [off, off + len) of grads, with w from `weight` (empty = 1).
double weighted_sumsq(std::span<const float> grads, const std::vector<float>& weight, int64_t off);

}  // namespace dtrain

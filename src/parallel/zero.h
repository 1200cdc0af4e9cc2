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
// Buckets. The gradient is cut into buckets (consecutive ranges; one bucket = the whole vector
// by default) and sharded bucket by bucket: rank r owns slice r of every bucket (len =
// ceil(L / N) for every rank but the last, which takes what is left; the reduce-scatter works
// on a copy padded to N * len). Its optimizer runs over the concatenation of its slices. So
// the bucket whose backward finished first can be reduce-scattered while backward continues
// on earlier layers: ddp (parallel/data_parallel.h) calls reduce(b) for each bucket on its
// progress thread as the bucket becomes final and then finish(); ddp itself is stage 0 (its
// buckets all-reduced). The GPT calls step(), which reduces every bucket and finishes.
//
// Contract
// - reduce(b, grads) reduces bucket b of this rank's local gradient (stage 0: all-reduce;
//   1-2: reduce-scatter into the owner's slice), averaging over the ranks or summing
//   (average = false: the caller already weighted each rank's share, as ddp does). Buckets
//   may be reduced in any order, each exactly once per step, from one thread at a time.
// - finish(params, grads, lr, clip) then clips, steps this rank's part and (stages 1-2)
//   all-gathers every bucket's slices, so every rank holds the new parameters.
// - step(params, grads) takes this rank's full parameters and its local gradient (the mean
//   over its local batch) and leaves in params the parameters after one optimizer step on
//   the mean gradient over the N ranks — identical on every rank and equal (to float
//   rounding of the reduction) to plain data parallelism, for every stage.
// - Optional global-norm clipping: norm_weight (empty = all 1) weights each element's
//   square (e.g. 1/T for parameters replicated over T tensor-parallel ranks), and
//   extra_reduce (if set) sums the local sum of squares over the other model-parallel
//   groups (tensor and pipeline) before the clip decision.
// - Fused (stages 1-2, constructed with fused = true; the caller never clips): reduce(b,
//   grads, params) does the bucket's whole step in one collective, allreduce_apply
//   (coll/collectives.h): each rank receives the summed gradient of its slice piece by piece,
//   steps its optimizer on that piece while it is in cache and the new parameters go
//   straight to every rank — no separate all-gather pass, no copies of the slice, and the
//   step overlaps the backward of earlier buckets where reduce runs on a progress thread.
//   finish() then only counts the step (the optimizer's end_step). Between reduce(b) and
//   finish() bucket b's parameters are already the new ones, so the caller must be done
//   with them (ddp: the bucket is final only after its layers' backward). The parameters are
//   the unfused path's (the same element-wise update of sums reduced in rank order; bit for
//   bit where the unfused reduce-scatter also sums in rank order, e.g. two ranks).
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
#include "parallel/instrument.h"

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
  // dp may be nullptr (one rank). stage in 0..2. `buckets` tile [0, n) in order (empty: one).
  ZeroOptimizer(Communicator* dp, int stage, int64_t n, const OptimizerConfig& config,
                std::vector<std::pair<int64_t, int64_t>> buckets = {}, bool average = true, bool fused = false);

  // Returns the global gradient norm before clipping (0 when not clipping).
  double step(std::span<float> params, std::span<float> grads, float lr, const ClipOptions& clip = {});
  void reduce(int bucket, std::span<float> grads);
  // Fused mode's reduce: also steps this rank's slice and leaves bucket b's new parameters in
  // params on every rank.
  // Returns the algorithm the collective ran (kNaive for one rank or the unfused path).
  // params_shared: params is one buffer every rank maps (allreduce_apply's recv_shared).
  Algorithm reduce(int bucket, std::span<float> grads, std::span<float> params, bool params_shared = false);
  bool fused() const { return fused_; }
  // Fused mode: the gradients passed to reduce lie in this window (every rank's at the same
  // place), which the collective then reads in place (coll/shm_context.h ShmWindow).
  void set_window(const ShmWindow* window) { window_ = window; }
  double finish(std::span<float> params, std::span<float> grads, float lr, const ClipOptions& clip = {});
  int buckets() const { return static_cast<int>(buckets_.size()); }

  int stage() const { return stage_; }
  ZeroBytes bytes() const;
  const ZeroComm& comm() const { return comm_; }
  // Records the collectives (blocking: communication and wait) and the optimizer step
  // (compute) as spans. For a caller that runs step() on its training thread (the GPT); ddp,
  // which reduces on a progress thread, records its own spans and leaves this unset.
  void set_instrument(Instrument* inst) { inst_ = inst; }
  Optimizer& optimizer() { return *opt_; }

 private:
  struct Slice {
    int64_t begin, len;  // bucket b: [begin, begin + len) of the whole vector
    int64_t mine, mine_len;  // this rank's slice of it: [mine, mine + mine_len)
    int64_t at;  // where that slice sits in the concatenation this rank's optimizer steps
  };
  Communicator* dp_;
  int stage_;
  int ranks_, rank_;
  int64_t n_, len_;  // len_: elements this rank's optimizer steps
  bool average_;
  bool fused_;
  const ShmWindow* window_ = nullptr;
  std::vector<Slice> buckets_;
  std::unique_ptr<Optimizer> opt_;
  std::vector<float> shard_grad_;   // stages 1-2: this rank's slices of the reduced gradient
  std::vector<float> step_scratch_;  // fused, shared parameters: a piece stepped out of place (zero.cc)
  std::vector<float> shard_param_;  // stages 1-2: this rank's slices of the parameters (scratch)
  std::vector<float> padded_, recv_;  // reduce-scatter scratch
  ZeroComm comm_;
  Instrument* inst_ = nullptr;
};

// sum_i w_i g_i^2 over [off, off + len) of grads, with w from `weight` (empty = 1).
double weighted_sumsq(std::span<const float> grads, const std::vector<float>& weight, int64_t off);

}  // namespace dtrain

// parallel/data_parallel.h — ddp: synchronous all-reduce SGD with gradient buckets that
// overlap communication with the backward pass.
//
// Algorithm (Algorithm 1 of the lectures; PyTorch DDP's bucketed reducer in spirit). Every
// rank holds the whole model. At step t all ranks look at the same global minibatch (B items
// of the epoch order); rank r computes c_r, its share's weighted gradient (parallel/
// share_grad.h). Backward finishes the layers last-first; each time a bucket (consecutive
// layers, >= bucket_bytes) is final, its all-reduce (sum) is queued on a progress thread
// (coll/work.h) and runs while backward continues on the earlier layers. When backward is
// done the training thread waits for the outstanding buckets — only that wait is exposed —
// and every rank applies the same optimizer step to the same summed gradient, so the
// replicas stay identical (checked: a broadcast from rank 0 at the start makes them equal
// even if their initial values differ).
//
// ZeRO (options.zero = 1 or 2, with the constructor that takes an OptimizerConfig): each
// bucket is reduce-scattered instead of all-reduced, as it becomes final, on the same progress
// thread; each rank steps only its slice of every bucket (optimizer state 1/N, and at stage 2
// gradient state 1/N) and the slices are all-gathered after the step. Stage 0 is plain ddp.
// By default (options.fused_step) the three are one collective per bucket, allreduce_apply:
// the owner steps each piece of its slice as it arrives summed and the new parameters go to
// every rank at once, all on the progress thread while backward continues — the optimizer's
// work is split over the ranks instead of repeated on each, and nothing is left to do after
// the last bucket but wait for it. On one host (the communicator has a shared-memory
// context) the gradient buffer itself is a shared-memory window, so each owner reads its
// slice of every rank's gradient where backward wrote it (stage 0 too: its all-reduce is
// allreduce_apply in place, nothing applied).
//
// Deterministic mode (options.deterministic) sums fixed-point integers instead of floats: M
// ranks with batch B/M give the parameters of one rank with batch B, bit for bit, for any M
// and any all-reduce algorithm (tests/parallel/data_parallel_test.cc checks M = 1..4).
//
// Measured split (options.split): each step's batch is cut in proportion to the
// ranks' measured compute speed (parallel/batch_split.h), so a rank on a slower core takes
// fewer items and the ranks finish backward together; the re-cut is a 16-byte all-gather every
// split_period steps on the training thread, after the step's buckets are done.
//
// Accounting: compute = forward/backward/step on the training thread; comm = each bucket's
// all-reduce on the progress thread (track 1 in a trace); wait = the training thread blocked
// on buckets. Epoch loss/accuracy are summed over ranks at the end of each epoch. Of the
// wait, the part spent behind the step's slowest compute is the epoch row's
// straggler_wait_ms (with slowest_rank and slowest_rank_share: parallel/stragglers.h),
// gathered from every rank's per-step forward + backward seconds by epoch_metrics().
// Thread-safety: driven by one thread; owns one progress thread on `comm`.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/heap_stats.h"
#include "coll/shm_context.h"
#include "coll/work.h"
#include "optim/optimizer.h"
#include "parallel/batch_split.h"
#include "parallel/dist_common.h"
#include "parallel/share_grad.h"
#include "parallel/zero.h"
#include "parallel/model_strategy.h"

namespace dtrain {

// DdpOptions::shared_params_min_bytes by default (the simulator applies the same rule).
inline constexpr int64_t kSharedParamsMinBytes = int64_t{8} << 20;

struct DdpOptions {
  size_t bucket_bytes = size_t{1} << 20;
  // false: all-reduce every bucket after backward (for comparison). Off anyway on a host
  // without a core beyond one per rank of the job on the host (ShmContext::spare_cores; over
  // tcp the transport's ranks_on_host against the cores): nothing to overlap on.
  bool overlap = true;
  bool deterministic = false;
  int64_t det_shard = 8;
  Algorithm algorithm = Algorithm::kAuto;
  int zero = 0;  // ZeRO stage 0-2 (parallel/zero.h): 1 shards the optimizer state, 2 also the gradients
  // zero 1-2: each bucket's reduce-scatter, this rank's optimizer step of its slice and the
  // all-gather of the new parameters are one collective on the progress thread
  // (ZeroOptimizer's fused mode); false: the step and the all-gathers after backward.
  bool fused_step = true;
  // On one host (the communicator has a shared-memory context), outside deterministic mode:
  // the gradient lives in a shared-memory window and each bucket is reduced from every rank's
  // window in place (allreduce_apply), with no copy into the slots or cross-memory system
  // calls. false: the buffers of the process and the all-reduce's own paths.
  bool window = true;
  // Fused ZeRO in the window: the host keeps one copy of the parameters that every rank reads
  // (each owner writes its slice there) when the model has at least this many bytes of
  // parameters; below it each rank keeps its own and copies the owners' slices out of the
  // slots. Two ranks with a core each on the 2-vCPU Xeon (docs/PERFORMANCE.md): the 0.94 MB
  // main job ran 10-20% faster with its own copies, 2.7-7.4 MB even, 11.6 MB 10-15% slower.
  // 0: always shared; INT64_MAX: never.
  int64_t shared_params_min_bytes = kSharedParamsMinBytes;
  // Cut each global batch among the ranks in proportion to their measured speed
  // (parallel/batch_split.h) instead of evenly: the step's gradient is the same mean, the
  // float additions' order differs (deterministic mode: the same bits either way).
  // kAuto (split_measures): measured outside deterministic mode where every rank has a core of
  // its own (no shared-memory context, or one that is not oversubscribed); with more ranks
  // than cores the wall time a rank's compute takes is the scheduler's, not its core's (the
  // 0.94 MB main job at 4 ranks on 2 cores ran 2-15% slower measured, five interleaved pairs).
  BatchSplitMode split = BatchSplitMode::kEven;
  // A fixed split, one positive weight per rank (or the start of the measured one); empty:
  // even.
  std::vector<double> split_weights;
  int split_period = 16;  // steps between re-cuts (one 16-byte all-gather each)
};

class DataParallel : public ModelStrategy {
 public:
  // `model`, `optimizer`, `comm` and `inst` (may be null) outlive this object.
  DataParallel(TrainableModel& model, Optimizer& optimizer, Communicator& comm, const DdpOptions& options,
               Instrument* inst);
  // Builds its own optimizer from `config`: over every parameter (zero 0) or over this rank's
  // slices (zero 1-2).
  DataParallel(TrainableModel& model, const OptimizerConfig& config, Communicator& comm, const DdpOptions& options,
               Instrument* inst);
  const char* name() const override { return "ddp"; }
  int threads() const override { return 1; }
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) override;
  LossAcc evaluate_on(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) override {
    return evaluator_.evaluate(model, ds, pool);
  }
  const Instrument* instrument() const override { return inst_; }

  // One synchronous step on the global minibatch; returns this rank's share's loss/accuracy.
  // The model's parameters hold the result afterwards (with the host's shared copy, a copy).
  LossAcc step(std::span<const int64_t> global_batch);
  const std::vector<GradRange>& buckets() const { return buckets_.buckets(); }
  const ZeroOptimizer* zero() const { return zopt_.get(); }
  Metrics epoch_metrics() override;

 private:
  DataParallel(TrainableModel& model, Optimizer* optimizer, Communicator& comm, const DdpOptions& options,
               Instrument* inst, int);  // the members; the public constructors then start()
  void submit_bucket(int b);
  // Queues a bucket's collective (pending_), or runs it at once on one rank.
  void launch(const std::string& name, std::function<void(Communicator&)> fn);
  bool place_in_window();  // DdpOptions::window: false where it does not apply
  // The parameters a step reads and writes: the host's shared copy, or the model's own.
  std::span<float> step_params() { return shared_params_.empty() ? model_.params() : shared_params_; }
  void share_params();    // the model's parameters -> the shared copy (collective)
  // step() without bringing the model's own copy up to date (run_epoch does, once).
  LossAcc step_in_place(std::span<const int64_t> global_batch);
  void unshare_params();  // the shared copy -> the model's parameters
  void start();
  void add_split_metrics(Metrics& m) const;  // the measured split's smallest and largest share
  // The epoch's straggler figures (parallel/stragglers.h) from every rank's per-step compute:
  // an all-reduce and an all-gather (collective: epoch_metrics runs on every rank).
  void add_straggler_metrics(Metrics& m);

  Optimizer* opt_;
  Communicator& comm_;
  DdpOptions o_;
  Instrument* inst_;
  ShareGradient share_;
  BatchSplit split_;
  GradBuckets buckets_;
  ShardedEvaluator evaluator_;
  std::unique_ptr<ProgressQueue> queue_;  // null without overlap: the buckets run on the caller
  std::unique_ptr<Optimizer> own_opt_;     // the config constructor, zero 0
  std::unique_ptr<ZeroOptimizer> zopt_;    // zero 1-2
  // On one host the gradient lives in a shared-memory window that the peers read in place
  // (no copy into the slots), counted as this rank's heap (DdpOptions::window).
  std::unique_ptr<ShmWindow> window_;
  std::unique_ptr<CountedAsHeap> window_counted_;
  // Fused ZeRO on one host, a model of DdpOptions::shared_params_min_bytes or more: one copy
  // of the parameters for all ranks (rank 0's buffer of this window), counted on rank 0;
  // empty otherwise.
  std::unique_ptr<ShmWindow> params_window_;
  std::unique_ptr<CountedAsHeap> params_counted_;
  std::span<float> shared_params_;
  std::vector<Work> pending_;
  // This epoch's forward + backward seconds, step by step (add_straggler_metrics), up to
  // kMaxRecordedSteps (4 MB) for a caller that steps without epochs.
  static constexpr size_t kMaxRecordedSteps = size_t{1} << 20;
  std::vector<float> step_compute_;
  int64_t step_ = 0;
  bool overlap_ = true;  // o_.overlap where the host has a core per rank
};

}  // namespace dtrain

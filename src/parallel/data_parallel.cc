#include "parallel/data_parallel.h"

#include <algorithm>
#include <thread>

#include "base/clock.h"
#include "base/copy.h"
#include "base/error.h"
#include "coll/collectives.h"
#include "parallel/stragglers.h"

namespace dtrain {

DataParallel::DataParallel(TrainableModel& model, Optimizer* optimizer, Communicator& comm, const DdpOptions& options,
                           Instrument* inst, int)
    : ModelStrategy(model, optimizer),
      opt_(optimizer),
      comm_(comm),
      o_(options),
      inst_(inst),
      share_(model, ShareOptions{options.deterministic, options.det_shard}),
      split_(comm.size(), share_.granule(),
             split_measures(options.split, options.deterministic,
                            comm.shm_context() && comm.shm_context()->oversubscribed()),
             options.split_period, options.split_weights),
      buckets_(share_.units(), options.bucket_bytes, options.deterministic ? sizeof(int64_t) : sizeof(float)),
      evaluator_(comm) {}

DataParallel::DataParallel(TrainableModel& model, Optimizer& optimizer, Communicator& comm,
                           const DdpOptions& options, Instrument* inst)
    : DataParallel(model, &optimizer, comm, options, inst, 0) {
  DT_CHECK_EQ(optimizer.size(), model.num_params(), InvalidArgument, "ddp: the optimizer must cover every parameter");
  DT_CHECK(options.zero == 0, InvalidArgument,
           "ddp: ZeRO stages build their own sharded optimizer (use the OptimizerConfig constructor)");
  place_in_window();
  start();
}

DataParallel::DataParallel(TrainableModel& model, const OptimizerConfig& config, Communicator& comm,
                           const DdpOptions& options, Instrument* inst)
    : DataParallel(model, nullptr, comm, options, inst, 0) {
  DT_CHECK(options.zero >= 0 && options.zero <= 2, InvalidArgument,
           "--zero " << options.zero << ": ddp shards with ZeRO stages 1 and 2 (stage 3 is the GPT's --strategy zero --zero 3)");
  DT_CHECK(options.zero == 0 || !options.deterministic, InvalidArgument,
           "--deterministic sums fixed-point gradients with all-reduce; it does not combine with --zero " << options.zero);
  if (options.zero == 0) {
    own_opt_ = make_optimizer(config, model.num_params());
    opt_ = own_opt_.get();
    place_in_window();
  } else {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const GradRange& r : buckets_.buckets()) ranges.emplace_back(r.offset, r.len);
    // Buckets are listed in backward order (last layer first); the engine wants them in order.
    std::sort(ranges.begin(), ranges.end());
    zopt_ = std::make_unique<ZeroOptimizer>(&comm_, options.zero, model.num_params(), config, ranges, /*average=*/false,
                                            options.fused_step);
    if (options.fused_step && place_in_window()) zopt_->set_window(window_.get());
    const auto n = static_cast<size_t>(model.num_params());
    if (window_ && static_cast<int64_t>(n * sizeof(float)) >= options.shared_params_min_bytes) {
      // One copy of the parameters for the host, in rank 0's buffer of a second window: every
      // rank's forward and backward read it, and each owner writes its slice there in its
      // bucket's collective, so no rank copies the others' slices out. (Below the size each
      // rank copies them out of the slots into its own parameters.)
      params_window_ = std::make_unique<ShmWindow>(comm_, n * sizeof(float));
      if (comm_.rank() == 0) params_counted_ = std::make_unique<CountedAsHeap>(static_cast<int64_t>(n * sizeof(float)));
      shared_params_ = std::span<float>(reinterpret_cast<float*>(params_window_->of(0)), n);
    }
    opt_ = &zopt_->optimizer();
  }
  optimizer_ = opt_;
  start();
}

bool DataParallel::place_in_window() {
  // (A forced all-reduce algorithm is honoured: the window is only for the automatic choice.)
  if (!o_.window || o_.deterministic || o_.algorithm != Algorithm::kAuto || comm_.size() < 2 || !comm_.shm_context())
    return false;
  const auto n = static_cast<size_t>(model_.num_params());
  window_ = std::make_unique<ShmWindow>(comm_, n * sizeof(float));
  window_counted_ = std::make_unique<CountedAsHeap>(static_cast<int64_t>(window_->bytes()));
  share_.place_grad(std::span<float>(reinterpret_cast<float*>(window_->mine()), n));
  return true;
}

void DataParallel::start() {
  // Unless the host has a core beyond one per rank, the progress thread has none of its own:
  // it takes one from a rank's backward, and with more ranks than cores each bucket's phases
  // wait for ranks that are not running (2 ranks on 2 cores: 11.8k ex/s without overlap,
  // 11.4k with; 4 ranks: 8.2k against 7.9k).
  // One rank has nothing to overlap: its bucket work (a fused ZeRO step, or a collective of one
  // that moves nothing) runs on the caller after backward (launch below).
  // Over tcp the same holds, and costs more: the progress thread's copies through the kernel
  // took the backward's core (2 ranks on 2 cores over loopback: 0.56-0.60 ms a step with
  // overlap, its compute 0.44-0.48 ms; 0.53 without, compute 0.28; 2026-12-04). There the
  // host's ranks are the transport's count of the job's ranks on it.
  const bool spare = comm_.shm_context()
                         ? comm_.shm_context()->spare_cores()
                         : std::max(1u, std::thread::hardware_concurrency()) >
                               static_cast<unsigned>(comm_.transport().ranks_on_host());
  overlap_ = o_.overlap && comm_.size() > 1 && spare;
  // Start from rank 0's parameters (identical seeds make this a no-op; a resumed or
  // differently initialised rank is brought in line).
  blocking_broadcast(comm_, inst_, "broadcast-params", model_.params().data(), model_.params().size(),
                     DType::kFloat32, 0);
  share_params();
  if (overlap_) queue_ = std::make_unique<ProgressQueue>(comm_);  // only overlap hands buckets over (launch)
}

Metrics DataParallel::epoch_metrics() {
  if (!zopt_) {
    Metrics m;
    add_split_metrics(m);
    add_straggler_metrics(m);
    return m;
  }
  const ZeroBytes b = zopt_->bytes();
  // shared_params: 1 where the host's ranks read one copy of the parameters (DdpOptions).
  Metrics m{{"zero_optimizer_MB", static_cast<double>(b.optimizer) / 1e6},
            {"zero_grad_MB", static_cast<double>(b.grads) / 1e6},
            {"shared_params", shared_params_.empty() ? 0.0 : 1.0}};
  add_split_metrics(m);
  add_straggler_metrics(m);
  return m;
}

void DataParallel::add_straggler_metrics(Metrics& m) {
  std::vector<float> mine;
  mine.swap(step_compute_);
  if (comm_.size() < 2) return;
  // Every rank ran the same steps; the fewest recorded (kMaxRecordedSteps) are compared.
  double steps = static_cast<double>(mine.size());
  allreduce(comm_, &steps, 1, DType::kFloat64, ReduceOp::kMin);
  const auto n = static_cast<int64_t>(steps);
  if (n == 0) return;
  std::vector<float> all(static_cast<size_t>(n * comm_.size()));
  allgather(comm_, mine.data(), all.data(), static_cast<size_t>(n), DType::kFloat32);
  const StragglerStats st = straggler_stats(all, comm_.size(), n);
  m.emplace_back("straggler_wait_ms", 1e3 * st.wait_s / static_cast<double>(n));
  m.emplace_back("slowest_rank", st.slowest);
  m.emplace_back("slowest_rank_share", st.slowest_share);
}

void DataParallel::add_split_metrics(Metrics& m) const {
  if (split_.even()) return;
  // The smallest and largest rank's fraction of the batch at the epoch's end.
  const std::vector<double>& w = split_.weights();
  m.emplace_back("batch_share_min", *std::min_element(w.begin(), w.end()));
  m.emplace_back("batch_share_max", *std::max_element(w.begin(), w.end()));
}

void DataParallel::submit_bucket(int b) {
  const GradRange r = buckets_.buckets()[static_cast<size_t>(b)];
  if (zopt_) {
    // The engine numbers buckets in order of their offsets.
    int index = 0;
    for (const GradRange& o : buckets_.buckets()) index += o.offset < r.offset;
    ZeroOptimizer* z = zopt_.get();
    std::span<float> grad = share_.grad();
    std::span<float> params = step_params();
    const bool shared = !shared_params_.empty();
    Instrument* inst = inst_;
    // The fused step is an all-reduce whose owners step their slice (allreduce_apply).
    const std::string name = (z->fused() ? "allreduce+step bucket " : "reduce-scatter bucket ") + std::to_string(b);
    const int64_t bytes = r.len * 4;
    launch(name, [=](Communicator&) {
      const double t0 = now_seconds();
      const Algorithm a = z->reduce(index, grad, params, shared);
      if (inst) inst->comm(1, name, t0, now_seconds(), bytes, z->fused() ? coll_args(a, static_cast<size_t>(bytes)) : "");
    });
    return;
  }
  if (window_) {
    // The gradient is in the window: each owner reduces its block of the bucket from every
    // rank's window in place, and everyone copies the sums back into its own (the in-place
    // form of allreduce_apply, nothing applied).
    float* data = share_.grad().data() + r.offset;
    const auto count = static_cast<size_t>(r.len);
    const std::vector<size_t> counts = even_counts(count, comm_.size());
    const ShmWindow* w = window_.get();
    Instrument* inst = inst_;
    const std::string name = "allreduce bucket " + std::to_string(b);
    launch(name, [=](Communicator& c) {
      const double t0 = now_seconds();
      const Algorithm a = allreduce_apply(c, data, data, counts, [](size_t, float*, size_t) { return false; }, {}, w);
      if (inst) inst->comm(1, name, t0, now_seconds(), static_cast<int64_t>(count * 4), coll_args(a, count * 4));
    });
    return;
  }
  const bool det = o_.deterministic;
  void* data = det ? static_cast<void*>(share_.fixed().data() + r.offset) : static_cast<void*>(share_.grad().data() + r.offset);
  const DType t = det ? DType::kInt64 : DType::kFloat32;
  const size_t count = static_cast<size_t>(r.len);
  AllreduceOptions opts;
  opts.algorithm = o_.algorithm;
  Instrument* inst = inst_;
  const std::string name = "allreduce bucket " + std::to_string(b);
  launch(name, [=](Communicator& c) {
    const double t0 = now_seconds();
    Algorithm a = allreduce(c, data, data, count, t, ReduceOp::kSum, opts);
    if (inst) {
      const size_t bytes = count * dtype_size(t);
      inst->comm(1, name, t0, now_seconds(), static_cast<int64_t>(bytes), coll_args(a, bytes));
    }
  });
}

void DataParallel::launch(const std::string& name, std::function<void(Communicator&)> fn) {
  // One rank, or no overlap: on the caller, without the progress thread's two hand-offs
  // (perf of a 1-rank run at batch 8: 11% of the time in waking that thread; the step took
  // 54 us more than localsgd's identical one). Without overlap the caller would only wait:
  // handing the bucket over woke the progress thread on the caller's own core, which the
  // kernel ran at once, and the caller got its core back only after that bucket's work
  // (2 ranks on 2 cores: 0-2.9 ms per step between backward's end and the wait, counted
  // neither as compute nor as wait).
  if (comm_.size() == 1 || !overlap_) {
    fn(comm_);
    return;
  }
  pending_.push_back(queue_->submit(name, std::move(fn), /*bounded=*/true));  // a waiter may run it (coll/work.h)
}

LossAcc DataParallel::step(std::span<const int64_t> global_batch) {
  LossAcc r = step_in_place(global_batch);
  unshare_params();  // the model's own copy holds the step's result too
  return r;
}

LossAcc DataParallel::step_in_place(std::span<const int64_t> global_batch) {
  std::span<float> params = step_params();
  pending_.clear();
  buckets_.reset();
  // The last step's buckets are done on every rank: the re-cut's all-gather has the
  // communicator to itself.
  if (split_.due()) {
    Instrument::Scope s(inst_, "re-cut the batch", SpanKind::kWait);
    split_.rebalance(comm_);
  }
  const auto share = split_.share(static_cast<int64_t>(global_batch.size()), comm_.rank());
  std::vector<int> ready_buckets;
  // Backward: buckets start as they become final (or are held until the end).
  double t_prev = now_seconds();
  const double t_start = t_prev;
  int unit_index = 0;
  const int units = static_cast<int>(share_.units().size());
  LossAcc r = share_.compute(params, global_batch, share, [&](GradRange u) {
    if (inst_) {
      const double t = now_seconds();
      inst_->compute(unit_index == 0 ? "forward+backward layer " + std::to_string(units - 1)
                                     : "backward layer " + std::to_string(units - 1 - unit_index),
                     t_prev, t);
      t_prev = t;
    }
    ++unit_index;
    int b = buckets_.on_ready(u);
    if (b < 0) return;
    if (overlap_) submit_bucket(b);
    else ready_buckets.push_back(b);
  });
  const double t_end = now_seconds();
  if (inst_ && t_end > t_prev) inst_->compute("backward (rest)", t_prev, t_end);
  split_.record(t_end - t_start, share.second - share.first);
  if (step_compute_.size() < kMaxRecordedSteps) step_compute_.push_back(static_cast<float>(t_end - t_start));
  {
    // Without overlap the buckets' collectives run here, on the caller: all of it is waiting.
    Instrument::Scope wait(inst_, "wait for all-reduce", SpanKind::kWait);
    for (int b : ready_buckets) submit_bucket(b);
    for (Work& w : pending_) w.wait();
  }
  {
    Instrument::Scope s(inst_, "optimizer step", SpanKind::kCompute);
    if (o_.deterministic) share_.finish_fixed();
    if (zopt_) zopt_->finish(params, share_.grad(), opt_->lr());
    else opt_->step(params, share_.grad());
  }
  ++step_;
  return r;
}

void DataParallel::share_params() {
  if (shared_params_.empty()) return;
  // The replicas are equal (broadcast at the start, the same steps since, or the same
  // checkpoint): rank 0 puts its copy in the shared buffer, and nobody reads it before.
  std::span<float> mine = model_.params();
  if (comm_.rank() == 0) copy_elements(shared_params_.data(), mine.data(), mine.size());
  barrier(comm_);
}

void DataParallel::unshare_params() {
  if (shared_params_.empty()) return;
  std::span<float> mine = model_.params();
  copy_elements(mine.data(), shared_params_.data(), mine.size());
}

LossAcc DataParallel::run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) {
  step_compute_.clear();  // this epoch's steps only (add_straggler_metrics)
  // With shared parameters the model's own copy is brought up to date after the epoch, for
  // evaluation and checkpoints (and taken as the shared one before it: a resume may load it).
  share_params();
  LossAcc local =
      run_minibatches(order, batch, progress, [&](std::span<const int64_t> ids) { return step_in_place(ids); });
  unshare_params();
  if (local.examples) local.loss /= static_cast<double>(local.examples);
  return sum_stats(comm_, local);
}

}  // namespace dtrain

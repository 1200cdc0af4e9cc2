#include "parallel/local_sgd.h"

#include <algorithm>

#include "base/clock.h"
#include "base/error.h"
#include "data/sampler.h"

namespace dtrain {

LocalSgd::LocalSgd(TrainableModel& model, Optimizer& optimizer, Communicator& comm, const LocalSgdOptions& options,
                   Instrument* inst)
    : ModelStrategy(model, &optimizer),
      opt_(optimizer),
      comm_(comm),
      o_(options),
      inst_(inst),
      replica_(model.make_replica()),
      evaluator_(comm),
      grad_(static_cast<size_t>(model.num_params())) {
  DT_CHECK(o_.sync_every >= 1, InvalidArgument, "--sync-every must be >= 1, got " << o_.sync_every);
  if (o_.post_local_epochs > 0) {
    ddp_ = std::make_unique<DataParallel>(model, optimizer, comm, o_.ddp, inst);
  } else {
    blocking_broadcast(comm_, inst_, "broadcast-params", model_.params().data(), model_.params().size(),
                       DType::kFloat32, 0);
  }
}

void LocalSgd::average() {
  AllreduceOptions opts;
  opts.algorithm = o_.ddp.algorithm;
  blocking_allreduce(comm_, inst_, "average models", model_.params().data(), model_.params().size(),
                     DType::kFloat32, ReduceOp::kAvg, opts);
  since_average_ = 0;
  ++averages_;
}

LossAcc LocalSgd::step(std::span<const int64_t> global_batch) {
  const auto [lo, hi] = data::batch_share(static_cast<int64_t>(global_batch.size()), comm_.rank(), comm_.size());
  std::span<const int64_t> mine = global_batch.subspan(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
  LossAcc r;
  {
    Instrument::Scope s(inst_, "local step", SpanKind::kCompute);
    r = replica_->loss_grad(model_.params(), mine, grad_);
    // A rank with no items this step (B < M) keeps its model: a zero step would still
    // advance momentum and Adam's step count.
    if (!mine.empty()) opt_.step(model_.params(), grad_);
  }
  if (++since_average_ >= o_.sync_every) average();
  return r;
}

LossAcc LocalSgd::run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) {
  averages_ = 0;
  if (ddp_ && epoch_ < o_.post_local_epochs) return ddp_->run_epoch(order, batch, progress);
  LossAcc local = run_minibatches(order, batch, progress, [&](std::span<const int64_t> ids) { return step(ids); });
  if (since_average_ > 0) average();  // one model at the end of every epoch
  if (local.examples) local.loss /= static_cast<double>(local.examples);
  return sum_stats(comm_, local);
}

}  // namespace dtrain

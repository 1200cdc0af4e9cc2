#include "parallel/dist_common.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "base/clock.h"
#include "base/error.h"

namespace dtrain {

LossAcc run_minibatches(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress,
                        const std::function<LossAcc(std::span<const int64_t>)>& step) {
  DT_CHECK(batch >= 1, InvalidArgument, "--batch must be >= 1, got " << batch);
  LossAcc local;
  const auto n = static_cast<int64_t>(order.size());
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t len = std::min(batch, n - first);
    LossAcc r = step(order.subspan(static_cast<size_t>(first), static_cast<size_t>(len)));
    local.loss += r.loss * static_cast<double>(r.examples);
    local.correct += r.correct;
    local.examples += r.examples;
    if (progress && local.examples > 0) progress(first + len, local.loss / static_cast<double>(local.examples));
  }
  return local;
}

LossAcc sum_stats(Communicator& comm, const LossAcc& local) {
  double v[3] = {local.loss * static_cast<double>(local.examples), static_cast<double>(local.correct),
                 static_cast<double>(local.examples)};
  AllreduceOptions o;
  o.deterministic = true;
  allreduce(comm, v, 3, DType::kFloat64, ReduceOp::kSum, o);
  LossAcc g;
  g.examples = static_cast<int64_t>(v[2]);
  g.correct = static_cast<int64_t>(v[1]);
  g.loss = g.examples ? v[0] / v[2] : 0.0;
  return g;
}

std::string coll_args(Algorithm a, size_t bytes) {
  return std::string("\"algorithm\":\"") + algorithm_name(a) + "\",\"bytes\":" + std::to_string(bytes);
}

// A blocking collective is communication and, since nothing overlaps it, waiting too.
void record_blocking(Instrument* inst, const std::string& name, double t0, double t1, size_t bytes, Algorithm a) {
  if (!inst) return;
  inst->blocking(name, t0, t1, static_cast<int64_t>(bytes), coll_args(a, bytes));
}

Algorithm blocking_allreduce(Communicator& comm, Instrument* inst, const std::string& name, void* buf, size_t count,
                             DType t, ReduceOp op, const AllreduceOptions& opts) {
  const double t0 = now_seconds();
  Algorithm a = allreduce(comm, buf, count, t, op, opts);
  const double t1 = now_seconds();
  record_blocking(inst, name, t0, t1, count * dtype_size(t), a);
  return a;
}

Algorithm blocking_broadcast(Communicator& comm, Instrument* inst, const std::string& name, void* buf, size_t count,
                             DType t, int root, const BroadcastOptions& opts) {
  const double t0 = now_seconds();
  Algorithm a = broadcast(comm, buf, count, t, root, opts);
  const double t1 = now_seconds();
  record_blocking(inst, name, t0, t1, count * dtype_size(t), a);
  return a;
}

LossAcc ShardedEvaluator::evaluate(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) {
  if (cached_for_ != &ds) {
    const int64_t r = comm_.rank(), m = comm_.size();
    const int64_t lo = ds.rows * r / m, hi = ds.rows * (r + 1) / m;
    std::vector<int64_t> ids(static_cast<size_t>(hi - lo));
    std::iota(ids.begin(), ids.end(), lo);
    slice_ = data::subset(ds, ids);
    cached_for_ = &ds;
  }
  LossAcc local = slice_.rows > 0 ? model.evaluate(slice_, pool) : LossAcc{};
  return sum_stats(comm_, local);
}

double consensus_distance(Communicator& comm, Instrument* inst, std::span<const float> params, std::span<float> mean) {
  std::vector<double> avg(params.begin(), params.end());
  AllreduceOptions o;
  o.deterministic = true;
  blocking_allreduce(comm, inst, "consensus-mean", avg.data(), avg.size(), DType::kFloat64, ReduceOp::kSum, o);
  const double inv = 1.0 / comm.size();
  double d2 = 0;
  for (size_t i = 0; i < avg.size(); ++i) {
    const double m = avg[i] * inv;
    mean[i] = static_cast<float>(m);
    const double d = static_cast<double>(params[i]) - m;
    d2 += d * d;
  }
  blocking_allreduce(comm, inst, "consensus-distance", &d2, 1, DType::kFloat64, ReduceOp::kSum, o);
  return d2 * inv;
}

}  // namespace dtrain

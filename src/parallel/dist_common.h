// parallel/dist_common.h — small pieces every distributed strategy uses.
//
// Contract
// - sum_stats(comm, local): the global LossAcc of per-rank (mean loss, correct, examples)
//   triples: losses weighted by examples, in float64, deterministic order.
// - run_minibatches(order, batch, progress, step): calls step(ids) on consecutive minibatches
//   of `order`, reports progress after each, and returns this rank's LossAcc with the loss
//   summed over examples (divide by examples for the mean). Not collective by itself.
// - blocking_allreduce(...) / blocking_broadcast(...): a collective on the training thread,
//   recorded in the Instrument as communication AND waiting (nothing overlaps it), with the
//   algorithm the collective layer chose and the bytes.
// - ShardedEvaluator scores a dataset whose model is identical on every rank: rank r scores
//   rows [n*r/M, n*(r+1)/M) (its slice is copied once and cached) and the counts are summed,
//   so evaluation costs 1/M of a full pass per rank. Every rank must call it.
// - param_distance2(comm, params): consensus distance (1/M) sum_r ||x_r - mean x||^2 and the
//   mean model, for decentralized strategies.
// Thread-safety: training-thread only (these are blocking collectives on `comm`).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "coll/collectives.h"
#include "data/dataset.h"
#include "parallel/instrument.h"
#include "parallel/threads.h"
#include "parallel/threads_model.h"

namespace dtrain {

LossAcc sum_stats(Communicator& comm, const LossAcc& local);
LossAcc run_minibatches(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress,
                        const std::function<LossAcc(std::span<const int64_t>)>& step);

Algorithm blocking_allreduce(Communicator& comm, Instrument* inst, const std::string& name, void* buf, size_t count,
                             DType t, ReduceOp op, const AllreduceOptions& opts = {});
Algorithm blocking_broadcast(Communicator& comm, Instrument* inst, const std::string& name, void* buf, size_t count,
                             DType t, int root, const BroadcastOptions& opts = {});

class ShardedEvaluator {
 public:
  explicit ShardedEvaluator(Communicator& comm) : comm_(comm) {}
  LossAcc evaluate(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool);

 private:
  Communicator& comm_;
  const data::Dataset* cached_for_ = nullptr;
  data::Dataset slice_;
};

// Returns (1/M) sum_r ||x_r - xbar||^2; `mean` receives xbar (may alias nothing in params).
double consensus_distance(Communicator& comm, Instrument* inst, std::span<const float> params, std::span<float> mean);

// A JSON args body for a collective span: "algorithm":"ring","bytes":N.
std::string coll_args(Algorithm a, size_t bytes);

}  // namespace dtrain

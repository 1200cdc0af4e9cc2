// parallel/param_server.h — parameter servers: synchronous, asynchronous, bounded staleness.
//
// Roles. Of M ranks the LAST S are servers and the first W = M - S are workers. Server s
// owns the contiguous range [P*s/S, P*(s+1)/S) of the flat parameter vector (the model keeps
// every parameter in one buffer, so a key range is a plain slice) and runs the optimizer on
// it (its own Optimizer over that range: momentum / Adam moments live on the server).
//
// Worker step t: compute c_w, the worker's share of the global minibatch t's gradient
// (parallel/share_grad.h with the W workers as the world: c_w = (n_w/B) * mean gradient),
// PUSH each server its slice of c_w, then PULL each server's current slice of parameters.
//
// Synchronous (--sync): server s receives the W pushes of step t, sums them in worker order
// (float; or fixed-point int64 in deterministic mode, which makes a sync parameter server
// produce exactly the bits of deterministic ddp and of one process with batch B), takes one
// optimizer step and sends the new slice to every worker: a barrier per step, i.e. minibatch
// SGD with batch B.
//
// Asynchronous: one server thread per worker receives that worker's pushes and applies each
// as its own optimizer step the moment it arrives (a mutex orders the updates), then
// replies with the current slice. With --staleness K the reply to a worker's c-th push
// waits until every worker has pushed at least c - K times (stale synchronous parallel), so
// no worker runs more than K steps ahead of the slowest. The reply is a snapshot taken the
// moment the bound holds (by whichever thread's update made it hold), so K = 0 makes every
// step a barrier whose replies all carry the parameters right after that step's last
// update: for plain SGD the synchronous server up to float rounding (the pushes of a step
// are applied in arrival order; with momentum/Adam each push is its own optimizer step, so
// it is not). Unbounded (no --staleness): replies at once.
// Staleness of a push = updates the server applied between the worker's previous pull and
// this push (0 on a lone worker; W-1 at most per step with K = 0).
//
// Synchronous on one host (the communicator has a shared-memory context), the slices are not
// sent: a worker computes its gradient in its slot of a shared-memory window (the
// deterministic fixed-point one is copied there) and sends each server a one-byte word; a
// server sums the workers' slices where they lie, steps, copies its slice into its own slot
// and sends each worker a word; a worker copies the new slices out.
// One slot per rank is enough: a worker rewrites its slot only after the server's word of the
// step before (sent once the server had summed it), a server only after every worker's word
// of the next step (sent once the worker had copied the slice out). The messages copied each
// slice into a ring and out again, and the server did it for every worker in turn (at 8 ranks
// on 2 cores it waited for its replies more than it computed); the same sums in the same
// order: bit-identical models.
//
// Epoch end: every server broadcasts its slice, so all ranks hold the same model for
// evaluation and checkpoints. Checkpoints carry each server's optimizer state
// (save_state). epoch_metrics(): staleness_mean, staleness_max, server_busy_s (max over
// servers: time spent applying updates), pushes (total).
// Thread-safety: driven by one thread; an async server runs one thread per worker.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "base/heap_stats.h"
#include "coll/shm_context.h"
#include "parallel/dist_common.h"
#include "parallel/share_grad.h"
#include "parallel/model_strategy.h"

namespace dtrain {

struct PsOptions {
  int servers = 1;
  bool sync = false;
  int64_t staleness = -1;  // async only; -1 = unbounded
  bool deterministic = false;
  int64_t det_shard = 8;
  OptimizerConfig optimizer;  // the servers' optimizer
  bool window = true;         // --sync on one host: through a shared-memory window (above)
};

class ParamServer : public ModelStrategy {
 public:
  ParamServer(TrainableModel& model, Communicator& comm, const PsOptions& options, const float* lr,
              Instrument* inst);
  ~ParamServer() override;
  const char* name() const override { return "ps"; }
  int threads() const override { return 1; }
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) override;
  Metrics epoch_metrics() override;
  LossAcc evaluate_on(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) override {
    return evaluator_.evaluate(model, ds, pool);
  }
  std::vector<uint8_t> save_state() const override;
  void load_state(std::span<const uint8_t> bytes) override;
  const Instrument* instrument() const override { return inst_; }

  bool is_server() const { return server_ >= 0; }
  bool exchanges_through_window() const { return window_ != nullptr; }
  int workers() const { return workers_; }
  GradRange range_of(int server) const;

 private:
  LossAcc worker_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress);
  void server_epoch_sync(int64_t steps);
  void server_epoch_async(int64_t steps);
  void serve_worker_async(int w, int64_t steps);
  void fill_ready_replies_locked();
  void broadcast_model();

  Communicator& comm_;
  PsOptions o_;
  const float* lr_;
  Instrument* inst_;
  int workers_;
  int server_ = -1;  // this rank's server index, or -1 for a worker
  std::unique_ptr<ShareGradient> share_;  // workers
  std::unique_ptr<Optimizer> opt_;        // servers: over range_of(server_)
  ShardedEvaluator evaluator_;
  // Async bookkeeping (servers).
  std::mutex mu_;
  std::unique_ptr<std::condition_variable> cv_;
  bool failed_ = false;
  std::vector<int64_t> clock_;         // pushes received per worker
  std::vector<int64_t> version_sent_;  // server version in the last reply to each worker
  std::vector<int64_t> waiting_;       // the push clock a worker awaits its reply for, or -1
  std::vector<bool> ready_;            // its reply snapshot is taken
  std::vector<std::vector<float>> replies_;
  int64_t version_ = 0;
  double stale_sum_ = 0, stale_max_ = 0, busy_ = 0;
  int64_t pushes_ = 0;
  // The window path (--sync on one host): a worker's slot holds its gradient (float, or the
  // deterministic int64), a server's its slice; counted as this rank's heap.
  std::unique_ptr<ShmWindow> window_;
  std::unique_ptr<CountedAsHeap> window_counted_;
};

}  // namespace dtrain

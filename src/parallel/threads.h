// parallel/threads.h — deterministic minibatch SGD over T threads on one machine.
//
// Algorithm. Every step takes one minibatch of B examples and cuts it into S "shards" at
// fixed positions (shard k = examples [B*k/S, B*(k+1)/S)). S is a constant (8 by default,
// raised to T when T > 8), NOT the thread count, so the cut does not depend on T. Each shard's
// mean gradient is computed by its own replica into its own buffer, the T threads taking
// shards as the pool hands them out. The batch gradient is then
//     g = sum_k (n_k / B) * g_k        summed in shard order k = 0, 1, ..., S-1
// for every coordinate (the coordinates split across the threads), and the optimizer takes
// one step. Because the shard cut, each shard's arithmetic and the summation order are all
// independent of T, the parameters after any number of steps are bit-for-bit identical for
// T = 1, 2, 4, ... up to S. (BLAS must run single-threaded inside replicas: set_blas_threads(1).)
//
// LocalStrategy is the interface the trainer drives: one call per epoch with the epoch's
// example order. `progress(done, mean_loss_so_far)` is called on the calling thread after
// each batch (or, for HOGWILD!, regularly) for the progress bar.
// The remaining virtuals are hooks for distributed strategies (parallel/data_parallel.h and
// siblings); their defaults suit a single process: begin_epoch(e) announces the 0-based
// epoch before run_epoch (so a resumed run knows where it is); epoch_metrics() adds named
// numbers to the epoch's row (consensus distance, staleness, ...); evaluate() scores the
// model the strategy stands for; save_state/load_state carry state beyond the parameters
// and the trainer's optimizer into checkpoints; instrument() reports where time went.
// Thread-safety: a strategy object is driven by one thread; it runs its own worker threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "optim/optimizer.h"
#include "parallel/instrument.h"
#include "parallel/threads_model.h"

namespace dtrain {

using ProgressFn = std::function<void(int64_t done, double mean_loss)>;

class LocalStrategy {
 public:
  virtual ~LocalStrategy() = default;
  virtual const char* name() const = 0;
  virtual int threads() const = 0;
  // Trains on `order` in minibatches of `batch` (the last one shorter). Returns the mean
  // training loss and accuracy as measured during the epoch (before each update).
  virtual LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) = 0;

  virtual void begin_epoch(int64_t /*epoch*/) {}
  virtual std::vector<std::pair<std::string, double>> epoch_metrics() { return {}; }
  virtual LossAcc evaluate(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) {
    return model.evaluate(ds, pool);
  }
  virtual std::vector<uint8_t> save_state() const { return {}; }
  virtual void load_state(std::span<const uint8_t> /*bytes*/) {}
  virtual const Instrument* instrument() const { return nullptr; }
};

class SyncThreads : public LocalStrategy {
 public:
  // `optimizer` steps the whole parameter buffer; it and `model` outlive this object.
  SyncThreads(TrainableModel& model, Optimizer& optimizer, int threads, int shards = 8);
  const char* name() const override { return threads_ == 1 ? "single" : "threads"; }
  int threads() const override { return threads_; }
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) override;

  // One optimizer step on `batch`; returns its mean loss and correct count.
  LossAcc step(std::span<const int64_t> batch);
  int shards() const { return shards_; }

 private:
  TrainableModel& model_;
  Optimizer& opt_;
  int threads_;
  int shards_;
  ThreadPool pool_;
  std::vector<std::unique_ptr<Replica>> replicas_;  // one per shard
  std::vector<std::vector<float>> shard_grads_;     // one per shard
  std::vector<LossAcc> shard_results_;
  std::vector<float> grad_;
};

}  // namespace dtrain

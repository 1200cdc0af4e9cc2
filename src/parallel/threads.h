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
// SyncThreads is a ModelStrategy (parallel/model_strategy.h): single is SyncThreads with one
// thread and one shard (the whole minibatch in one gemm).
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
#include "parallel/model_strategy.h"

namespace dtrain {

class SyncThreads : public ModelStrategy {
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
  void sum_shards(int64_t batch);  // grad_ = the shards' gradients, weighted, in shard order

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

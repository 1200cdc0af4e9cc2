// parallel/model_strategy.h — the strategies that train a TrainableModel (the MLP and the
// sparse linear models) epoch by epoch: single, threads, hogwild, ddp, ps, localsgd, gossip,
// fedavg.
//
// ModelStrategy implements the Strategy interface (parallel/strategy.h) once for the whole
// family, on a few hooks each member overrides:
//   run_epoch(order, batch, progress)  trains one pass over `order` (required);
//   begin_epoch(e), epoch_metrics()     announce the 0-based epoch; add named numbers to its row;
//   evaluate_on(model, ds, pool)       scores the model the strategy stands for (ddp: shards
//                                      the evaluation over the ranks; gossip: the average);
//   save_state() / load_state()        state beyond the parameters and the optimizer (a
//                                      parameter server's shard, ...).
// The family's checkpoint sections are "params" (this rank's copy of the model), "optimizer"
// (when the strategy steps one) and "strategy" (save_state()).
//
// Contract
// - `model`, `optimizer` (may be null: hogwild, ps and fedavg apply their own updates) and the
//   evaluation set outlive the strategy. set_eval_set(nullptr) (the default) evaluates on the
//   training set.
// Thread-safety: driven by one thread; members run their own worker threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "optim/optimizer.h"
#include "parallel/strategy.h"

namespace dtrain {

class ModelStrategy : public Strategy {
 public:
  ModelStrategy(TrainableModel& model, Optimizer* optimizer) : model_(model), optimizer_(optimizer) {}

  // The family's hooks.
  virtual LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& progress) = 0;
  virtual void begin_epoch(int64_t /*epoch*/) {}
  virtual Metrics epoch_metrics() { return {}; }
  virtual LossAcc evaluate_on(TrainableModel& model, const data::Dataset& ds, ThreadPool* pool) {
    return model.evaluate(ds, pool);
  }
  virtual std::vector<uint8_t> save_state() const { return {}; }
  virtual void load_state(std::span<const uint8_t> /*bytes*/) {}

  void set_eval_set(const data::Dataset* ds) { eval_set_ = ds; }
  TrainableModel& model() { return model_; }

  // Strategy, once for the family.
  std::string describe() const override;
  int64_t examples_per_epoch() const override { return model_.train_set().rows; }
  void begin_round(const Round& round) override {
    if (round.part == 0) begin_epoch(round.epoch);
  }
  LossAcc train_round(const Round& round, const ProgressFn& progress) override {
    return run_epoch(round.order, round.batch, progress);
  }
  Metrics round_metrics() override { return epoch_metrics(); }
  LossAcc evaluate(ThreadPool* pool) override {
    return evaluate_on(model_, eval_set_ ? *eval_set_ : model_.train_set(), pool);
  }
  int64_t steps() const override { return optimizer_ ? optimizer_->steps() : 0; }
  void save(StateSections& state) const override;
  void load(const StateSections& state) override;

 protected:
  TrainableModel& model_;
  Optimizer* optimizer_;

 private:
  const data::Dataset* eval_set_ = nullptr;
};

}  // namespace dtrain

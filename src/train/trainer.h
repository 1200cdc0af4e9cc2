// train/trainer.h — the epoch loop: data order, strategy, evaluation, checkpoints, progress.
//
// Loop. For epoch e (0-based) the trainer draws the order epoch_permutation(n, seed, e) —
// a pure function of (seed, e), so the data order needs no RNG state beyond the seed — hands
// it to the strategy (single / threads / hogwild / ...), evaluates the test split, prints a
// progress line and, with a checkpoint directory, saves DIR/checkpoint.dtc.
//
// Checkpoints hold: the parameters, the optimizer's state (Optimizer::save_state: step
// count, moments, hyper-parameters), the number of finished epochs and optimizer steps, the
// seed, a model/data fingerprint, and the metrics of every finished epoch. resume = true
// restores all of it and continues with the next epoch, so a deterministic strategy
// (single, threads) produces exactly the losses and parameters of an uninterrupted run.
// A checkpoint for another model or dataset is refused (InvalidArgument naming both).
//
// Distributed runs (options.comm with size() > 1): every rank runs this loop with its own
// strategy object (ddp, ps, gossip, ...), which does the communication. Each rank writes its
// own checkpoint, DIR/checkpoint.rank-R.dtc (parameters, the trainer's optimizer, and the
// strategy's own state: a parameter server's shard, ...), keeping the previous one as
// DIR/checkpoint.rank-R.prev.dtc. A rank killed while the others save leaves the ranks one
// epoch apart; --resume therefore agrees on the newest epoch EVERY rank has (an all-reduce of
// the epochs found) and loads that generation, so no step is lost or repeated.
// The strategy's hooks (parallel/threads.h) evaluate, add epoch metrics and save state.
//
// Thread-safety: run() drives everything from the calling thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coll/communicator.h"
#include "optim/optimizer.h"
#include "parallel/threads.h"
#include "train/progress.h"

namespace dtrain {

struct TrainOptions {
  std::string strategy = "single";
  int threads = 1;
  int64_t epochs = 1;
  int64_t batch = 32;
  OptimizerConfig optimizer;  // kind, lr, momentum, ...
  uint64_t seed = 0;
  std::string checkpoint_dir;  // empty: no checkpoints
  bool resume = false;
  int64_t stop_after_epochs = -1;  // stop early after this many epochs of THIS run (tests)
  std::FILE* out = stdout;         // progress; nullptr = silent
  bool tty = false;
  Communicator* comm = nullptr;    // distributed runs: every rank runs the trainer
};

struct TrainReport {
  std::vector<EpochRow> epochs;  // every epoch, including ones restored from a checkpoint
  LossAcc test;                  // after the last epoch (test split, or train if none)
  bool test_is_train = false;
  double wall_seconds = 0;       // this run, training + evaluation
  double train_seconds = 0;      // this run, training only
  int64_t examples = 0;          // trained in this run
  double examples_per_second = 0;
  int64_t steps = 0;             // optimizer steps in total
  int64_t resumed_from_epoch = 0;
  TimeSplit split;               // this rank's compute / comm / wait (distributed strategies)
};

// Builds the strategy for a run: model, its optimizer, and a pointer to the current
// learning rate (strategies that apply their own updates read it every epoch).
using StrategyFactory =
    std::function<std::unique_ptr<LocalStrategy>(TrainableModel&, Optimizer&, const float* lr, const TrainOptions&)>;

class Trainer {
 public:
  // `test` may be null or empty; then the final metrics are on the training set.
  Trainer(TrainableModel& model, const data::Dataset* test, TrainOptions options, StrategyFactory factory);
  TrainReport run();

  std::string checkpoint_path() const;

 private:
  void save(int64_t epochs_done, const std::vector<EpochRow>& rows, const LocalStrategy* strategy) const;
  int64_t restore(std::vector<EpochRow>& rows, std::vector<uint8_t>* strategy_state);
  bool distributed() const { return opt_.comm != nullptr && opt_.comm->size() > 1; }
  std::string fingerprint() const;

  TrainableModel& model_;
  const data::Dataset* test_;
  TrainOptions opt_;
  StrategyFactory factory_;
  std::unique_ptr<Optimizer> optimizer_;
  float lr_;
};

}  // namespace dtrain

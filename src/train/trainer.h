// train/trainer.h — the one training loop: rounds, evaluation, checkpoints, resume, progress.
//
// Loop. A run is a sequence of rounds (parallel/strategy.h). For a strategy over a dataset a
// round is epoch e (0-based), whose order epoch_permutation(n, seed, e) is a pure function of
// (seed, e), so the data order needs no RNG state beyond the seed; with round_steps = K > 0
// each epoch is cut into parts of K steps (K x batch examples of that order), each a round. For a strategy over sampled
// data (the GPT) round r is the steps [r K, min((r + 1) K, S)) of S = options.steps with
// K = options.round_steps. After each round the trainer evaluates, prints a progress line and,
// with a checkpoint directory, saves.
//
// Checkpoints hold the fingerprint (the strategy's describe(), batch, seed, strategy and world
// size), the number of finished rounds, the metrics of every finished round, and the
// strategy's own sections (its parameters or shard, optimizer state, server state, step
// counters). resume = true restores all of it and continues with the next round, so a
// deterministic strategy produces exactly the losses and parameters of an uninterrupted run.
// A checkpoint for another model, data or layout is refused (InvalidArgument naming both).
// One process writes DIR/checkpoint.dtc; rank R of a distributed run writes
// DIR/checkpoint.rank-R.dtc and keeps the previous one as DIR/checkpoint.rank-R.prev.dtc. A
// rank killed while the others save leaves the ranks one round apart; resume therefore agrees
// on the newest round EVERY rank has (an all-reduce of the rounds found) and loads that one.
//
// Thread-safety: run() drives everything from the calling thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "coll/communicator.h"
#include "parallel/strategy.h"
#include "train/progress.h"

namespace dtrain {

struct TrainOptions {
  int64_t epochs = 1;       // strategies over a dataset
  int64_t steps = 0;        // strategies over sampled data: optimizer steps in all
  int64_t round_steps = 0;  // steps per round: sampled data (0: steps / 10, at least 1), or a
                            // dataset's epochs cut into parts of this many steps (0: whole epochs)
  int64_t batch = 32;
  uint64_t seed = 0;
  int threads = 1;          // evaluation threads
  std::string strategy;     // for the fingerprint
  std::string checkpoint_dir;  // empty: no checkpoints
  bool resume = false;
  bool resume_if_present = false;  // resume when checkpoints exist, else start (restarted jobs)
  int64_t stop_after_rounds = -1;  // stop early after this many rounds of THIS run (tests)
  std::FILE* out = stdout;         // progress; nullptr = silent
  bool tty = false;
  Communicator* comm = nullptr;    // distributed runs: every rank runs the trainer
};

struct TrainReport {
  std::vector<EpochRow> epochs;  // every round, including ones restored from a checkpoint
  LossAcc test;                  // after the last round (test split, or train if none)
  bool classifies = true;        // false: accuracies are meaningless (the GPT)
  double wall_seconds = 0;       // this run, training + evaluation
  double train_seconds = 0;      // this run, training only
  int64_t examples = 0;          // trained in this run (sequences for the GPT)
  double examples_per_second = 0;
  int64_t steps = 0;             // optimizer steps in total
  int64_t resumed_from_epoch = 0;
  TimeSplit split;               // this rank's compute / comm / wait (distributed strategies)
  int64_t train_heap_peak = 0;   // bytes: heap high-water mark inside train_round (base/heap_stats.h), max over rounds, less what the evaluations between rounds left live (trainer.cc)
};

class Trainer {
 public:
  // `strategy` outlives the trainer. Throws InvalidArgument for impossible options.
  Trainer(Strategy& strategy, TrainOptions options);
  TrainReport run();

  std::string checkpoint_path() const;
  int64_t rounds() const { return rounds_; }

 private:
  void save(int64_t rounds_done, const std::vector<EpochRow>& rows) const;
  int64_t restore(std::vector<EpochRow>& rows);
  bool distributed() const { return opt_.comm != nullptr && opt_.comm->size() > 1; }
  bool by_steps() const { return strategy_.examples_per_epoch() == 0; }
  Round round(int64_t r, std::vector<int64_t>& order) const;
  std::string fingerprint() const;

  Strategy& strategy_;
  TrainOptions opt_;
  int64_t rounds_ = 0;
  int64_t parts_ = 1;  // rounds per epoch (dataset strategies)
};

}  // namespace dtrain

// train/run.h — one rank's whole training run from a TrainConfig: load the data, build the
// model and the strategy from the registry (train/strategies.h), run the Trainer, gather
// every rank's time split and timeline, and build the report. `dtrain train` is this plus
// flag parsing, launching and printing; programs that embed dtrain call it directly.
//
// Contract
// - Every rank of a job calls run_training with the same config (collective); a dataset
//   strategy that is not distributed needs no communicator.
// - The result holds the report on every rank; the JSON document and the gathered splits are
//   complete on rank 0. With options.out, rank 0 prints progress there; with config.trace,
//   rank 0 writes the Chrome timeline of every rank.
// - Fault injection for chaos tests and soak runs (the caller reads DTRAIN_FAULT_KILL, see
//   cli/train_cmd.cc): options.kill_round = K makes this rank kill itself with SIGKILL when
//   0-based round K begins, options.kill_step = S when its S-th step of this run (0-based)
//   begins — a crash, not an error exit (or, with kill_signal = SIGSTOP, a hang).
// - options.resume_if_present: a restarted job (DTRAIN_RESTART > 0) resumes from the
//   checkpoints when every rank has one, else starts over.
// Thread-safety: one call per rank.
#pragma once

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "coll/communicator.h"
#include "train/config.h"
#include "train/strategies.h"
#include "train/trainer.h"

namespace dtrain {

struct RunOptions {
  std::FILE* out = nullptr;  // progress on rank 0; nullptr = silent
  bool tty = false;
  int64_t kill_round = -1;   // this rank SIGKILLs itself when this round begins (-1: never)
  int64_t kill_step = -1;    // ... when its step S of this run begins (-1: never)
  int kill_signal = 9;       // SIGKILL; SIGSTOP freezes the rank instead (a hang)
  bool resume_if_present = false;
};

struct RunResult {
  TrainJob job;
  TrainReport report;
  std::vector<TimeSplit> splits;  // every rank's, on rank 0
  nlohmann::json json;            // the --json document (rank 0)
  int rank = 0, world = 1;
};

// `comm` may be null for single-process strategies (and is created from the environment
// when the strategy needs one and none is given).
RunResult run_training(const TrainConfig& config, std::shared_ptr<Communicator> comm, const RunOptions& options);

}  // namespace dtrain

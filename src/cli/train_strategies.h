// cli/train_strategies.h — the registry of `dtrain train --strategy` values.
//
// Contract
// - strategies() is an ordered table; each row names a strategy, says in one line what it
//   does, checks the flag combination it needs (throwing InvalidArgument with the fix), and
//   builds the LocalStrategy the Trainer drives — or, for strategies that are not one
//   training loop (search, ensemble), runs the whole job itself (`run`).
// - `distributed` rows run on every rank of a job (-n N relaunches through cli/launch.h) and
//   get the world Communicator and the rank's Instrument in the StrategyContext. Adding a strategy = adding a row (plus its
//   implementation in parallel/); train_cmd.cc never switches on strategy names.
// - find_strategy(name) throws InvalidArgument listing the known names.
// Thread-safety: the table is immutable.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/train_flags.h"
#include "data/dataset.h"
#include "parallel/instrument.h"
#include "train/trainer.h"

namespace dtrain::cli {

struct StrategyContext {
  const TrainFlags& flags;
  Communicator* comm = nullptr;  // distributed rows: the job's world (size 1 for -n 1)
  Instrument* instrument = nullptr;
};

using StrategyBuilder = std::function<std::unique_ptr<LocalStrategy>(TrainableModel&, Optimizer&, const float* lr,
                                                                     const TrainOptions&, const StrategyContext&)>;
// A whole job (search, ensemble): returns the process exit code.
using StrategyRun = std::function<int(const TrainFlags&, Communicator&, const data::DataSplit&)>;

struct StrategyEntry {
  std::string name;
  std::string help;
  std::function<void(const TrainFlags&)> validate;
  StrategyBuilder make;
  bool distributed = false;
  StrategyRun run;  // set for whole-job strategies; then make is empty
};

const std::vector<StrategyEntry>& strategies();
const StrategyEntry& find_strategy(const std::string& name);
std::string strategies_help();

}  // namespace dtrain::cli

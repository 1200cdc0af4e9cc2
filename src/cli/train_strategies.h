// cli/train_strategies.h — the registry of `dtrain train --strategy` values.
//
// Contract
// - strategies() is an ordered table; each row names a strategy, says in one line what it
//   does, checks the flag combination it needs (throwing InvalidArgument with the fix), and
//   builds the LocalStrategy the Trainer drives. Adding a strategy = adding a row (plus its
//   implementation in parallel/); train_cmd.cc never switches on strategy names.
// - find_strategy(name) throws InvalidArgument listing the known names.
// Thread-safety: the table is immutable.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/train_flags.h"
#include "train/trainer.h"

namespace dtrain::cli {

struct StrategyEntry {
  std::string name;
  std::string help;
  std::function<void(const TrainFlags&)> validate;
  StrategyFactory make;
};

const std::vector<StrategyEntry>& strategies();
const StrategyEntry& find_strategy(const std::string& name);
std::string strategies_help();

}  // namespace dtrain::cli

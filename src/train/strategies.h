// train/strategies.h — the registry of `--strategy` values: one row per strategy, for the
// MLP, the sparse models and the GPT alike.
//
// Contract
// - strategies() is an ordered table. Each row names a strategy, says in one line what it
//   does, which models it trains (dataset models, the GPT, or both), checks the flag
//   combination it needs (throwing InvalidArgument with the fix, before any rank starts), and
//   builds the Strategy (parallel/strategy.h) the Trainer drives — or, for the strategies that
//   are not one training loop (search, ensemble), runs the whole job itself (`run`).
// - `distributed` rows run on every rank of a job (-n N relaunches through launch/launch.h) and
//   get the world Communicator and the rank's Instrument in the StrategyContext.
// - Adding a strategy = adding a row (plus its implementation in parallel/); nothing else
//   switches on strategy names.
// - find_strategy(name) throws InvalidArgument listing the known names; check_config(c)
//   runs every check that can be made before the data is loaded.
// Thread-safety: the table is immutable.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coll/communicator.h"
#include "data/dataset.h"
#include "data/text.h"
#include "parallel/instrument.h"
#include "parallel/strategy.h"
#include "train/config.h"

namespace dtrain {

// What a rank trains: the data, the model and optimizer (dataset models), and the strategy.
// Members are destroyed in reverse order, the strategy first.
struct TrainJob {
  data::DataSplit split;          // dataset models
  data::TextData text;            // the GPT
  std::unique_ptr<TrainableModel> model;
  std::unique_ptr<Optimizer> optimizer;
  float lr = 0;                   // read by strategies that apply their own updates
  std::unique_ptr<Strategy> strategy;
};

struct StrategyContext {
  const TrainConfig& config;
  Communicator* comm = nullptr;  // distributed rows: the job's world (size 1 for -n 1)
  Instrument* instrument = nullptr;
};

enum class Models { kDataset, kGpt, kBoth };

// Fills job.strategy (and job.optimizer) for a job whose data (and model) are loaded.
using StrategyBuilder = std::function<void(TrainJob& job, const StrategyContext& ctx)>;
// A whole job (search, ensemble): returns the results document (complete on rank 0).
using StrategyRun = std::function<nlohmann::json(const TrainConfig&, Communicator&, const data::DataSplit&, std::FILE*)>;

struct StrategyEntry {
  std::string name;
  std::string help;
  Models models = Models::kDataset;
  bool distributed = false;
  std::function<void(const TrainConfig&)> validate;
  StrategyBuilder make;
  StrategyRun run;  // set for whole-job strategies; then make is empty
};

const std::vector<StrategyEntry>& strategies();
const StrategyEntry& find_strategy(const std::string& name);
std::string strategies_help();
// Every check possible before loading data: the strategy exists, trains this model, and its
// flags fit together (a GPT mesh that matches -n, a batch divisible by dp x microbatches).
const StrategyEntry& check_config(const TrainConfig& c);
// --batch-split W0,W1,... as numbers, one per rank (InvalidArgument otherwise); empty for
// auto, even and measured (DdpOptions::split_weights).
std::vector<double> batch_split_weights(const TrainConfig& c);

}  // namespace dtrain

// cli/train_flags.h — the flags of `dtrain train`, parsed from a declarative table.
//
// Contract
// - TrainFlags holds every option with its default. parse_train_flags(args) accepts
//   "--name value", "--name=value" and, for switches, "--name"; "-n N" and "-t T" are short
//   forms of --ranks and --threads.
// - Every mistake throws InvalidArgument with a sentence that says what was wrong and how
//   to fix it: an unknown flag (with the closest known flag suggested), a missing value, a
//   value of the wrong type or range, a positional argument.
// - Flags are rows of a table (name, value name, help, setter), so a strategy that needs a
//   new flag adds one row; train_usage() prints the table, so --help never goes stale.
// - Which strategies exist is not decided here: the strategy registry lives in
//   cli/train_strategies.h; this file only stores the name.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::cli {

struct TrainFlags {
  std::string strategy = "single";
  int threads = 1;
  int ranks = 1;  // -n N, for multi-process strategies (ddp, ps, ...)
  std::string model = "mlp:784-256-128-10";
  std::string data = "fashion-mnist";
  int64_t epochs = 5;
  int64_t batch = 64;
  std::optional<float> lr;  // default depends on the optimizer
  std::string optimizer = "sgd";
  float momentum = 0.9f;    // for --optimizer momentum / nesterov
  float weight_decay = 0.0f;
  float l2 = 0.0f;          // sparse models: lazy L2 on touched coordinates
  uint64_t seed = 0;
  std::string checkpoint;
  bool resume = false;
  std::string json;
  bool normalize = false;  // scale every example to unit L2 norm
  bool quiet = false;
  bool help = false;
};

TrainFlags parse_train_flags(const std::vector<std::string>& args);
std::string train_usage(const std::string& strategies_help);

// The learning rate to use: --lr if given, else a per-optimizer default.
float effective_lr(const TrainFlags& f);

}  // namespace dtrain::cli

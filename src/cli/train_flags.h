// cli/train_flags.h — the flags of `dtrain train`, parsed from a declarative table into a
// TrainConfig (train/config.h).
//
// Contract
// - parse_train_flags(args) accepts "--name value", "--name=value" and, for switches,
//   "--name"; "-n N" and "-t T" are short forms of --ranks and --threads. It records the flags
//   given and resolves the defaults that depend on others (resolve_defaults).
// - Every mistake throws InvalidArgument with a sentence that says what was wrong and how
//   to fix it: an unknown flag (with the closest known flag suggested), a missing value, a
//   value of the wrong type or range, a positional argument.
// - Flags are rows of a table (name, value name, help, setter), so a strategy that needs a
//   new flag adds one row; train_usage() prints the table, so --help never goes stale.
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

#include "train/config.h"

namespace dtrain::cli {

TrainConfig parse_train_flags(const std::vector<std::string>& args);
std::string train_usage(const std::string& strategies_help);

}  // namespace dtrain::cli

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
  std::string strategy;  // "" until parsed: single for one rank, ddp for -n > 1
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

  // Distributed runs (-n N > 1).
  std::string transport = "auto";  // auto | shm | tcp
  std::string algo = "auto";       // all-reduce algorithm (coll/types.h names)
  double timeout = 300;            // seconds any blocking communication may wait
  double bucket_mb = 1.0;          // ddp gradient bucket size
  bool no_overlap = false;         // ddp: all-reduce after backward instead of during it
  bool deterministic = false;      // fixed-point gradient sums: bit-identical for any -n
  int64_t det_shard = 8;           // micro-shard size in deterministic mode
  bool baseline = false;           // also run 1 rank: speedup, efficiency, Amdahl fraction
  std::string trace;               // Chrome trace-event JSON timeline
  double target_accuracy = 0;      // report the first epoch/round reaching it
  // localsgd
  int64_t sync_every = 8;          // H local steps between model averages
  int64_t post_local = 0;          // ordinary ddp for the first E epochs
  // ps
  int servers = 1;
  bool sync = false;
  int64_t staleness = -1;          // -1: unbounded (fully asynchronous)
  // gossip
  std::string topology = "ring";   // ring | torus | exponential | complete
  // fedavg
  int clients = 0;                 // 0: 10 x ranks
  double client_fraction = 0.1;
  int64_t local_epochs = 1;
  double dirichlet = 0;            // 0: IID; else Dirichlet(alpha) label skew
  // search / ensemble
  std::string search;              // "lr=0.1,0.03;batch=64,256;momentum=0,0.9;width=128,256"
  int64_t trials = 0;              // random search with N trials
  int members = 0;                 // ensemble members (0: one per rank)
  // Which flags the user gave (for checks such as "--servers needs --strategy ps").
  std::vector<std::string> given;
  bool was_given(const std::string& name) const;
};

TrainFlags parse_train_flags(const std::vector<std::string>& args);
std::string train_usage(const std::string& strategies_help);

// The learning rate to use: --lr if given, else a per-optimizer default.
float effective_lr(const TrainFlags& f);

}  // namespace dtrain::cli

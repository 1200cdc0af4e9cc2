// train/config.h — everything a training run is configured by: the model, the data, the
// strategy and its knobs. `dtrain train` fills it from flags (cli/train_flags.h); programs
// that embed dtrain fill it directly and call train::run_training (train/run.h).
//
// Contract
// - Every field has its default here; `given` lists the flags the user set, so checks such as
//   "--servers applies to --strategy ps" and model-dependent defaults (the GPT trains with
//   AdamW at lr 1e-3 and batch 12 unless told otherwise) can tell a default from a choice.
// - resolve_defaults(c) fills what depends on other fields (strategy from -n, the GPT's
//   optimizer/lr/batch) and is idempotent. The GPT's default batch (12) is rounded up to a
//   multiple of dp x microbatches, so `--strategy pp --microbatches 8` works as written.
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace dtrain {

struct TrainConfig {
  std::string strategy;  // "" until resolved: single for one rank, ddp for -n > 1
  int threads = 1;
  int ranks = 1;  // -n N
  std::string model = "mlp:784-256-128-10";
  std::string data = "fashion-mnist";
  int64_t epochs = 5;
  int64_t steps = 0;       // > 0: train this many optimizer steps instead of epochs (the GPT)
  int64_t eval_every = 0;  // steps per round for step-driven runs (0: steps / 10, at least 1)
  int64_t checkpoint_every = 0;  // rounds of this many steps: epochs cut into parts (the GPT: the round)
  int64_t batch = 64;
  std::optional<float> lr;  // default depends on the optimizer
  std::string optimizer = "sgd";
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float l2 = 0.0f;
  uint64_t seed = 0;
  std::string checkpoint;  // directory
  bool resume = false;
  std::string json;
  bool normalize = false;
  bool quiet = false;
  // Time the speed probe right before the run and price the prediction's compute at that pace
  // (cli/plan_predict.h).
  bool probe_speed = false;
  bool help = false;

  // Distributed runs.
  std::string transport = "auto";
  std::string algo = "auto";
  double timeout = 300;
  int max_restarts = 0;     // -n N: restart every rank after a failure, from the checkpoints
  double heartbeat = 10;    // -n N: seconds of silence (or SIGSTOP) that make a rank hung
  double bucket_mb = 1.0;
  bool no_overlap = false;
  bool no_window = false;  // ddp: DdpOptions::window off
  std::string batch_split = "auto";     // ddp: auto | even | measured | W0,W1,... (DdpOptions::split)
  std::string shared_params = "auto";  // ddp: auto | on | off (DdpOptions::shared_params_min_bytes)
  bool deterministic = false;
  int64_t det_shard = 8;
  bool baseline = false;
  std::string trace;
  double target_accuracy = 0;
  // hogwild-hot
  int64_t hot_features = -1;  // -1: auto
  int64_t merge_every = 4096;
  std::string hot_merge = "average";  // average | sum
  // localsgd
  int64_t sync_every = 8;
  int64_t post_local = 0;
  // ps
  int servers = 1;
  bool sync = false;
  int64_t staleness = -1;
  // gossip
  std::string topology = "ring";
  // fedavg
  int clients = 0;
  double client_fraction = 0.1;
  int64_t local_epochs = 1;
  double dirichlet = 0;
  // search / ensemble
  std::string search;
  int64_t trials = 0;
  int members = 0;
  // The GPT on a DP x TP x PP mesh (tp, pp, zero, hybrid).
  int dp = 0, tp = 0, pp = 0;  // 0: from the strategy and -n
  int microbatches = 1;
  std::string schedule = "1f1b";
  int virtual_stages = 1;
  bool recompute = false;
  int zero = -1;              // -1: 1 for --strategy zero and the MLP family's ddp, else 0
  float min_lr = 1e-4f;       // cosine floor
  int64_t warmup = 100;       // linear warm-up steps
  float clip = 1.0f;          // global gradient-norm clip (0: off)
  std::optional<float> beta2;  // Adam/AdamW; default 0.999 (the GPT: 0.99)
  int64_t eval_batches = 20;
  std::string balance = "flops";  // flops (deterministic: resumable) | measured
  int blas_threads = 1;

  std::vector<std::string> given;
  bool was_given(const std::string& name) const;
  bool is_gpt() const { return model.rfind("gpt", 0) == 0; }
};

void resolve_defaults(TrainConfig& c);

// The GPT's mesh for a config: dp x tp x pp from the strategy, --dp/--tp/--pp and -n. Throws
// InvalidArgument when they do not multiply to -n.
struct MeshDims {
  int dp = 1, tp = 1, pp = 1;
};
MeshDims gpt_mesh(const TrainConfig& c);
// The learning rate to use: --lr if given, else a per-optimizer default.
float effective_lr(const TrainConfig& c);
// --optimizer NAME (+ --lr, --momentum, --weight-decay, --beta2) as an OptimizerConfig.
OptimizerConfig optimizer_config(const TrainConfig& c);

}  // namespace dtrain

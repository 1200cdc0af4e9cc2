#include "cli/train_flags.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <sstream>

#include "base/error.h"

namespace dtrain::cli {
namespace {

struct FlagSpec {
  const char* name;   // without the leading "--"
  const char* value;  // value name for --help; nullptr for a switch
  const char* help;
  std::function<void(TrainConfig&, const std::string&)> set;
};

int64_t to_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  DT_CHECK(ec == std::errc() && end == v.data() + v.size(), InvalidArgument,
           "--" << flag << " expects an integer, got '" << v << "'");
  DT_CHECK(x >= lo && x <= hi, InvalidArgument,
           "--" << flag << " must be between " << lo << " and " << hi << ", got " << x);
  return x;
}

float to_float(const std::string& flag, const std::string& v, double lo, double hi) {
  double x = 0;
  const char* b = v.data();
  auto [end, ec] = std::from_chars(b, v.data() + v.size(), x);
  DT_CHECK(ec == std::errc() && end == v.data() + v.size() && !v.empty(), InvalidArgument,
           "--" << flag << " expects a number, got '" << v << "'");
  DT_CHECK(x >= lo && x <= hi, InvalidArgument, "--" << flag << " must be in [" << lo << ", " << hi << "], got " << v);
  return static_cast<float>(x);
}

const std::vector<FlagSpec>& table() {
  static const std::vector<FlagSpec> t = {
      {"strategy", "NAME", "how to parallelize (see the list below)", [](TrainConfig& f, const std::string& v) { f.strategy = v; }},
      {"threads", "T", "threads on this machine (short: -t)",
       [](TrainConfig& f, const std::string& v) { f.threads = static_cast<int>(to_int("threads", v, 1, 1024)); }},
      {"ranks", "N", "processes for multi-process strategies (short: -n)",
       [](TrainConfig& f, const std::string& v) { f.ranks = static_cast<int>(to_int("ranks", v, 1, 1024)); }},
      {"model", "SPEC", "mlp:784-256-128-10 | logreg | svm | softmax | gpt:layers=4,heads=4,width=128,context=64", [](TrainConfig& f, const std::string& v) { f.model = v; }},
      {"data", "SPEC", "dataset (see the list below), or text:FILE for the GPT", [](TrainConfig& f, const std::string& v) { f.data = v; }},
      {"epochs", "E", "passes over the training set (default 5)",
       [](TrainConfig& f, const std::string& v) { f.epochs = to_int("epochs", v, 1, 1000000); }},
      {"batch", "B", "minibatch size (default 64; hogwild: per thread, 1 = the paper's setting)",
       [](TrainConfig& f, const std::string& v) { f.batch = to_int("batch", v, 1, 1 << 24); }},
      {"lr", "LR", "learning rate (default: sgd 0.1, momentum/nesterov 0.05, adam/adamw 0.001)",
       [](TrainConfig& f, const std::string& v) { f.lr = to_float("lr", v, 1e-12, 1e6); }},
      {"optimizer", "NAME", "sgd | momentum | nesterov | adam | adamw",
       [](TrainConfig& f, const std::string& v) {
         static const char* kinds[] = {"sgd", "momentum", "nesterov", "adam", "adamw"};
         DT_CHECK(std::find_if(std::begin(kinds), std::end(kinds), [&](const char* k) { return v == k; }) != std::end(kinds),
                  InvalidArgument, "--optimizer '" << v << "' is unknown; use sgd, momentum, nesterov, adam or adamw");
         f.optimizer = v;
       }},
      {"momentum", "MU", "momentum for --optimizer momentum|nesterov (default 0.9)",
       [](TrainConfig& f, const std::string& v) { f.momentum = to_float("momentum", v, 0, 0.999999); }},
      {"weight-decay", "WD", "weight decay (adamw: decoupled)",
       [](TrainConfig& f, const std::string& v) { f.weight_decay = to_float("weight-decay", v, 0, 1e3); }},
      {"l2", "L", "L2 penalty of the sparse models, applied to touched coordinates",
       [](TrainConfig& f, const std::string& v) { f.l2 = to_float("l2", v, 0, 1e3); }},
      {"seed", "S", "seed for initialization and data order (default 0)",
       [](TrainConfig& f, const std::string& v) { f.seed = static_cast<uint64_t>(to_int("seed", v, 0, INT64_MAX)); }},
      {"checkpoint", "DIR", "save a checkpoint in DIR after every epoch/round (the GPT also DIR/model.gpt)", [](TrainConfig& f, const std::string& v) { f.checkpoint = v; }},
      {"checkpoint-every", "K", "rounds of K steps (evaluation + checkpoint): a failure loses at most K steps",
       [](TrainConfig& f, const std::string& v) { f.checkpoint_every = to_int("checkpoint-every", v, 1, int64_t{1} << 40); }},
      {"resume", nullptr, "continue from DIR/checkpoint.dtc (needs --checkpoint)", [](TrainConfig& f, const std::string&) { f.resume = true; }},
      {"json", "FILE", "write the run's results as JSON to FILE", [](TrainConfig& f, const std::string& v) { f.json = v; }},
      {"normalize", nullptr, "scale every example (train and test) to unit L2 norm", [](TrainConfig& f, const std::string&) { f.normalize = true; }},
      {"quiet", nullptr, "print only the final result", [](TrainConfig& f, const std::string&) { f.quiet = true; }},
      {"probe-speed", nullptr,
       "time one warm GPT-block pass right before the run (a third of a second) and price the prediction's compute at "
       "the machine's pace then, against the calibration's own pass (for a VM whose speed drifts)",
       [](TrainConfig& f, const std::string&) { f.probe_speed = true; }},
      {"transport", "KIND", "-n N: auto | shm | tcp (auto: shm on one host)",
       [](TrainConfig& f, const std::string& v) {
         DT_CHECK(v == "auto" || v == "shm" || v == "tcp", InvalidArgument, "--transport must be auto, shm or tcp (got '" << v << "')");
         f.transport = v;
       }},
      {"algo", "NAME", "all-reduce algorithm: auto, ring, tree, butterfly, shm_direct, ... (default auto)",
       [](TrainConfig& f, const std::string& v) { f.algo = v; }},
      {"timeout", "SEC", "-n N: seconds any communication may block (default 300)",
       [](TrainConfig& f, const std::string& v) { f.timeout = to_float("timeout", v, 0.1, 1e6); }},
      {"max-restarts", "K", "-n N: after a failed or hung rank, start every rank again from --checkpoint, up to K times",
       [](TrainConfig& f, const std::string& v) { f.max_restarts = static_cast<int>(to_int("max-restarts", v, 0, 1000)); }},
      {"heartbeat", "SEC", "-n N: a rank silent or stopped this long is hung (default 10; 0 = off)",
       [](TrainConfig& f, const std::string& v) { f.heartbeat = to_float("heartbeat", v, 0, 1e6); }},
      {"bucket-mb", "MB", "ddp: gradient bucket size in MB (default 1)",
       [](TrainConfig& f, const std::string& v) { f.bucket_mb = to_float("bucket-mb", v, 0, 1e5); }},
      {"no-overlap", nullptr, "ddp: all-reduce after backward instead of overlapping it (always, without a core beyond one per rank)",
       [](TrainConfig& f, const std::string&) { f.no_overlap = true; }},
      {"no-window", nullptr, "ddp on one host: keep gradients in process memory, not in a shared-memory window",
       [](TrainConfig& f, const std::string&) { f.no_window = true; }},
      {"shared-params", "auto|on|off",
       "ddp on one host (--zero 1-2, in the window): one copy of the parameters for every rank, or one each (default auto: shared from 8 MiB of parameters)",
       [](TrainConfig& f, const std::string& v) {
         DT_CHECK(v == "auto" || v == "on" || v == "off", InvalidArgument,
                  "--shared-params takes auto, on or off, got '" << v << "'");
         f.shared_params = v;
       }},
      {"batch-split", "HOW",
       "ddp: each batch cut evenly, by the ranks' measured speed (a slower core takes fewer items), or by weights W0,W1,... one per rank (default auto: measured with a core per rank, else even; even with --deterministic)",
       [](TrainConfig& f, const std::string& v) { f.batch_split = v; }},
      {"deterministic", nullptr, "fixed-point gradient sums: bit-identical parameters for any -n",
       [](TrainConfig& f, const std::string&) { f.deterministic = true; }},
      {"det-shard", "K", "items per micro-shard in --deterministic mode (default 8)",
       [](TrainConfig& f, const std::string& v) { f.det_shard = to_int("det-shard", v, 1, 1 << 20); }},
      {"baseline", nullptr, "-n N: also run 1 rank; report speedup, efficiency and Amdahl serial fraction",
       [](TrainConfig& f, const std::string&) { f.baseline = true; }},
      {"trace", "FILE", "write a Chrome trace-event timeline (open in Perfetto)", [](TrainConfig& f, const std::string& v) { f.trace = v; }},
      {"target-accuracy", "A", "report the first epoch (fedavg: round) with test accuracy >= A",
       [](TrainConfig& f, const std::string& v) { f.target_accuracy = to_float("target-accuracy", v, 0, 1); }},
      {"hot-features", "H", "hogwild-hot: the H most frequent features kept per thread (default auto: those in >= 4 rows/M rows)",
       [](TrainConfig& f, const std::string& v) { f.hot_features = to_int("hot-features", v, 0, 1 << 30); }},
      {"merge-every", "M", "hogwild-hot: examples of a thread between merges of its hot copy (default 4096)",
       [](TrainConfig& f, const std::string& v) { f.merge_every = to_int("merge-every", v, 1, 1 << 30); }},
      {"hot-merge", "RULE", "hogwild-hot: average (default; stable for any M and T) | sum (every update counts; needs a small M)",
       [](TrainConfig& f, const std::string& v) {
         DT_CHECK(v == "average" || v == "sum", InvalidArgument, "--hot-merge '" << v << "' is unknown; use average or sum");
         f.hot_merge = v;
       }},
      {"sync-every", "H", "localsgd: local steps between model averages (default 8)",
       [](TrainConfig& f, const std::string& v) { f.sync_every = to_int("sync-every", v, 1, 1 << 30); }},
      {"post-local", "E", "localsgd: run ordinary ddp for the first E epochs (post-local SGD)",
       [](TrainConfig& f, const std::string& v) { f.post_local = to_int("post-local", v, 0, 1 << 30); }},
      {"servers", "S", "ps: server ranks (the last S ranks; default 1)",
       [](TrainConfig& f, const std::string& v) { f.servers = static_cast<int>(to_int("servers", v, 1, 4096)); }},
      {"sync", nullptr, "ps: synchronous (a barrier per step)", [](TrainConfig& f, const std::string&) { f.sync = true; }},
      {"staleness", "K", "ps async: a worker may run at most K steps ahead of the slowest (0 = synchronous)",
       [](TrainConfig& f, const std::string& v) { f.staleness = to_int("staleness", v, 0, 1 << 30); }},
      {"topology", "NAME", "gossip: ring | torus | exponential | complete",
       [](TrainConfig& f, const std::string& v) {
         DT_CHECK(v == "ring" || v == "torus" || v == "exponential" || v == "complete", InvalidArgument,
                  "--topology must be ring, torus, exponential or complete (got '" << v << "')");
         f.topology = v;
       }},
      {"clients", "K", "fedavg: simulated clients (default 10 per rank)",
       [](TrainConfig& f, const std::string& v) { f.clients = static_cast<int>(to_int("clients", v, 1, 1 << 20)); }},
      {"client-fraction", "C", "fedavg: fraction of clients sampled per round (default 0.1)",
       [](TrainConfig& f, const std::string& v) { f.client_fraction = to_float("client-fraction", v, 1e-6, 1); }},
      {"local-epochs", "E", "fedavg: local epochs per round (default 1)",
       [](TrainConfig& f, const std::string& v) { f.local_epochs = to_int("local-epochs", v, 1, 1 << 20); }},
      {"dirichlet", "ALPHA", "fedavg: non-IID label skew Dirichlet(ALPHA) (default: IID)",
       [](TrainConfig& f, const std::string& v) { f.dirichlet = to_float("dirichlet", v, 1e-6, 1e6); }},
      {"search", "GRID", "search: grid, e.g. \"lr=0.1,0.03;batch=64,256;momentum=0,0.9;width=128,256\"",
       [](TrainConfig& f, const std::string& v) { f.search = v; }},
      {"trials", "N", "search: N random trials instead of a grid",
       [](TrainConfig& f, const std::string& v) { f.trials = to_int("trials", v, 1, 100000); }},
      {"members", "K", "ensemble: models to train (default: one per rank)",
       [](TrainConfig& f, const std::string& v) { f.members = static_cast<int>(to_int("members", v, 1, 100000)); }},
      {"steps", "N", "the GPT: optimizer steps to train",
       [](TrainConfig& f, const std::string& v) { f.steps = to_int("steps", v, 1, int64_t{1} << 40); }},
      {"eval-every", "K", "the GPT: steps per round (evaluation, checkpoint, progress line; default steps/10)",
       [](TrainConfig& f, const std::string& v) { f.eval_every = to_int("eval-every", v, 1, int64_t{1} << 40); }},
      {"eval-batches", "K", "the GPT: validation batches per evaluation (default 20)",
       [](TrainConfig& f, const std::string& v) { f.eval_batches = to_int("eval-batches", v, 1, 1 << 20); }},
      {"dp", "D", "the GPT: data-parallel ranks of the mesh (hybrid)",
       [](TrainConfig& f, const std::string& v) { f.dp = static_cast<int>(to_int("dp", v, 1, 4096)); }},
      {"tp", "T", "the GPT: tensor-parallel ranks of the mesh",
       [](TrainConfig& f, const std::string& v) { f.tp = static_cast<int>(to_int("tp", v, 1, 4096)); }},
      {"pp", "P", "the GPT: pipeline stages of the mesh",
       [](TrainConfig& f, const std::string& v) { f.pp = static_cast<int>(to_int("pp", v, 1, 4096)); }},
      {"microbatches", "M", "the GPT: micro-batches per step (pipeline; default 1)",
       [](TrainConfig& f, const std::string& v) { f.microbatches = static_cast<int>(to_int("microbatches", v, 1, 1 << 16)); }},
      {"schedule", "NAME", "the GPT pipeline: gpipe | 1f1b | interleaved (default 1f1b)",
       [](TrainConfig& f, const std::string& v) {
         DT_CHECK(v == "gpipe" || v == "1f1b" || v == "interleaved", InvalidArgument,
                  "--schedule must be gpipe, 1f1b or interleaved (got '" << v << "')");
         f.schedule = v;
       }},
      {"virtual-stages", "V", "the GPT pipeline: model chunks per rank (interleaved; default 1)",
       [](TrainConfig& f, const std::string& v) { f.virtual_stages = static_cast<int>(to_int("virtual-stages", v, 1, 64)); }},
      {"recompute", nullptr, "the GPT: keep only stage inputs, recompute activations in backward",
       [](TrainConfig& f, const std::string&) { f.recompute = true; }},
      {"zero", "S", "ZeRO stage over the data-parallel ranks: ddp 0-2, the GPT 0-3 (default: 1 for --strategy zero, else 0)",
       [](TrainConfig& f, const std::string& v) { f.zero = static_cast<int>(to_int("zero", v, 0, 3)); }},
      {"min-lr", "LR", "the GPT: final learning rate of the cosine schedule (default 1e-4)",
       [](TrainConfig& f, const std::string& v) { f.min_lr = to_float("min-lr", v, 0, 1e6); }},
      {"warmup", "N", "the GPT: linear warm-up steps (default 100)",
       [](TrainConfig& f, const std::string& v) { f.warmup = to_int("warmup", v, 0, int64_t{1} << 40); }},
      {"clip", "NORM", "the GPT: global gradient-norm clip, 0 = off (default 1)",
       [](TrainConfig& f, const std::string& v) { f.clip = to_float("clip", v, 0, 1e6); }},
      {"beta2", "B2", "Adam/AdamW beta2 (default 0.999; the GPT 0.99)",
       [](TrainConfig& f, const std::string& v) { f.beta2 = to_float("beta2", v, 0, 0.999999); }},
      {"balance", "HOW", "the GPT pipeline partition: flops (default; the same every run) | measured (timed on rank 0)",
       [](TrainConfig& f, const std::string& v) {
         DT_CHECK(v == "measured" || v == "flops", InvalidArgument, "--balance must be measured or flops (got '" << v << "')");
         f.balance = v;
       }},
      {"blas-threads", "T", "the GPT: OpenBLAS threads per rank (default 1)",
       [](TrainConfig& f, const std::string& v) { f.blas_threads = static_cast<int>(to_int("blas-threads", v, 1, 1024)); }},
      {"help", nullptr, "show this help", [](TrainConfig& f, const std::string&) { f.help = true; }},
  };
  return t;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

const FlagSpec& find_flag(const std::string& name, const std::string& as_written) {
  const auto& t = table();
  for (const auto& f : t)
    if (name == f.name) return f;
  const FlagSpec* best = nullptr;
  size_t best_d = 3;
  for (const auto& f : t) {
    size_t d = edit_distance(name, f.name);
    if (d < best_d) best_d = d, best = &f;
  }
  if (best) DT_THROW(InvalidArgument, "unknown flag '" << as_written << "'; did you mean --" << best->name << "? (see 'dtrain train --help')");
  DT_THROW(InvalidArgument, "unknown flag '" << as_written << "'; see 'dtrain train --help' for the flags");
}

}  // namespace

TrainConfig parse_train_flags(const std::vector<std::string>& args) {
  TrainConfig f;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "-h") a = "--help";
    if (a == "-n") a = "--ranks";
    if (a == "-t") a = "--threads";
    DT_CHECK(a.size() > 2 && a.compare(0, 2, "--") == 0, InvalidArgument,
             "unexpected argument '" << args[i] << "'; options are written --name VALUE (see 'dtrain train --help')");
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagSpec& spec = find_flag(name, args[i]);
    if (spec.value == nullptr) {
      DT_CHECK(!has_value, InvalidArgument, "--" << name << " is a switch and takes no value (got '" << args[i] << "')");
    } else if (!has_value) {
      DT_CHECK(i + 1 < args.size(), InvalidArgument,
               "--" << name << " needs a value: --" << name << " " << spec.value);
      value = args[++i];
      DT_CHECK(value.size() < 2 || value.compare(0, 2, "--") != 0, InvalidArgument,
               "--" << name << " needs a value (" << spec.value << ") but got the flag '" << value << "'");
    }
    spec.set(f, value);
    f.given.push_back(spec.name);
  }
  resolve_defaults(f);
  return f;
}

std::string train_usage(const std::string& extra) {
  std::ostringstream os;
  os << "usage: dtrain train [options]\n\n"
        "Trains a model and reports test accuracy. Examples:\n"
        "  dtrain train --model mlp:784-256-128-10 --data fashion-mnist --epochs 20 --optimizer momentum\n"
        "  dtrain train --strategy hogwild --threads 2 --model logreg --data a9a --batch 1 --lr 0.05\n"
        "  dtrain train -n 4                     (ddp on 4 local ranks: Fashion-MNIST MLP)\n"
        "  dtrain train -n 2 --model mlp:784-1024-1024-1024-10 --batch 256 --baseline --trace t.json\n"
        "  dtrain train -n 2 --strategy pp --microbatches 4 --model gpt:layers=4,heads=4,width=128,context=64 \\\n"
        "      --data text:input.txt --steps 2000 --checkpoint ck   (then: dtrain generate --checkpoint ck/model.gpt)\n"
        "  dtrain train -n 4 --plan auto --model gpt:layers=6,heads=8,width=128,context=64 --data text:input.txt\n"
        "      (the layout `dtrain plan train` ranks first: docs/PLANNER.md)\n\n"
        "--batch is the GLOBAL minibatch for ddp/ps/localsgd/gossip (each of N ranks takes B/N);\n"
        "the client batch for fedavg.\n\n"
        "options:\n";
  for (const auto& f : table()) {
    std::string left = std::string("--") + f.name + (f.value ? std::string(" ") + f.value : "");
    os << "  " << left << std::string(left.size() < 22 ? 22 - left.size() : 1, ' ') << f.help << "\n";
  }
  os << extra;
  return os.str();
}

}  // namespace dtrain::cli

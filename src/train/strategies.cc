#include "train/strategies.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "base/error.h"
#include "coll/types.h"
#include "nn/mlp.h"
#include "nn/transformer.h"
#include "parallel/data_parallel.h"
#include "parallel/fedavg.h"
#include "parallel/gossip.h"
#include "parallel/gpt_strategy.h"
#include "parallel/hogwild.h"
#include "parallel/hogwild_hot.h"
#include "parallel/local_sgd.h"
#include "parallel/param_server.h"
#include "parallel/search.h"
#include "parallel/threads.h"
#include "train/search_runner.h"

namespace dtrain {

// --batch-split W0,W1,...: one positive weight per rank; auto, even and measured give none.
std::vector<double> batch_split_weights(const TrainConfig& f) {
  const std::string& v = f.batch_split;
  if (v == "auto" || v == "even" || v == "measured") return {};
  std::vector<double> w;
  std::stringstream in(v);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    double x = 0;
    try {
      x = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    DT_CHECK(used == item.size() && used > 0 && std::isfinite(x) && x > 0, InvalidArgument,
             "--batch-split takes auto, even, measured or one positive weight per rank (e.g. 3,2 for -n 2), got '"
                 << v << "'");
    w.push_back(x);
  }
  DT_CHECK(w.size() == static_cast<size_t>(f.ranks), InvalidArgument,
           "--batch-split " << v << " gives " << w.size() << " weights for " << f.ranks << " ranks; give one per rank");
  return w;
}

namespace {

// Flags that only one strategy reads are refused elsewhere, so a typo'd strategy never
// silently ignores them.
void only_for(const TrainConfig& f, std::initializer_list<const char*> strategies, std::initializer_list<const char*> flags) {
  for (const char* s : strategies)
    if (f.strategy == s) return;
  for (const char* name : flags)
    DT_CHECK(!f.was_given(name), InvalidArgument,
             "--" << name << " applies to --strategy " << *strategies.begin() << ", not to --strategy " << f.strategy);
}

void check_strategy_flags(const TrainConfig& f) {
  only_for(f, {"ddp"}, {"bucket-mb", "no-overlap", "no-window", "shared-params", "batch-split"});
  only_for(f, {"hogwild-hot"}, {"hot-features", "merge-every", "hot-merge"});
  only_for(f, {"localsgd"}, {"sync-every", "post-local"});
  only_for(f, {"ps"}, {"servers", "sync", "staleness"});
  only_for(f, {"gossip"}, {"topology"});
  only_for(f, {"fedavg"}, {"clients", "client-fraction", "local-epochs", "dirichlet"});
  only_for(f, {"search"}, {"search", "trials"});
  only_for(f, {"ensemble"}, {"members"});
  if (!f.is_gpt()) only_for(f, {"ddp"}, {"zero"});
  if (!f.is_gpt())
    for (const char* name : {"steps", "eval-every", "eval-batches", "min-lr", "warmup", "clip", "balance", "recompute",
                             "blas-threads", "microbatches", "schedule", "virtual-stages",
                             "dp", "tp", "pp", "beta2"})
      DT_CHECK(!f.was_given(name), InvalidArgument,
               "--" << name << " applies to the GPT (--model gpt:...), not to --model " << f.model);
}

void multi_rank(const TrainConfig& f) {
  check_strategy_flags(f);
  DT_CHECK(f.threads == 1, InvalidArgument,
           "--strategy " << f.strategy << " runs one training thread per rank; drop --threads " << f.threads
                         << " and use -n N ranks");
  if (f.algo != "auto") parse_algorithm(f.algo);
  DT_CHECK(!f.deterministic || f.strategy == "ddp" || f.strategy == "ps", InvalidArgument,
           "--deterministic applies to --strategy ddp and ps (sync), not " << f.strategy);
}

void ps_flags(const TrainConfig& f) {
  multi_rank(f);
  DT_CHECK(f.ranks > f.servers, InvalidArgument,
           "--strategy ps with --servers " << f.servers << " needs at least " << f.servers + 1
                                           << " ranks (servers + one worker); use -n " << f.servers + 1 << " or more");
  DT_CHECK(!(f.sync && f.was_given("staleness")), InvalidArgument,
           "--staleness bounds the asynchronous server; drop it with --sync (or drop --sync)");
  DT_CHECK(!f.deterministic || f.sync, InvalidArgument, "--deterministic needs --sync for --strategy ps");
}

void whole_job(const TrainConfig& f) {
  multi_rank(f);
  for (const char* name : {"trace", "checkpoint", "resume"})
    DT_CHECK(!f.was_given(name), InvalidArgument,
             "--" << name << " is not supported by --strategy " << f.strategy << " (it runs independent trainings)");
  if (f.strategy == "search") {
    DT_CHECK(f.search.empty() != (f.trials == 0), InvalidArgument,
             "--strategy search needs either --search \"lr=0.1,0.03;batch=64,256\" or --trials N (not both)");
    if (!f.search.empty()) parse_search_grid(f.search);
  }
}

void gpt_flags(const TrainConfig& f);

void ddp_flags(const TrainConfig& f) {
  if (f.is_gpt()) {
    DT_CHECK(!f.was_given("batch-split"), InvalidArgument,
             "--batch-split cuts the MLP's ddp batches; the GPT's ranks take equal microbatches");
    return gpt_flags(f);
  }
  multi_rank(f);
  batch_split_weights(f);
}

DdpOptions ddp_options(const TrainConfig& f) {
  DdpOptions o;
  o.bucket_bytes = static_cast<size_t>(f.bucket_mb * 1024 * 1024);
  o.overlap = !f.no_overlap;
  o.window = !f.no_window;
  if (f.shared_params == "on") o.shared_params_min_bytes = 0;
  if (f.shared_params == "off") o.shared_params_min_bytes = std::numeric_limits<int64_t>::max();
  o.deterministic = f.deterministic;
  o.det_shard = f.det_shard;
  // auto's rule (not with --deterministic, not with more ranks than cores): split_measures.
  o.split = f.batch_split == "measured" ? BatchSplitMode::kMeasured
            : f.batch_split == "auto"   ? BatchSplitMode::kAuto
                                        : BatchSplitMode::kEven;
  o.split_weights = batch_split_weights(f);
  o.algorithm = f.algo == "auto" ? Algorithm::kAuto : parse_algorithm(f.algo);
  o.zero = f.is_gpt() || f.ranks < 2 ? 0 : std::max(f.zero, 0);  // one rank has nothing to shard
  return o;
}

void single_process(const TrainConfig& f) {
  check_strategy_flags(f);
  for (const char* name : {"deterministic", "baseline", "transport", "algo", "trace"})
    DT_CHECK(!f.was_given(name), InvalidArgument,
             "--" << name << " is for multi-rank strategies (ddp, ps, localsgd, gossip, ...), not --strategy "
                  << f.strategy);
  DT_CHECK(f.ranks == 1, InvalidArgument,
           "--strategy " << f.strategy << " runs in one process; drop -n/--ranks " << f.ranks
                         << " (use --threads for more threads)");
}

void plain_sgd_only(const TrainConfig& f) {
  single_process(f);
  DT_CHECK(f.optimizer == "sgd", InvalidArgument,
           "--strategy " << f.strategy << " applies plain SGD updates without locks; --optimizer " << f.optimizer
                         << " keeps shared state (momentum/moments) it cannot update safely: use --optimizer sgd");
  DT_CHECK(f.weight_decay == 0.0f, InvalidArgument,
           "--strategy " << f.strategy << " does not apply --weight-decay; use --l2 with a sparse model instead");
}

// The trainer's optimizer over the whole model (strategies that step one).
Optimizer& own_optimizer(TrainJob& job, const TrainConfig& c) {
  job.optimizer = make_optimizer(optimizer_config(c), job.model->num_params());
  return *job.optimizer;
}

template <class S, class... A>
void set_model_strategy(TrainJob& job, A&&... args) {
  auto s = std::make_unique<S>(std::forward<A>(args)...);
  s->set_eval_set(job.split.test.rows > 0 ? &job.split.test : nullptr);
  job.strategy = std::move(s);
}

// The GPT on the mesh the config asks for (every GPT row).
void make_gpt(TrainJob& job, const StrategyContext& ctx) {
  const TrainConfig& c = ctx.config;
  const MeshDims d = gpt_mesh(c);
  MpConfig m;
  m.model = GptConfig::parse(c.model, static_cast<int64_t>(job.text.vocab.size()));
  m.mesh = {d.dp, d.tp, d.pp};
  m.micro = c.microbatches;
  m.schedule = c.schedule;
  m.virtual_stages = c.virtual_stages;
  m.recompute = c.recompute;
  m.zero = c.zero;
  m.batch = c.batch;
  m.optimizer = optimizer_config(c);
  m.lr = LrSchedule::warmup_cosine(m.optimizer.lr, std::min(c.warmup, std::max<int64_t>(c.steps - 1, 0)), c.steps, c.min_lr);
  m.clip = c.clip;
  m.eval_batches = c.eval_batches;
  m.balance = c.balance;
  m.seed = c.seed;
  job.strategy = std::make_unique<GptStrategy>(find_strategy(c.strategy).name.c_str(), *ctx.comm, m, job.text, ctx.instrument);
}

void gpt_flags(const TrainConfig& f) {
  check_strategy_flags(f);
  DT_CHECK(f.threads == 1, InvalidArgument, "the GPT trains with one thread per rank; drop --threads (use -n N ranks)");
  DT_CHECK(!f.deterministic, InvalidArgument, "--deterministic applies to --strategy ddp and ps with dataset models");
}

}  // namespace

const std::vector<StrategyEntry>& strategies() {
  static const std::vector<StrategyEntry> table = {
      {"single", "one thread, whole-batch gradients (the fast reference); the GPT on one rank", Models::kBoth, false,
       [](const TrainConfig& f) {
         if (f.is_gpt()) return gpt_flags(f);
         single_process(f);
         DT_CHECK(f.threads == 1, InvalidArgument,
                  "--strategy single uses one thread; for --threads " << f.threads << " use --strategy threads");
       },
       [](TrainJob& job, const StrategyContext& ctx) {
         if (ctx.config.is_gpt()) return make_gpt(job, ctx);
         // One shard: the whole minibatch in one gemm. (threads uses 8 fixed shards so that
         // every T gives the same bits; with T = 1 that only costs time.)
         set_model_strategy<SyncThreads>(job, *job.model, own_optimizer(job, ctx.config), 1, 1);
       },
       {}},
      {"threads", "each minibatch split over --threads T, gradients summed in a fixed order (bit-identical for any T <= 8)",
       Models::kDataset, false, single_process,
       [](TrainJob& job, const StrategyContext& ctx) {
         set_model_strategy<SyncThreads>(job, *job.model, own_optimizer(job, ctx.config), ctx.config.threads);
       },
       {}},
      {"hogwild", "HOGWILD!: --threads T run SGD on one shared model without locks (Niu et al. 2011)",
       Models::kDataset, false, plain_sgd_only,
       [](TrainJob& job, const StrategyContext& ctx) {
         set_model_strategy<Hogwild>(job, *job.model, &job.lr, ctx.config.threads, Hogwild::Mode::kLockFree);
       },
       {}},
      {"hogwild-lock", "the locking baseline: like hogwild, one mutex around every update", Models::kDataset, false,
       plain_sgd_only,
       [](TrainJob& job, const StrategyContext& ctx) {
         set_model_strategy<Hogwild>(job, *job.model, &job.lr, ctx.config.threads, Hogwild::Mode::kLocked);
       },
       {}},
      {"hogwild-hot", "HOGWILD! with the --hot-features H most frequent features private per thread, merged every --merge-every M examples (sparse models)",
       Models::kDataset, false, plain_sgd_only,
       [](TrainJob& job, const StrategyContext& ctx) {
         HogwildHotOptions o;
         o.threads = ctx.config.threads;
         o.hot_features = ctx.config.hot_features;
         o.merge_every = ctx.config.merge_every;
         o.average = ctx.config.hot_merge == "average";
         set_model_strategy<HogwildHot>(job, *job.model, &job.lr, o);
       },
       {}},
      {"ddp", "synchronous all-reduce SGD over -n N ranks, gradient buckets overlapped with backward (default for -n > 1); by default each rank steps its 1/N of every bucket inside the bucket's all-reduce (--zero 1; over tcp --zero 0; --zero 0: a full optimizer per rank, --zero 2: no gradient kept between steps)",
       Models::kBoth, true,
       ddp_flags,
       [](TrainJob& job, const StrategyContext& ctx) {
         if (ctx.config.is_gpt()) return make_gpt(job, ctx);
         set_model_strategy<DataParallel>(job, *job.model, optimizer_config(ctx.config), *ctx.comm,
                                          ddp_options(ctx.config), ctx.instrument);
       },
       {}},
      {"localsgd", "Local SGD: --sync-every H local steps between model averages; --post-local E epochs of ddp first",
       Models::kDataset, true, multi_rank,
       [](TrainJob& job, const StrategyContext& ctx) {
         LocalSgdOptions o;
         o.sync_every = ctx.config.sync_every;
         o.post_local_epochs = ctx.config.post_local;
         o.ddp = ddp_options(ctx.config);
         set_model_strategy<LocalSgd>(job, *job.model, own_optimizer(job, ctx.config), *ctx.comm, o, ctx.instrument);
       },
       {}},
      {"ps", "parameter servers: the last --servers S ranks own parameter ranges; --sync, or async with --staleness K",
       Models::kDataset, true, ps_flags,
       [](TrainJob& job, const StrategyContext& ctx) {
         PsOptions o;
         o.servers = ctx.config.servers;
         o.sync = ctx.config.sync;
         o.staleness = ctx.config.staleness;
         o.deterministic = ctx.config.deterministic;
         o.det_shard = ctx.config.det_shard;
         o.optimizer = optimizer_config(ctx.config);
         set_model_strategy<ParamServer>(job, *job.model, *ctx.comm, o, &job.lr, ctx.instrument);
       },
       {}},
      {"gossip", "decentralized D-PSGD: average with neighbours in --topology ring|torus|exponential|complete",
       Models::kDataset, true, multi_rank,
       [](TrainJob& job, const StrategyContext& ctx) {
         set_model_strategy<Gossip>(job, *job.model, own_optimizer(job, ctx.config), *ctx.comm, ctx.config.topology,
                                    ctx.instrument);
       },
       {}},
      {"fedavg", "federated averaging: --clients K (non-IID with --dirichlet A), --client-fraction C, --local-epochs E; --epochs = rounds",
       Models::kDataset, true, multi_rank,
       [](TrainJob& job, const StrategyContext& ctx) {
         const TrainConfig& c = ctx.config;
         FedAvgOptions o;
         o.clients = c.clients > 0 ? c.clients : 10 * ctx.comm->size();
         o.fraction = c.client_fraction;
         o.local_epochs = c.local_epochs;
         o.dirichlet = c.dirichlet;
         o.seed = c.seed;
         o.optimizer = optimizer_config(c);
         set_model_strategy<FedAvg>(job, *job.model, *ctx.comm, o, &job.lr, ctx.instrument);
       },
       {}},
      {"tp", "the GPT, tensor parallel (Megatron): every block's matrices split over -n N ranks", Models::kGpt, true,
       gpt_flags, make_gpt, {}},
      {"pp", "the GPT, pipeline parallel over -n N stages: --microbatches M, --schedule gpipe|1f1b|interleaved",
       Models::kGpt, true, gpt_flags, make_gpt, {}},
      {"zero", "the GPT, data parallel with ZeRO: --zero 1|2|3 shards optimizer state, gradients, parameters",
       Models::kGpt, true, gpt_flags, make_gpt, {}},
      {"hybrid", "the GPT on a --dp D x --tp T x --pp P mesh (two given: the third from -n; optionally --zero 1|2)", Models::kGpt, true, gpt_flags,
       make_gpt, {}},
      {"search", "parallel hyper-parameter search: --search GRID or --trials N, trials spread over the ranks",
       Models::kDataset, true, whole_job, {}, run_search},
      {"ensemble", "--members K independently seeded models on the ranks, predictions averaged", Models::kDataset, true,
       whole_job, {}, run_ensemble},
  };
  return table;
}

const StrategyEntry& find_strategy(const std::string& name) {
  for (const auto& s : strategies())
    if (s.name == name) return s;
  std::ostringstream names;
  for (const auto& s : strategies()) names << (names.tellp() ? ", " : "") << s.name;
  DT_THROW(InvalidArgument, "unknown --strategy '" << name << "'; this build has: " << names.str());
}

std::string strategies_help() {
  std::ostringstream os;
  os << "\nstrategies:\n";
  for (const auto& s : strategies()) {
    const char* m = s.models == Models::kGpt ? "[gpt] " : s.models == Models::kBoth ? "[any] " : "";
    os << "  " << s.name << std::string(s.name.size() < 14 ? 14 - s.name.size() : 1, ' ') << m << s.help << "\n";
  }
  return os.str();
}

const StrategyEntry& check_config(const TrainConfig& c) {
  const StrategyEntry& s = find_strategy(c.strategy);
  if (c.is_gpt()) {
    DT_CHECK(s.models != Models::kDataset, InvalidArgument,
             "--strategy " << c.strategy << " trains dataset models (mlp, logreg, svm, softmax), not the GPT; "
                              "the GPT trains with single, ddp, tp, pp, zero or hybrid");
    DT_CHECK(c.data.rfind("text:", 0) == 0, InvalidArgument,
             "the GPT trains on text: give --data text:FILE (plain or gzipped), e.g. text:input.txt");
    DT_CHECK(c.steps > 0, InvalidArgument, "the GPT trains for --steps N (optimizer steps); add e.g. --steps 2000");
    DT_CHECK(!c.was_given("epochs"), InvalidArgument, "the GPT counts --steps, not --epochs; drop --epochs");
    DT_CHECK(!(c.was_given("eval-every") && c.was_given("checkpoint-every") && c.eval_every != c.checkpoint_every),
             InvalidArgument, "the GPT evaluates and checkpoints once per round: give --eval-every or --checkpoint-every, not both");
    const MeshDims d = gpt_mesh(c);
    DT_CHECK(c.microbatches >= 1 && c.batch % (static_cast<int64_t>(d.dp) * c.microbatches) == 0, InvalidArgument,
             "--batch " << c.batch << " must be divisible by dp " << d.dp << " x --microbatches " << c.microbatches
                        << "; use --batch " << static_cast<int64_t>(d.dp) * c.microbatches * std::max<int64_t>(1, c.batch / (static_cast<int64_t>(d.dp) * c.microbatches)));
    DT_CHECK(c.zero >= 0 && c.zero <= 3, InvalidArgument, "--zero must be 0, 1, 2 or 3, got " << c.zero);
    const GptConfig g = GptConfig::parse(c.model, 256);  // the vocabulary does not matter for these checks
    DT_CHECK(g.heads % d.tp == 0, InvalidArgument,
             "--tp " << d.tp << " must divide the GPT's heads (" << g.heads << ")");
  } else {
    DT_CHECK(s.models != Models::kGpt, InvalidArgument,
             "--strategy " << c.strategy << " trains the GPT; add --model gpt:layers=4,heads=4,width=128,context=64 "
                              "--data text:FILE, or pick a dataset strategy (see --help)");
    DT_CHECK(c.data.rfind("text:", 0) != 0, InvalidArgument,
             "--data text:... is for the GPT (--model gpt:...); dataset models take a named dataset or a file");
    // Checked before the data is loaded, so a typo fails in milliseconds.
    const std::string& m = c.model;
    const bool mlp = m == "mlp" || m.rfind("mlp:", 0) == 0;
    DT_CHECK(mlp || m == "logreg" || m == "svm" || m == "softmax", InvalidArgument,
             "unknown --model '" << m << "'; use mlp:784-256-128-10 (any widths), logreg, svm, softmax or gpt:...");
    if (mlp && m.size() > 4) MLP::parse_spec(m.substr(4));
  }
  s.validate(c);
  return s;
}

}  // namespace dtrain

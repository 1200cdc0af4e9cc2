#include "cli/train_strategies.h"

#include <sstream>

#include "base/error.h"
#include "coll/types.h"
#include "cli/train_search.h"
#include "parallel/data_parallel.h"
#include "parallel/fedavg.h"
#include "parallel/gossip.h"
#include "parallel/hogwild.h"
#include "parallel/local_sgd.h"
#include "parallel/param_server.h"
#include "parallel/search.h"
#include "parallel/threads.h"

namespace dtrain::cli {
namespace {

std::unique_ptr<LocalStrategy> make_hogwild(TrainableModel& m, const float* lr, const TrainOptions& o,
                                            Hogwild::Mode mode) {
  return std::make_unique<Hogwild>(m, lr, o.threads, mode);
}

// Flags that only one strategy reads are refused elsewhere, so a typo'd strategy never
// silently ignores them.
void only_for(const TrainFlags& f, const std::string& strategy, std::initializer_list<const char*> flags) {
  if (f.strategy == strategy) return;
  for (const char* name : flags)
    DT_CHECK(!f.was_given(name), InvalidArgument,
             "--" << name << " applies to --strategy " << strategy << ", not to --strategy " << f.strategy);
}

void check_strategy_flags(const TrainFlags& f) {
  if (f.strategy != "ddp") {
    only_for(f, "ddp", {"bucket-mb", "no-overlap"});
  }
  only_for(f, "localsgd", {"sync-every", "post-local"});
  only_for(f, "ps", {"servers", "sync", "staleness"});
  only_for(f, "gossip", {"topology"});
  only_for(f, "fedavg", {"clients", "client-fraction", "local-epochs", "dirichlet"});
  only_for(f, "search", {"search", "trials"});
  only_for(f, "ensemble", {"members"});
}

void multi_rank(const TrainFlags& f) {
  check_strategy_flags(f);
  DT_CHECK(f.threads == 1, InvalidArgument,
           "--strategy " << f.strategy << " runs one training thread per rank; drop --threads " << f.threads
                         << " and use -n N ranks");
  if (f.algo != "auto") parse_algorithm(f.algo);
  DT_CHECK(!f.deterministic || f.strategy == "ddp" || f.strategy == "ps", InvalidArgument,
           "--deterministic applies to --strategy ddp and ps (sync), not " << f.strategy);
}

void ps_flags(const TrainFlags& f) {
  multi_rank(f);
  DT_CHECK(f.ranks > f.servers, InvalidArgument,
           "--strategy ps with --servers " << f.servers << " needs at least " << f.servers + 1
                                           << " ranks (servers + one worker); use -n " << f.servers + 1 << " or more");
  DT_CHECK(!(f.sync && f.was_given("staleness")), InvalidArgument,
           "--staleness bounds the asynchronous server; drop it with --sync (or drop --sync)");
  DT_CHECK(!f.deterministic || f.sync, InvalidArgument, "--deterministic needs --sync for --strategy ps");
}

void whole_job(const TrainFlags& f) {
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

OptimizerConfig optimizer_of(const TrainOptions& o) { return o.optimizer; }

DdpOptions ddp_options(const TrainFlags& f) {
  DdpOptions o;
  o.bucket_bytes = static_cast<size_t>(f.bucket_mb * 1024 * 1024);
  o.overlap = !f.no_overlap;
  o.deterministic = f.deterministic;
  o.det_shard = f.det_shard;
  o.algorithm = f.algo == "auto" ? Algorithm::kAuto : parse_algorithm(f.algo);
  return o;
}

void single_process(const TrainFlags& f) {
  check_strategy_flags(f);
  for (const char* name : {"deterministic", "baseline", "transport", "algo", "trace"})
    DT_CHECK(!f.was_given(name), InvalidArgument,
             "--" << name << " is for multi-rank strategies (ddp, ps, localsgd, gossip, ...), not --strategy "
                  << f.strategy);
  DT_CHECK(f.ranks == 1, InvalidArgument,
           "--strategy " << f.strategy << " runs in one process; drop -n/--ranks " << f.ranks
                         << " (use --threads for more threads)");
}

void plain_sgd_only(const TrainFlags& f) {
  single_process(f);
  DT_CHECK(f.optimizer == "sgd", InvalidArgument,
           "--strategy " << f.strategy << " applies plain SGD updates without locks; --optimizer " << f.optimizer
                         << " keeps shared state (momentum/moments) it cannot update safely: use --optimizer sgd");
  DT_CHECK(f.weight_decay == 0.0f, InvalidArgument,
           "--strategy " << f.strategy << " does not apply --weight-decay; use --l2 with a sparse model instead");
}

}  // namespace

const std::vector<StrategyEntry>& strategies() {
  static const std::vector<StrategyEntry> table = {
      {"single", "one thread, minibatch SGD/Adam, whole-batch gradients (the fast reference)",
       [](const TrainFlags& f) {
         single_process(f);
         DT_CHECK(f.threads == 1, InvalidArgument,
                  "--strategy single uses one thread; for --threads " << f.threads << " use --strategy threads");
       },
       [](TrainableModel& m, Optimizer& opt, const float*, const TrainOptions&,
          const StrategyContext&) -> std::unique_ptr<LocalStrategy> {
         // One shard: the whole minibatch in one gemm. (threads uses 8 fixed shards so that
         // every T gives the same bits; with T = 1 that only costs time.)
         return std::make_unique<SyncThreads>(m, opt, 1, /*shards=*/1);
       },
       false, {}},
      {"threads", "each minibatch split over --threads T, gradients summed in a fixed order (bit-identical for any T <= 8)",
       single_process,
       [](TrainableModel& m, Optimizer& opt, const float*, const TrainOptions& o,
          const StrategyContext&) -> std::unique_ptr<LocalStrategy> {
         return std::make_unique<SyncThreads>(m, opt, o.threads);
       },
       false, {}},
      {"hogwild", "HOGWILD!: --threads T run SGD on one shared model without locks (Niu et al. 2011)", plain_sgd_only,
       [](TrainableModel& m, Optimizer&, const float* lr, const TrainOptions& o, const StrategyContext&) {
         return make_hogwild(m, lr, o, Hogwild::Mode::kLockFree);
       },
       false, {}},
      {"hogwild-lock", "the locking baseline: like hogwild, one mutex around every update", plain_sgd_only,
       [](TrainableModel& m, Optimizer&, const float* lr, const TrainOptions& o, const StrategyContext&) {
         return make_hogwild(m, lr, o, Hogwild::Mode::kLocked);
       },
       false, {}},
      {"ddp", "synchronous all-reduce SGD over -n N ranks, gradient buckets overlapped with backward (default for -n > 1)",
       multi_rank,
       [](TrainableModel& m, Optimizer& opt, const float*, const TrainOptions&,
          const StrategyContext& c) -> std::unique_ptr<LocalStrategy> {
         return std::make_unique<DataParallel>(m, opt, *c.comm, ddp_options(c.flags), c.instrument);
       },
       true, {}},
      {"localsgd", "Local SGD: --sync-every H local steps between model averages; --post-local E epochs of ddp first",
       multi_rank,
       [](TrainableModel& m, Optimizer& opt, const float*, const TrainOptions&,
          const StrategyContext& c) -> std::unique_ptr<LocalStrategy> {
         LocalSgdOptions o;
         o.sync_every = c.flags.sync_every;
         o.post_local_epochs = c.flags.post_local;
         o.ddp = ddp_options(c.flags);
         return std::make_unique<LocalSgd>(m, opt, *c.comm, o, c.instrument);
       },
       true, {}},
      {"ps", "parameter servers: the last --servers S ranks own parameter ranges; --sync, or async with --staleness K",
       ps_flags,
       [](TrainableModel& m, Optimizer&, const float* lr, const TrainOptions& to,
          const StrategyContext& c) -> std::unique_ptr<LocalStrategy> {
         PsOptions o;
         o.servers = c.flags.servers;
         o.sync = c.flags.sync;
         o.staleness = c.flags.staleness;
         o.deterministic = c.flags.deterministic;
         o.det_shard = c.flags.det_shard;
         o.optimizer = optimizer_of(to);
         return std::make_unique<ParamServer>(m, *c.comm, o, lr, c.instrument);
       },
       true, {}},
      {"gossip", "decentralized D-PSGD: average with neighbours in --topology ring|torus|exponential|complete",
       multi_rank,
       [](TrainableModel& m, Optimizer& opt, const float*, const TrainOptions&,
          const StrategyContext& c) -> std::unique_ptr<LocalStrategy> {
         return std::make_unique<Gossip>(m, opt, *c.comm, c.flags.topology, c.instrument);
       },
       true, {}},
      {"fedavg", "federated averaging: --clients K (non-IID with --dirichlet A), --client-fraction C, --local-epochs E; --epochs = rounds",
       multi_rank,
       [](TrainableModel& m, Optimizer&, const float* lr, const TrainOptions& to,
          const StrategyContext& c) -> std::unique_ptr<LocalStrategy> {
         FedAvgOptions o;
         o.clients = c.flags.clients > 0 ? c.flags.clients : 10 * c.comm->size();
         o.fraction = c.flags.client_fraction;
         o.local_epochs = c.flags.local_epochs;
         o.dirichlet = c.flags.dirichlet;
         o.seed = c.flags.seed;
         o.optimizer = optimizer_of(to);
         return std::make_unique<FedAvg>(m, *c.comm, o, lr, c.instrument);
       },
       true, {}},
      {"search", "parallel hyper-parameter search: --search GRID or --trials N, trials spread over the ranks",
       whole_job, {}, true, run_search},
      {"ensemble", "--members K independently seeded models on the ranks, predictions averaged",
       whole_job, {}, true, run_ensemble},
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
    os << "  " << s.name << std::string(s.name.size() < 14 ? 14 - s.name.size() : 1, ' ') << s.help << "\n";
  }
  return os.str();
}

}  // namespace dtrain::cli

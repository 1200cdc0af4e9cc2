// cli/train_cmd.cc — `dtrain train`: flags -> data -> model -> strategy -> Trainer -> report.
//
// Output: progress on stdout (a redrawn line on a terminal, one line per epoch otherwise),
// then one summary line (and, for multi-rank strategies, each rank's compute / comm / wait
// seconds); with --json FILE the run's results as JSON (schema: cli/train_report.h).
// -n N > 1 with a distributed strategy relaunches this command on N local ranks
// (cli/launch.h); every rank runs run_rank() and rank 0 prints.
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/launch.h"
#include "cli/train_flags.h"
#include "cli/train_mp.h"
#include "cli/train_report.h"
#include "cli/train_strategies.h"
#include "coll/collectives.h"
#include "data/registry.h"
#include "nn/mlp.h"
#include "tensor/blas.h"

namespace dtrain::cli {
namespace {

OptimizerConfig optimizer_config(const TrainFlags& f) {
  OptimizerConfig c;
  c.lr = effective_lr(f);
  c.weight_decay = f.weight_decay;
  if (f.optimizer == "momentum" || f.optimizer == "nesterov") {
    c.kind = "sgd";
    c.momentum = f.momentum;
    c.nesterov = f.optimizer == "nesterov";
  } else {
    c.kind = f.optimizer;
  }
  return c;
}

bool is_mlp(const std::string& m) { return m == "mlp" || m.rfind("mlp:", 0) == 0; }

// Checked before the data is loaded, so a typo fails in milliseconds.
void check_model_flag(const std::string& m) {
  DT_CHECK(is_mlp(m) || m == "logreg" || m == "svm" || m == "softmax", InvalidArgument,
           "unknown --model '" << m << "'; use mlp:784-256-128-10 (any widths), logreg, svm or softmax");
  if (is_mlp(m) && m.size() > 4) MLP::parse_spec(m.substr(4));
}

std::unique_ptr<TrainableModel> build_model(const TrainFlags& f, const data::Dataset& train) {
  const std::string& m = f.model;
  if (is_mlp(m)) {
    std::string spec = m.size() > 4 ? m.substr(4) : "";
    if (spec.empty()) spec = std::to_string(train.cols) + "-256-128-" + std::to_string(train.num_classes);
    return make_mlp_model(spec, train, f.seed);
  }
  if (m == "logreg" || m == "svm" || m == "softmax") return make_sparse_model(parse_sparse_loss(m), train, f.l2);
  DT_THROW(InvalidArgument, "unknown --model '" << m << "'; use mlp:784-256-128-10 (any widths), logreg, svm or softmax");
}


// The stream rank 0 draws progress on: the terminal the user started `dtrain train -n N`
// from (passed down as DTRAIN_PROGRESS_FD, since the launcher pipes the ranks' stdout and
// forwards whole lines only), else stdout.
std::FILE* progress_stream(bool* tty) {
  if (auto fd = env_get("DTRAIN_PROGRESS_FD")) {
    if (std::FILE* f = ::fdopen(std::atoi(fd->c_str()), "w")) {
      *tty = true;
      return f;
    }
  }
  *tty = is_tty(stdout);
  return stdout;
}

// Fault injection for tests (wrapping the real strategy): DTRAIN_FAULT_KILL="R:E" makes rank
// R kill itself with SIGKILL when 0-based epoch E begins — a crash, not an error exit.
class KillAtEpoch : public LocalStrategy {
 public:
  KillAtEpoch(std::unique_ptr<LocalStrategy> inner, int64_t epoch) : inner_(std::move(inner)), epoch_(epoch) {}
  const char* name() const override { return inner_->name(); }
  int threads() const override { return inner_->threads(); }
  LossAcc run_epoch(std::span<const int64_t> order, int64_t batch, const ProgressFn& p) override {
    return inner_->run_epoch(order, batch, p);
  }
  void begin_epoch(int64_t e) override {
    if (e == epoch_) ::raise(SIGKILL);
    inner_->begin_epoch(e);
  }
  std::vector<std::pair<std::string, double>> epoch_metrics() override { return inner_->epoch_metrics(); }
  LossAcc evaluate(TrainableModel& m, const data::Dataset& ds, ThreadPool* pool) override {
    return inner_->evaluate(m, ds, pool);
  }
  std::vector<uint8_t> save_state() const override { return inner_->save_state(); }
  void load_state(std::span<const uint8_t> b) override { inner_->load_state(b); }
  const Instrument* instrument() const override { return inner_->instrument(); }

 private:
  std::unique_ptr<LocalStrategy> inner_;
  int64_t epoch_;
};

int64_t fault_kill_epoch(int rank) {
  auto v = env_get("DTRAIN_FAULT_KILL");
  if (!v) return -1;
  const auto colon = v->find(':');
  if (colon == std::string::npos || std::atoi(v->substr(0, colon).c_str()) != rank) return -1;
  return std::atoll(v->substr(colon + 1).c_str());
}

// One rank's whole run (also the only rank of a single-process run). Returns the report on
// every rank; rank 0 prints and writes files.
TrainReport run_rank(const TrainFlags& f, const StrategyEntry& strategy, bool print) {
  std::shared_ptr<Communicator> comm;
  if (strategy.distributed) comm = Communicator::from_env();
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  // Replicas call gemm from several threads at once, and bit-identical results need a fixed
  // BLAS thread count: parallelism comes from the strategy, not from BLAS.
  set_blas_threads(1);

  data::DataSplit split = data::load_dataset(f.data);
  if (f.normalize) {
    data::normalize_rows(split.train);
    data::normalize_rows(split.test);
  }
  if (strategy.run) {
    strategy.run(f, *comm, split);
    return {};
  }
  std::unique_ptr<TrainableModel> model = build_model(f, split.train);
  bool tty = false;
  std::FILE* out = (rank == 0 && print && !f.quiet) ? progress_stream(&tty) : nullptr;
  if (out) {
    std::fprintf(out, "data: %s | test: %s\nmodel: %s | strategy %s on %d rank(s), %d thread(s), %s lr %g, batch %lld\n",
                 split.train.describe().c_str(), split.test.rows ? split.test.describe().c_str() : "none",
                 model->describe().c_str(), f.strategy.c_str(), world, f.threads, f.optimizer.c_str(), effective_lr(f),
                 static_cast<long long>(f.batch));
    std::fflush(out);
  }
  // Timeline: every rank records against rank 0's clock origin (one host: one steady clock).
  double origin = now_seconds();
  if (comm && world > 1) allreduce(*comm, &origin, 1, DType::kFloat64, ReduceOp::kMin);
  trace::Timeline timeline(rank, origin);
  TimelineSink sink(timeline);
  Instrument inst(f.trace.empty() ? nullptr : &sink);

  TrainOptions o;
  o.strategy = f.strategy;
  o.threads = f.threads;
  o.epochs = f.epochs;
  o.batch = f.batch;
  o.optimizer = optimizer_config(f);
  o.seed = f.seed;
  o.checkpoint_dir = f.checkpoint;
  o.resume = f.resume;
  o.out = out;
  o.tty = tty;
  o.comm = comm.get();
  StrategyContext ctx{f, comm.get(), &inst};
  const int64_t kill_at = fault_kill_epoch(rank);
  StrategyFactory factory = [&](TrainableModel& m, Optimizer& opt, const float* lr,
                                const TrainOptions& to) -> std::unique_ptr<LocalStrategy> {
    auto s = strategy.make(m, opt, lr, to, ctx);
    if (kill_at >= 0) return std::make_unique<KillAtEpoch>(std::move(s), kill_at);
    return s;
  };
  Trainer trainer(*model, &split.test, o, factory);
  TrainReport r = trainer.run();
  const std::vector<TimeSplit> splits = gather_splits(comm.get(), r.split);
  if (!f.trace.empty()) gather_trace(comm.get(), timeline, f.trace);
  if (rank == 0 && print) {
    print_summary(stdout, f, r, splits, strategy.distributed);
    if (!f.json.empty()) write_json_file(f.json, report_json(f, *model, split, r, splits, world));
  }
  return r;
}

// The launcher side of `dtrain train -n N`: start N ranks of this command, then (with
// --baseline) train the same job on 1 rank here and report the scaling.
int launch_job(const TrainFlags& f, const Args& args) {
  LaunchOptions lo;
  lo.nproc = f.ranks;
  lo.transport = f.transport;
  lo.timeout_s = f.timeout;
  lo.tag_output = false;
  if (is_tty(stdout)) {
    const int fd = ::dup(1);  // inherited by the ranks (no close-on-exec)
    if (fd >= 0) ::setenv("DTRAIN_PROGRESS_FD", std::to_string(fd).c_str(), 1);
  }
  Args again{"train"};
  again.insert(again.end(), args.begin(), args.end());
  std::string json = f.json;
  if (f.baseline && json.empty()) {
    json = "/tmp/dtrain-train-" + std::to_string(::getpid()) + ".json";
    again.insert(again.end(), {"--json", json});
  }
  const int rc = relaunch_self(lo, again);
  ::unsetenv("DTRAIN_PROGRESS_FD");
  if (rc != 0 || !f.baseline) return rc;

  nlohmann::json j = read_json_file(json);
  if (f.json.empty()) std::remove(json.c_str());
  std::printf("baseline: the same job on 1 rank ...\n");
  std::fflush(stdout);
  TrainFlags one = f;
  one.ranks = 1;
  one.quiet = true;
  one.json.clear();
  one.trace.clear();
  one.checkpoint.clear();
  one.resume = false;
  TrainReport base = run_rank(one, find_strategy(f.strategy), /*print=*/false);
  const double eps_n = j.value("examples_per_second", 0.0);
  const Scaling s = scaling(f.ranks, eps_n, base.examples_per_second);
  std::printf("baseline 1 rank: %.0f examples/s, test_accuracy %.4f\n", base.examples_per_second, base.test.accuracy());
  std::printf("%d ranks: %.0f examples/s -> speedup %.2fx, efficiency %.2f, Amdahl serial fraction %.3f\n", f.ranks,
              eps_n, s.speedup, s.efficiency, s.serial_fraction);
  if (!f.json.empty()) {
    j["baseline"] = {{"world_size", 1},
                     {"examples_per_second", base.examples_per_second},
                     {"test_accuracy", base.test.accuracy()},
                     {"train_seconds", base.train_seconds}};
    j["speedup"] = s.speedup;
    j["efficiency"] = s.efficiency;
    j["serial_fraction"] = s.serial_fraction;
    write_json_file(f.json, j);
  }
  return 0;
}

}  // namespace

int train_main(const Args& args) {
  // The transformer and model-parallel strategies (tp, pp, zero, hybrid) have their own driver.
  if (wants_model_parallel(args)) return train_mp_main(args);
  const TrainFlags f = parse_train_flags(args);
  if (f.help) {
    std::printf("%s%s\ndatasets:\n  %s\n", train_usage("").c_str(), strategies_help().c_str(),
                data::dataset_help().c_str());
    return 0;
  }
  const StrategyEntry& strategy = find_strategy(f.strategy);
  strategy.validate(f);
  check_model_flag(f.model);
  DT_CHECK(!f.baseline || f.ranks > 1, InvalidArgument, "--baseline compares -n N ranks with 1 rank; add -n N (N >= 2)");
  DT_CHECK(!f.baseline || f.strategy != "ps", InvalidArgument,
           "--baseline runs the job on 1 rank, but --strategy ps needs a server and a worker; compare -n values by hand");
  DT_CHECK(!f.baseline || !strategy.run, InvalidArgument,
           "--baseline measures training throughput; --strategy " << f.strategy << " runs independent trainings");
  if (strategy.distributed && f.ranks > 1 && !inside_launched_rank()) return launch_job(f, args);
  if (inside_launched_rank() && strategy.distributed) {
    // The launcher's -n and the job's world must agree.
    const WorldInfo w = world_from_env();
    DT_CHECK(w.size == f.ranks || !f.was_given("ranks"), InvalidArgument,
             "-n " << f.ranks << " but this job has " << w.size << " ranks");
  }
  run_rank(f, strategy, /*print=*/true);
  return 0;
}

}  // namespace dtrain::cli

#include "train/run.h"

#include <csignal>

#include "base/heap_stats.h"
#include "base/heap_warm.h"
#include "base/clock.h"
#include "base/error.h"
#include "coll/collectives.h"
#include "coll/shm_context.h"
#include "data/registry.h"
#include "nn/mlp.h"
#include "tensor/blas.h"
#include "tensor/denormals.h"
#include "trace/timeline.h"
#include "train/report.h"

namespace dtrain {
namespace {

bool is_mlp(const std::string& m) { return m == "mlp" || m.rfind("mlp:", 0) == 0; }

std::unique_ptr<TrainableModel> build_model(const TrainConfig& f, const data::Dataset& train) {
  const std::string& m = f.model;
  if (is_mlp(m)) {
    std::string spec = m.size() > 4 ? m.substr(4) : "";
    if (spec.empty()) spec = std::to_string(train.cols) + "-256-128-" + std::to_string(train.num_classes);
    return make_mlp_model(spec, train, f.seed);
  }
  if (m == "logreg" || m == "svm" || m == "softmax") return make_sparse_model(parse_sparse_loss(m), train, f.l2);
  DT_THROW(InvalidArgument, "unknown --model '" << m << "'; use mlp:784-256-128-10 (any widths), logreg, svm, softmax or gpt:...");
}

// Kills this rank when round K, or its step S of this run, begins (fault injection; run.h).
// Steps are counted by the progress calls, one per optimizer step of the strategy.
class KillAt : public Strategy {
 public:
  KillAt(Strategy& inner, int64_t round, int64_t step, int sig) : inner_(inner), round_(round), step_(step), sig_(sig) {}
  const char* name() const override { return inner_.name(); }
  int threads() const override { return inner_.threads(); }
  std::string describe() const override { return inner_.describe(); }
  int64_t examples_per_epoch() const override { return inner_.examples_per_epoch(); }
  bool classifies() const override { return inner_.classifies(); }
  void begin_round(const Round& r) override {
    if (r.index == round_) ::raise(sig_);
    inner_.begin_round(r);
  }
  bool splits_epochs() const override { return inner_.splits_epochs(); }
  LossAcc train_round(const Round& r, const ProgressFn& p) override {
    if (step_ == 0) ::raise(sig_);
    return inner_.train_round(r, [&](int64_t done, double loss) {
      if (++steps_ == step_) ::raise(sig_);
      if (p) p(done, loss);
    });
  }
  Metrics round_metrics() override { return inner_.round_metrics(); }
  LossAcc evaluate(ThreadPool* pool) override { return inner_.evaluate(pool); }
  int64_t steps() const override { return inner_.steps(); }
  void save(StateSections& s) const override { inner_.save(s); }
  void load(const StateSections& s) override { inner_.load(s); }
  void finish(const std::string& dir) override { inner_.finish(dir); }
  const Instrument* instrument() const override { return inner_.instrument(); }

 private:
  Strategy& inner_;
  int64_t round_, step_;
  int sig_;
  int64_t steps_ = 0;
};

}  // namespace

RunResult run_training(const TrainConfig& cfg, std::shared_ptr<Communicator> comm, const RunOptions& ro) {
  // Subnormals flushed to zero for the whole run (tensor/denormals.h): weights fed by inputs
  // that are always 0 (Fashion-MNIST's border pixels) get exact-zero gradients, so their
  // momentum and Adam moments decay geometrically into the subnormal range, where every
  // operation takes the core's slow path. The parameter server's momentum step of the
  // 235K-parameter MLP took 704 us a push, 97.5 with them flushed. Every thread the run starts from
  // here (pools, the communicator's progress thread, servers, HOGWILD! workers) inherits the
  // setting (POSIX: a new thread starts with its creator's floating-point environment), so
  // all of them round alike and results stay the same for any thread count.
  FlushDenormals ftz;
  const StrategyEntry& entry = check_config(cfg);
  int hosts = 1, ranks_per_host = 0;  // as the launcher says (0: every rank on this host)
  if (!comm && (entry.distributed || cfg.is_gpt())) {
    // Flags over the environment, under any launcher (dtrain run, mpirun, srun): comm/world.h.
    WorldInfo world = world_from_env();
    if (cfg.was_given("transport")) world.transport.kind = parse_transport_kind(cfg.transport);
    if (cfg.was_given("timeout")) world.set_timeout(cfg.timeout);
    hosts = world.hosts, ranks_per_host = world.local_size;
    comm = Communicator::from_world(std::move(world));
  }
  RunResult res;
  res.rank = comm ? comm->rank() : 0;
  res.world = comm ? comm->size() : 1;
  DT_CHECK(!cfg.is_gpt() || res.world == cfg.ranks, InvalidArgument,
           "-n " << cfg.ranks << " but this job has " << res.world << " ranks");
  // Replicas call gemm from several threads at once, and bit-identical results need a fixed
  // BLAS thread count: parallelism comes from the strategy, not from BLAS.
  set_blas_threads(cfg.is_gpt() ? cfg.blas_threads : 1);
  TrainJob& job = res.job;
  std::FILE* out = res.rank == 0 ? ro.out : nullptr;
  keep_heap_warm();  // freed activations stay mapped between steps (base/heap_warm.h)
  if (cfg.is_gpt()) {
    job.text = data::load_text(cfg.data.substr(5));
  } else {
    job.split = data::load_dataset(cfg.data);
    if (cfg.normalize) {
      data::normalize_rows(job.split.train);
      data::normalize_rows(job.split.test);
    }
    if (entry.run) {
      res.json = entry.run(cfg, *comm, job.split, cfg.quiet ? nullptr : stdout);
      return res;
    }
  }
  // What the data and the runtime hold before the model exists: the training heap is measured
  // above this (base/heap_stats.h; the planner predicts that part).
  const int64_t heap_baseline = heap_stats().live;
  if (!cfg.is_gpt()) job.model = build_model(cfg, job.split.train);
  job.lr = effective_lr(cfg);

  // Timeline: every rank records against rank 0's clock origin (one host: one steady clock).
  double origin = now_seconds();
  if (comm && res.world > 1) allreduce(*comm, &origin, 1, DType::kFloat64, ReduceOp::kMin);
  trace::Timeline timeline(res.rank, origin);
  TimelineSink sink(timeline);
  Instrument inst(cfg.trace.empty() ? nullptr : &sink);
  entry.make(job, StrategyContext{cfg, comm.get(), &inst});
  if (out) {
    std::fprintf(out, "%s | strategy %s on %d rank(s), %d thread(s), %s lr %g, batch %lld\n",
                 job.strategy->describe().c_str(), cfg.strategy.c_str(), res.world, cfg.threads, cfg.optimizer.c_str(),
                 effective_lr(cfg), static_cast<long long>(cfg.batch));
    std::fflush(out);
  }

  TrainOptions o;
  o.strategy = cfg.strategy;
  o.threads = cfg.threads;
  o.epochs = cfg.epochs;
  o.steps = cfg.steps;
  o.round_steps = cfg.checkpoint_every > 0 ? cfg.checkpoint_every : cfg.eval_every;
  o.batch = cfg.batch;
  o.seed = cfg.seed;
  o.checkpoint_dir = cfg.checkpoint;
  o.resume = cfg.resume;
  o.resume_if_present = ro.resume_if_present;
  o.out = out;
  o.tty = ro.tty;
  o.comm = comm.get();
  Strategy* strategy = job.strategy.get();
  std::unique_ptr<KillAt> killer;
  if (ro.kill_round >= 0 || ro.kill_step >= 0)
    strategy = (killer = std::make_unique<KillAt>(*job.strategy, ro.kill_round, ro.kill_step, ro.kill_signal)).get();
  res.report = Trainer(*strategy, o).run();
  const Metrics stats = job.strategy->stats();  // collective
  res.splits = gather_splits(comm.get(), res.report.split);
  if (!cfg.trace.empty()) gather_trace(comm.get(), timeline, cfg.trace);
  // Peak training heap above the baseline, the largest over the ranks (collective).
  double heap_mb = static_cast<double>(res.report.train_heap_peak - heap_baseline) / 1e6;
  if (comm && res.world > 1) allreduce(*comm, &heap_mb, 1, DType::kFloat64, ReduceOp::kMax);
  if (res.rank == 0) {
    res.json = report_json(cfg, job, res.report, res.splits, res.world, stats);
    res.json["train_heap_mb"] = heap_mb;
    res.json["heap_baseline_mb"] = static_cast<double>(heap_baseline) / 1e6;
    // The fabric the run's transfers took, which its prediction prices (plan::over_fabric).
    if (comm && res.world > 1) {
      res.json["transport"] = comm->transport().kind();
      res.json["hosts"] = hosts;
      if (hosts > 1) res.json["ranks_per_host"] = ranks_per_host;
    }
    // Which 2-rank shared-memory path the run's collectives took (ShmContext's verdict; where
    // it was re-probed during the run, the verdict most of the distance-dependent calls ran
    // under, and the far share), so its prediction prices that path (cli/plan_predict.cc).
    if (const ShmContext* x = comm ? comm->shm_context() : nullptr; x && *x->core_distance_from()) {
      const int64_t counted = x->close_calls() + x->far_calls();
      res.json["shm_cores"] = (counted > 0 ? 2 * x->far_calls() > counted : x->cores_far()) ? "far" : "close";
      if (counted > 0) {
        res.json["shm_far_share"] = static_cast<double>(x->far_calls()) / static_cast<double>(counted);
        res.json["shm_probes"] = x->probes();
      }
    }
  }
  return res;
}

}  // namespace dtrain

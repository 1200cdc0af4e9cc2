#include "plan/calibrate_compute.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <thread>

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "base/median.h"
#include "parallel/share_grad.h"
#include "plan/simulator.h"
#include "tensor/denormals.h"

#include "optim/optimizer.h"
#include "tensor/blas.h"

namespace dtrain::plan {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median time of fn over repetitions filling about `seconds` (the typical call: what a run
// pays on a shared machine, where the best call is far below the average).
template <class Fn>
double best_of(double seconds, Fn&& fn) {  // the median of the runs (at least 3)
  fn();
  std::vector<double> ts;
  const double start = now();
  do {
    double t0 = now();
    fn();
    ts.push_back(now() - t0);
  } while ((now() - start < seconds && ts.size() < 10000) || ts.size() < 3);
  std::nth_element(ts.begin(), ts.begin() + static_cast<long>(ts.size() / 2), ts.end());
  return ts[ts.size() / 2];
}

// The element-wise rates (one core, every core) are measured in this many alternating windows.
constexpr int kStreamWindows = 4;

struct Shape {
  int64_t m, n, k;
};

double gemm_seconds(const Shape& s, double seconds) {
  std::vector<float> a(s.m * s.k, 0.5f), b(s.k * s.n, 0.25f), c(s.m * s.n);
  return best_of(seconds, [&] { gemm(false, false, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f, c.data(), s.n); });
}

}  // namespace

ProcessRun run_processes(const UnitPoint& p, int procs, int passes) {
  // Each child writes its timed passes' (start, end) into a shared page; the parent reads
  // them after every child has exited (waitpid orders the writes before the reads).
  // (An anonymous mapping starts zeroed: a pass never timed reads (0, 0).)
  const size_t per_proc = 2 * static_cast<size_t>(std::max(passes, 1)), slots = per_proc * static_cast<size_t>(procs);
  void* mem = ::mmap(nullptr, slots * sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  DT_CHECK(mem != MAP_FAILED, Error, "calibrate: cannot map the oversubscription probe's timestamps");
  auto* stamps = static_cast<double*>(mem);
  const double t0 = now();
  std::vector<pid_t> kids;
  for (int i = 0; i < procs; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      // Every CPU: the calibration runs inside rank 0 of a `dtrain run` job, which the
      // launcher binds to one core when the ranks fit (DTRAIN_BIND), and a forked child
      // inherits that. Bound, `cores` processes shared one core and the curve read 2.0 at
      // k = cores on 2 free cores, doubling every prediction at 2 ranks. The ranks it stands
      // for run one per core (bound) or, beyond the cores, unbound: either way spread.
      cpu_set_t all;
      CPU_ZERO(&all);
      const long cpus = std::min<long>(::sysconf(_SC_NPROCESSORS_CONF), CPU_SETSIZE);
      for (long c = 0; c < cpus; ++c) CPU_SET(static_cast<int>(c), &all);
      ::sched_setaffinity(0, sizeof all, &all);  // the kernel keeps only the CPUs allowed here
      double* mine = stamps + static_cast<size_t>(i) * per_proc;
      int done = 0;
      int rc = 0;
      try {
        time_unit(p, 0, passes, [&](double a, double b) {
          if (done < passes) mine[2 * done] = a, mine[2 * done + 1] = b, ++done;
        });
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    if (pid < 0) {
      for (pid_t k : kids) ::waitpid(k, nullptr, 0);
      ::munmap(mem, slots * sizeof(double));
      DT_THROW(Error, "calibrate: cannot fork a process for the oversubscription measurement");
    }
    kids.push_back(pid);
  }
  bool ok = true;
  for (pid_t k : kids) {
    int st = 0;
    ok &= ::waitpid(k, &st, 0) == k && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  ProcessRun run;
  run.wall_s = now() - t0;
  // The window where all of them ran their timed passes, and the passes wholly inside it.
  const auto pass_of = [&](int proc, int j) {
    const double* q = stamps + static_cast<size_t>(proc) * per_proc + 2 * static_cast<size_t>(j);
    return std::pair<double, double>{q[0], q[1]};
  };
  double lo = 0, hi = 1e300;
  for (int i = 0; i < procs && passes > 0; ++i) {
    lo = std::max(lo, pass_of(i, 0).first);
    hi = std::min(hi, pass_of(i, passes - 1).second);
  }
  double sum = 0;
  for (int i = 0; i < procs && ok; ++i)
    for (int j = 0; j < passes; ++j) {
      const auto [a, b] = pass_of(i, j);
      if (a > 0 && a >= lo && b <= hi) sum += b - a, ++run.steady_passes;
    }
  if (run.steady_passes > 0) run.steady_pass_s = sum / run.steady_passes;
  ::munmap(mem, slots * sizeof(double));
  DT_CHECK(ok, Error, "calibrate: an oversubscription process failed");
  return run;
}

constexpr int kProbePasses = 12;

std::string slowdown_warning(const std::vector<std::pair<double, double>>& curve, int cores) {
  const auto pair = std::find_if(curve.begin(), curve.end(), [](const auto& pt) { return pt.first == 2; });
  if (cores < 2 || pair == curve.end() || pair->second <= kBusySlowdown) return "";
  char msg[320];
  std::snprintf(msg, sizeof msg,
                "2 processes ran %.2fx slower than one on %d cores: the cores were not free while this was measured "
                "(another job, or a VM giving less than a core per vCPU); predictions from this file assume that "
                "load. Re-run `dtrain bench calibrate` on a quiet machine, or refresh the curve beside a run with "
                "--slowdown-only",
                pair->second, cores);
  return msg;
}

std::vector<int> slowdown_process_counts(int cores) {
  std::vector<int> ks;
  for (int k = 2; k < cores; k *= 2) ks.push_back(k);
  for (int k : {cores, 2 * cores})
    if (k > 1) ks.push_back(k);
  return ks;
}

std::vector<std::pair<double, double>> measure_slowdown(int cores, double* pass_s) {
  keep_heap_warm();  // the forked processes inherit it (plan/calibrate_units.h)
  set_blas_threads(1);
  // Oversubscription with real processes: a GPT block (width 128, 4 sequences) in each.
  const UnitPoint blk{"gpt_block", "gpt:layers=1,heads=8,width=128,context=64", 1, 4, 0, 0, 0};
  // The slowdown curve: k processes of the same work each, k = 1, 2, 4, ... up to the cores,
  // then 2 x cores (slowdown_process_counts); how much slower a pass runs while k of them
  // share the node is how much slower each rank runs with k on the node (2 vCPUs that are
  // one core's hyperthreads already slow down at k = cores). The points below the cores
  // matter on a many-core host: a 16-vCPU VM read 1.03-1.13x at 2, 1.17-1.29x at 4 and
  // 1.28-1.72x at 16, where the straight line from 1 to 16 had put 4 at 1.11.
  // The steady pass (ProcessRun::steady_pass_s): the mean pass while all k run, over one
  // process's. It was the wall time of the k processes over one's, which also counts their
  // start-up and the tail where the last ones finish alone: on the EPYC VM (2026-12-01) it
  // read 2.13-2.46 at 4 processes on 2 cores where the steady pass read 2.02-2.24, and the
  // GPT's steps at 4 ranks (tens of ms between meetings, far longer than a time slice) ran
  // at about 2.1x their 1-rank compute: priced at 2.46 they read +12..+25% in two validations
  // (dv-s1, dv-s2). The cost of ranks that meet every step while sharing a core is the
  // simulator's (simulate_data_parallel.cc: their caches refilled), not this curve's.
  // Three rounds, each timing 1 and every k processes back to back, and the median
  // round's ratio per k: one spike of the background load (another job's burst) otherwise
  // sets the whole curve (seen here: 2.47x / 5.38x one minute, 1.1x / 2.2x the next).
  // A fixed number of passes per process (not `seconds`' worth), so that the full
  // calibration and a --slowdown-only re-probe time the same work (the one-process pass,
  // start-up included, is the speed probe's reference).
  const int rounds = 3, per_round = kProbePasses;
  const std::vector<int> ks = slowdown_process_counts(cores);
  std::vector<double> ones;
  std::vector<std::vector<double>> ratios(ks.size());
  for (int r = 0; r < rounds; ++r) {
    const ProcessRun one = run_processes(blk, 1, per_round);
    ones.push_back(one.wall_s / per_round);
    for (size_t i = 0; i < ks.size(); ++i) {
      const ProcessRun k = run_processes(blk, ks[i], per_round);
      // A window without a whole pass (a host too loaded to overlap them): the wall ratio.
      const bool steady = k.steady_pass_s > 0 && one.steady_pass_s > 0;
      ratios[i].push_back(std::max(1.0, steady ? k.steady_pass_s / one.steady_pass_s : k.wall_s / one.wall_s));
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (pass_s) *pass_s = median(ones);
  std::vector<std::pair<double, double>> curve{{1, 1.0}};
  for (size_t i = 0; i < ks.size(); ++i) curve.push_back({static_cast<double>(ks[i]), median(ratios[i])});
  return curve;
}

double speed_probe(double seconds) {
  keep_heap_warm();
  set_blas_threads(1);
  const UnitPoint blk{"gpt_block", "gpt:layers=1,heads=8,width=128,context=64", 1, 4, 0, 0, 0};
  const UnitPass r = time_unit(blk, seconds, 0);
  return r.fwd_s + r.bwd_s;
}

std::vector<double> speed_probe_each_cpu(double seconds_each) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::pthread_getaffinity_np(::pthread_self(), sizeof allowed, &allowed) != 0) return {};
  std::vector<double> passes;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    if (::pthread_setaffinity_np(::pthread_self(), sizeof one, &one) != 0) continue;
    passes.push_back(speed_probe(seconds_each));
  }
  ::pthread_setaffinity_np(::pthread_self(), sizeof allowed, &allowed);
  return passes;
}

double lockstep_probe(std::vector<double> passes, int ranks) {
  if (passes.empty()) return 0;
  std::sort(passes.begin(), passes.end());
  const size_t used = static_cast<size_t>(std::clamp<int64_t>(ranks, 1, static_cast<int64_t>(passes.size())));
  return passes[used - 1];
}

double step_around_layers(const std::vector<double>& step_s, const std::vector<double>& layers_s) {
  DT_CHECK(!step_s.empty() && step_s.size() == layers_s.size(), InvalidArgument,
           "step_around_layers: " << step_s.size() << " step rounds against " << layers_s.size() << " layer rounds");
  std::vector<double> d;
  for (size_t i = 0; i < step_s.size(); ++i) d.push_back(step_s[i] - layers_s[i]);
  return median(std::move(d));
}

std::vector<UnitPoint> mlp_step_points(const std::string& spec, double seconds) {
  constexpr int64_t kMlpStepDataBytes = int64_t{256} << 20;
  constexpr int kStepRounds = 3;
  const ModelSpec m = ModelSpec::parse(spec);
  if (m.gpt || m.units.empty()) return {};
  keep_heap_warm();
  set_blas_threads(1);
  FlushDenormals ftz;  // as the executors run
  // A synthetic dense dataset of the model's shape, far larger than the caches
  // (kMlpStepDataBytes, at most 1M rows), and minibatches of rows drawn at random, as training
  // draws them: the step's cost does not depend on the values, but it does on where the rows
  // come from. (With the same few rows
  // every pass, hot in cache, the step line missed the gather that perf put at 58 us of a
  // 1-rank step at batch 64; a separate gather rate covered 25 of them.)
  data::Dataset ds;
  ds.source = "calibration";
  ds.cols = static_cast<int64_t>(m.units.front().act_elems - m.units.front().out_elems);
  ds.num_classes = static_cast<int>(m.units.back().out_elems);
  ds.rows = std::clamp<int64_t>(kMlpStepDataBytes / (ds.cols * static_cast<int64_t>(sizeof(float))), 256, int64_t{1} << 20);
  for (int64_t i = 0; i < ds.rows; ++i) ds.labels.push_back(static_cast<int32_t>(i % ds.num_classes));
  ds.dense.resize(static_cast<size_t>(ds.rows * ds.cols));
  for (size_t i = 0; i < ds.dense.size(); ++i) ds.dense[i] = 0.25f + 0.01f * static_cast<float>(i % 97);
  auto model = make_mlp_model(spec.substr(4), ds, 1);
  ShareGradient share(*model, ShareOptions{});
  std::vector<UnitPoint> out;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int64_t items : kMlpItems) {
    constexpr size_t kBatches = 64;  // drawn up front, used in turn
    std::vector<std::vector<int64_t>> batches(kBatches, std::vector<int64_t>(static_cast<size_t>(items)));
    for (auto& b : batches)
      for (auto& id : b) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        id = static_cast<int64_t>(x % static_cast<uint64_t>(ds.rows));
      }
    size_t next = 0;
    // Less its layers timed at these items in the same round (step_around_layers), kept
    // signed: clamped at 0, a host whose whole step ran faster than its layers' plane lost
    // the step's time altogether ("mlp_step_of_timed_layers", calibrate_compute.h).
    const double per = seconds / kStepRounds;  // each timing: the step's as before, each layer's alike
    std::vector<double> steps, layers;
    for (int round = 0; round < kStepRounds; ++round) {
      steps.push_back(best_of(per, [&] { share.compute(model->params(), batches[next++ % kBatches], 0, 1, [](GradRange) {}); }));
      double sum = 0;
      for (size_t u = 0; u < m.units.size(); ++u) {
        const UnitPoint lp{"mlp_layer", spec, static_cast<int>(u), items, static_cast<double>(items) * unit_work(m.units[u]), 0, 0};
        const UnitPass r = time_unit(lp, per, 0);
        sum += r.fwd_s + r.bwd_s;
      }
      layers.push_back(sum);
    }
    UnitPoint p{"mlp_step", spec, 0, items, static_cast<double>(items) * mlp_step_work(m), 0, 0};
    p.fwd_s = step_around_layers(steps, layers);
    out.push_back(p);
  }
  return out;
}

ComputeRates measure_compute(double seconds, const std::vector<std::string>& extra_specs) {
  ComputeRates r;
  r.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_blas_threads(1);
  const std::vector<Shape> shapes{{32, 256, 784}, {32, 128, 256}, {768, 384, 128}, {768, 512, 128},
                                  {768, 128, 512}, {768, 65, 128}};
  const double per = seconds / (shapes.size() + 4);
  std::vector<double> rates;
  for (const auto& s : shapes) {
    double g = 2.0 * s.m * s.n * s.k / gemm_seconds(s, per) / 1e9;
    r.gemm_by_shape.push_back({std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k), g});
    rates.push_back(g);
  }
  std::sort(rates.begin(), rates.end());
  r.gemm_gflops = rates[rates.size() / 2];

  // Element-wise: a = a * b + c touches 4 arrays' worth of bytes (3 reads, 1 write).
  const size_t n = 4u << 20;
  auto stream = [n](float* x, const float* y, const float* z) {
    for (size_t i = 0; i < n; ++i) x[i] = x[i] * y[i] + z[i];
  };
  std::vector<float> a(n, 1.0f), b(n, 0.999f), c(n, 0.001f);
  auto one_core = [&] { return 16.0 * n / best_of(per / kStreamWindows, [&] { stream(a.data(), b.data(), c.data()); }); };
  // Every core at once, each thread its own arrays (the node's streaming bandwidth).
  std::vector<std::vector<float>> arrays(static_cast<size_t>(r.cores) * 3);
  if (r.cores > 1)
    for (size_t i = 0; i < arrays.size(); ++i) arrays[i].assign(n, i % 3 == 0 ? 1.0f : i % 3 == 1 ? 0.999f : 0.001f);
  auto every_core = [&] {
    const double all = best_of(per / kStreamWindows, [&] {
      std::vector<std::thread> ts;
      for (size_t k = 0; k < static_cast<size_t>(r.cores); ++k)
        ts.emplace_back([&, k] { stream(arrays[3 * k].data(), arrays[3 * k + 1].data(), arrays[3 * k + 2].data()); });
      for (auto& th : ts) th.join();
    });
    return 16.0 * n * r.cores / all;
  };
  // The two in alternating windows, each rate its best window's: one window of every core at
  // once that caught a core descheduled by the VM's host read 12.9 GB/s for the node against
  // 20.0 for one core alone (2-vCPU Xeon VM, 2026-11-29; 25-28 against 13-18 in the minutes
  // after), and priced gossip and ps at 4-8 ranks 28-52% slow. The node cannot stream less
  // than one of its cores alone, so it is never taken below that either.
  double single = 0, node = 0;
  for (int w = 0; w < kStreamWindows; ++w) {
    single = std::max(single, one_core());
    if (r.cores > 1) node = std::max(node, every_core());
  }
  r.elementwise_gbps = single / 1e9;
  if (r.cores > 1) r.elementwise_node_gbps = std::max(node, single) / 1e9;

  // Gather: a minibatch's rows from a dataset the caches cannot hold. The unit and step lines
  // gather the same few rows every pass (hot); training gathers random rows of the whole
  // dataset: 58 us a step of 64 Fashion-MNIST rows in perf of a 1-rank run, which the lines
  // did not see (the MLP's steps read 9-34% low at one rank).
  {
    constexpr size_t kRow = 784, kRows = (size_t{256} << 20) / (kRow * sizeof(float)), kBatch = 64;
    std::vector<float> data(kRow * kRows, 0.5f), out(kRow * kBatch);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    const double g = best_of(per, [&] {
      for (size_t i = 0; i < kBatch; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::memcpy(out.data() + i * kRow, data.data() + (x % kRows) * kRow, kRow * sizeof(float));
      }
    });
    r.gather_gbps = static_cast<double>(kBatch * kRow * sizeof(float)) / g / 1e9;
  }

  // Each optimizer family at sizes from in-cache to streaming: the rate per parameter of a
  // 235K-parameter plain SGD step (the validation MLP's) is half that of a 1M one here, and
  // pricing it at 1M with momentum put the MLP's step 30% high at 8 items a rank.
  for (const std::string family : {"sgd", "momentum", "adamw"}) {
    OptimizerConfig oc;
    oc.kind = family == "adamw" ? "adamw" : "sgd";
    oc.momentum = family == "momentum" ? 0.9f : 0.0f;
    oc.lr = 1e-4f;
    for (int64_t P : {int64_t{1} << 16, int64_t{1} << 18, int64_t{1} << 20, int64_t{1} << 22}) {
      std::vector<float> params(static_cast<size_t>(P), 0.1f), grads(static_cast<size_t>(P), 0.01f);
      auto opt = make_optimizer(oc, P);
      const double ns = best_of(per / 4, [&] { opt->step(params, grads); }) / static_cast<double>(P) * 1e9;
      r.optimizer_rates[family].push_back({static_cast<double>(P), ns});
      if (P == int64_t{1} << 20 && family == "adamw") r.adamw_ns_per_param = ns;
      if (P == int64_t{1} << 20 && family == "momentum") r.sgd_ns_per_param = ns;
    }
  }

  // The executors' units, fitted per kind, between two speed probes.
  const double probe_before = speed_probe(per);
  r.unit_points = default_unit_points();
  for (const auto& spec : extra_specs) {
    // (A spec already timed, one of the defaults or an extra named again, is not timed twice.)
    const bool timed = std::any_of(r.unit_points.begin(), r.unit_points.end(), [&](const UnitPoint& p) { return p.spec == spec; });
    if (!timed)
      for (auto& p : unit_points_for(spec)) r.unit_points.push_back(p);
  }
  // Each point the same share of the time, however many there are (0.46 per a point when
  // the default ones were 52 in 2.4 per; the wide MLP's and --models' points add to it).
  measure_units(r.unit_points, 0.5 * per * static_cast<double>(r.unit_points.size()));
  r.units = fit_units(r.unit_points);
  std::vector<std::string> mlps;
  for (const auto& p : r.unit_points)
    if (p.kind == "mlp_layer" && std::find(mlps.begin(), mlps.end(), p.spec) == mlps.end()) mlps.push_back(p.spec);
  for (const auto& spec : mlps)
    for (auto& p : mlp_step_points(spec, per)) r.unit_points.push_back(p);
  r.units = fit_units(r.unit_points);
  r.speed_probe_s = std::sqrt(probe_before * speed_probe(per));

  r.slowdown = measure_slowdown(r.cores, &r.probe_pass_s);
  r.oversub_penalty = std::max(1.0, r.slowdown.back().second / (r.slowdown.back().first / r.cores));
  r.handoff = measure_handoff();
  r.mix = measure_mix(mix_calibration_sizes(), 4 * per);
  return r;
}

std::vector<int> calibrated_rank_counts(int cores) {
  std::vector<int> out{2, 4, 8};
  for (int p = 16; p <= std::min(cores, 64); p *= 2) out.push_back(p);
  return out;
}

nlohmann::json compute_json(const ComputeRates& r) {
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [k, v] : r.gemm_by_shape) shapes[k] = v;
  return {{"version", 3},
          {"cores", r.cores},
          {"gemm_gflops", r.gemm_gflops},
          {"gemm_gflops_by_shape", shapes},
          {"elementwise_gbps", r.elementwise_gbps},
          {"elementwise_node_gbps", r.elementwise_node_gbps},
          {"gather_gbps", r.gather_gbps},
          {"mlp_step_random_rows", true},
          {"mlp_step_of_timed_layers", true},
          {"optimizer_ns_per_param", r.adamw_ns_per_param},
          {"sgd_ns_per_param", r.sgd_ns_per_param},
          {"optimizer_rates", r.optimizer_rates},
          {"oversub_penalty", r.oversub_penalty},
          {"slowdown", r.slowdown},
          {"probe_pass_s", r.probe_pass_s},
          {"speed_probe_s", r.speed_probe_s},
          {"handoff", handoff_json(r.handoff)},
          {"mix_gbps_by_size", mix_json(r.mix.all)},
          {"mix_gbps_by_cores", mix_by_cores_json(r.mix.by_cores)},
          {"mix_shared_gbps_by_size", mix_json(r.mix.shared)},
          {"mix_shared_gbps_by_cores", mix_by_cores_json(r.mix.shared_by_cores)},
          {"units", units_json(r.unit_points, r.units)}};
}

nlohmann::json mix_json(const std::vector<std::pair<double, double>>& by_size) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [bytes, bps] : by_size) out.push_back({bytes, bps / 1e9});
  return out;
}

nlohmann::json mix_by_cores_json(const std::map<std::string, std::vector<std::pair<double, double>>>& by_cores) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [verdict, points] : by_cores) out[verdict] = mix_json(points);
  return out;
}

nlohmann::json handoff_json(const CacheHandoff& h) {
  if (!h.measured) return nlohmann::json::object();
  nlohmann::json j = {{"bytes", h.bytes},
                      {"write_after_read_ns_per_byte", h.write_after_read_s_per_byte * 1e9},
                      {"read_after_write_ns_per_byte", h.read_after_write_s_per_byte * 1e9},
                      {"store_after_read_ns_per_byte", h.store_after_read_s_per_byte * 1e9}};
  for (const auto& [verdict, r] : h.by_cores)
    j["by_cores"][verdict] = {{"write_after_read_ns_per_byte", r.write_after_read_s_per_byte * 1e9},
                              {"read_after_write_ns_per_byte", r.read_after_write_s_per_byte * 1e9},
                              {"store_after_read_ns_per_byte", r.store_after_read_s_per_byte * 1e9},
                              {"rounds", r.rounds}};
  return j;
}

}  // namespace dtrain::plan

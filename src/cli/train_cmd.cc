// cli/train_cmd.cc — `dtrain train`: flags -> (launch -n N ranks) -> train::run_training -> print.
//
// Output: progress on stdout (a redrawn line on a terminal, one line per epoch or round
// otherwise), then a summary (and, for multi-rank strategies, each rank's compute / comm /
// wait seconds); with --json FILE the run's results as JSON (train/report.h). -n N > 1 with a
// distributed strategy relaunches this command on N local ranks (launch/launch.h); every rank
// runs run_training() and rank 0 prints. --baseline then trains the same job on 1 rank in the
// launcher and reports the speedup.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/env.h"
#include "base/error.h"
#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/cores_sampler.h"
#include "cli/train_flags.h"
#include "comm/world.h"
#include "data/registry.h"
#include "launch/launch.h"
#include "plan/calibrate_cache.h"
#include "plan/calibrate_compute.h"
#include "train/report.h"
#include "cli/plan_predict.h"
#include "train/run.h"

namespace dtrain::cli {
namespace {

// How long --probe-speed's probe runs on each CPU (a pass is 3-7 ms here: 40-100 passes).
constexpr double kRunProbeSeconds = 0.3;

// --probe-speed's pace for a job of `ranks` lockstep ranks: the probe on each CPU in turn
// (plan::speed_probe_each_cpu; every CPU at once would meet the ranks' own contention) and
// the slowest CPU the ranks need (plan::lockstep_probe). The passes by CPU go to *by_cpu.
double run_speed_probe(int ranks, std::vector<double>* by_cpu) {
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  // 0.3 s a CPU on the 2-vCPU VM, never under 50 ms (10+ passes) nor over 2.4 s in all.
  const double each = std::clamp(2.4 / cpus, 0.05, kRunProbeSeconds);
  *by_cpu = plan::speed_probe_each_cpu(each);
  const double pace = plan::lockstep_probe(*by_cpu, ranks);
  return pace > 0 ? pace : plan::speed_probe(kRunProbeSeconds);
}

// The passes by CPU as the launcher hands them to rank 0 (DTRAIN_SPEED_PROBE_CPUS_S), and
// back: comma-separated seconds; reading stops at the first entry that is not a number.
std::string joined(const std::vector<double>& v) {
  std::string s;
  char one[32];
  for (double x : v) {
    std::snprintf(one, sizeof one, "%s%.9g", s.empty() ? "" : ",", x);
    s += one;
  }
  return s;
}

std::vector<double> split_seconds(const std::string& text) {
  std::vector<double> v;
  for (const char* c = text.c_str(); *c;) {
    char* end = nullptr;
    const double x = std::strtod(c, &end);
    if (end == c) break;
    v.push_back(x);
    c = *end == ',' ? end + 1 : end;
  }
  return v;
}
// The cores' round trip beside it: 5 ms of batches (a far round trip is ~0.4 us).
constexpr double kCoresProbeSeconds = 0.005;

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

// Fault injection (train/run.h): DTRAIN_FAULT_KILL is a comma-separated list whose entry i
// applies to attempt i of a restarted job (DTRAIN_RESTART = i); an entry "R:K" kills rank R
// when round K begins, "R:step:S" when its step S of the attempt begins, "-" kills nobody;
// DTRAIN_FAULT_SIGNAL=STOP stops the rank (a hang) instead of killing it.
void fault_kill(int rank, int attempt, RunOptions& ro) {
  const auto v = env_get("DTRAIN_FAULT_KILL");
  if (!v) return;
  std::vector<std::string> entries;
  size_t start = 0;
  for (size_t comma; (comma = v->find(',', start)) != std::string::npos; start = comma + 1)
    entries.push_back(v->substr(start, comma - start));
  entries.push_back(v->substr(start));
  if (attempt < 0 || attempt >= static_cast<int>(entries.size()) || entries[static_cast<size_t>(attempt)] == "-") return;
  const std::string& e = entries[static_cast<size_t>(attempt)];
  const auto colon = e.find(':');
  DT_CHECK(colon != std::string::npos, InvalidArgument,
           "DTRAIN_FAULT_KILL entries are RANK:ROUND or RANK:step:STEP, got '" << e << "'");
  if (std::atoi(e.substr(0, colon).c_str()) != rank) return;
  const std::string sig = env_string("DTRAIN_FAULT_SIGNAL", "KILL");
  DT_CHECK(sig == "KILL" || sig == "STOP", InvalidArgument, "DTRAIN_FAULT_SIGNAL must be KILL or STOP, got '" << sig << "'");
  ro.kill_signal = sig == "STOP" ? SIGSTOP : SIGKILL;
  const std::string rest = e.substr(colon + 1);
  if (rest.rfind("step:", 0) == 0) ro.kill_step = std::atoll(rest.substr(5).c_str());
  else ro.kill_round = std::atoll(rest.c_str());
}

// One rank's run; rank 0 prints and writes files.
RunResult run_rank(const TrainConfig& f, bool print) {
  RunOptions ro;
  bool tty = false;
  if (print && !f.quiet) ro.out = progress_stream(&tty);
  ro.tty = tty;
  const WorldInfo w = world_from_env();
  const int attempt = static_cast<int>(env_int("DTRAIN_RESTART", 0));
  fault_kill(w.rank, attempt, ro);
  ro.resume_if_present = attempt > 0;  // a restarted job continues from its checkpoints
  // --probe-speed: the pace the machine computes at right before the run. The launcher times
  // it before starting the ranks (DTRAIN_SPEED_PROBE_S), when nothing else of the job runs; a
  // rank 0 started otherwise (-n 1, mpirun, srun) times it itself before training.
  // So is the cores' distance (a cache line's round trip between two pinned threads), which
  // the launcher always times: on a VM whose vCPUs move it decides what crossing cores costs,
  // and the prediction takes the calibration's figures of the same verdict.
  double probe_s = 0, round_trip_ns = 0;
  if (print && w.rank == 0) {
    const auto cores = env_get("DTRAIN_CORES_PROBE_NS");
    round_trip_ns = cores ? std::atof(cores->c_str()) : 0;
  }
  std::vector<double> probe_by_cpu;
  if (f.probe_speed && print && w.rank == 0) {
    const auto passed = env_get("DTRAIN_SPEED_PROBE_S");
    probe_s = passed ? std::atof(passed->c_str()) : 0;
    if (const auto cpus = env_get("DTRAIN_SPEED_PROBE_CPUS_S")) probe_by_cpu = split_seconds(*cpus);
    if (!(probe_s > 0)) probe_s = run_speed_probe(w.size, &probe_by_cpu);
    if (!(round_trip_ns > 0)) round_trip_ns = plan::probe_core_round_trip_ns(kCoresProbeSeconds);
  }
  RunResult r = run_training(f, nullptr, ro);
  if (r.rank != 0 || !print) return r;
  if (round_trip_ns > 0) {
    r.json["cores_round_trip_ns"] = round_trip_ns;
    r.json["cores_probed"] = plan::core_distance(round_trip_ns);
    // And again right after the last step (5 ms, the other ranks done or leaving): the
    // placement holds for seconds, and a short run's steps lie nearer its end than the
    // launcher's probe, taken before the ranks started and loaded their data (0.3-1 s on the
    // validation's runs). Where the two differ, the prediction blends both verdicts' figures
    // (plan_predict.cc).
    const double end_ns = plan::probe_core_round_trip_ns(kCoresProbeSeconds);
    if (end_ns > 0) {
      r.json["cores_round_trip_end_ns"] = end_ns;
      r.json["cores_probed_end"] = plan::core_distance(end_ns);
    }
    // And what the launcher sampled while the ranks ran (cli/cores_sampler.h).
    if (const auto samples = launcher_samples(Settings::process())) {
      const auto [closes, fars] = samples();
      r.json["cores_sampled"] = {{"close", closes}, {"far", fars}};
    }
  }
  const bool whole_job = find_strategy(f.strategy).run != nullptr;
  if (!whole_job) print_summary(stdout, f, r.job, r.report, r.splits, find_strategy(f.strategy).distributed);
  if (!f.checkpoint.empty() && f.is_gpt()) std::printf("checkpoint: %s (model for dtrain generate: %s)\n", f.checkpoint.c_str(), (f.checkpoint + "/model.gpt").c_str());
  if (!f.trace.empty()) std::printf("trace: %s\n", f.trace.c_str());
  // The planner's prediction beside the measurement, in every report (drift shows up in
  // every run), and in the JSON.
  if (!f.json.empty() || !f.quiet) {
    r.json["prediction"] = prediction_for_run(f, r.json, probe_s);
    if (!probe_by_cpu.empty()) {
      nlohmann::json ms = nlohmann::json::array();
      for (double x : probe_by_cpu) ms.push_back(x * 1e3);
      r.json["prediction"]["speed_probe_cpus_ms"] = ms;
    }
    const std::string line = f.quiet ? std::string() : prediction_line(r.json["prediction"]);
    if (!line.empty()) std::printf("%s\n", line.c_str());
  }
  if (!f.json.empty()) {
    r.json["build"] = build_info();  // the build that produced these figures
    write_json_file(f.json, r.json);
  }
  return r;
}

void print_scaling(int ranks, double eps_n, double eps_1) {
  const Scaling s = scaling(ranks, eps_n, eps_1);
  std::printf("%d ranks: %.0f examples/s -> ", ranks, eps_n);
  if (s.speedup < 1) {
    std::printf("a SLOWDOWN: %.2fx the throughput of 1 rank (efficiency %.2f); communication and waiting cost more "
                "than the extra ranks compute\n", s.speedup, s.efficiency);
  } else if (s.speedup > ranks) {
    std::printf("speedup %.2fx, efficiency %.2f (superlinear: no serial fraction)\n", s.speedup, s.efficiency);
  } else {
    std::printf("speedup %.2fx, efficiency %.2f, Amdahl serial fraction %.3f\n", s.speedup, s.efficiency, s.serial_fraction);
  }
}

// The launcher side of `dtrain train -n N`: start N ranks of this command, then (with
// --baseline) train the same job on 1 rank here and report the scaling.
int launch_job(const TrainConfig& f, const Args& args) {
  launch::LaunchOptions lo;
  lo.nproc = f.ranks;
  lo.transport = f.transport;
  lo.timeout_s = f.timeout;
  lo.tag_output = false;
  lo.max_restarts = f.max_restarts;
  lo.heartbeat_s = f.heartbeat;
  if (is_tty(stdout)) {
    const int fd = ::dup(1);  // inherited by the ranks (no close-on-exec)
    if (fd >= 0) ::setenv("DTRAIN_PROGRESS_FD", std::to_string(fd).c_str(), 1);
  }
  Args again{"train"};
  again.insert(again.end(), args.begin(), args.end());
  std::string json = f.json;
  bool temp_json = false;
  if (f.baseline && json.empty()) {
    // A fresh private file (mkstemp: not a predictable name another user could plant),
    // removed on every path below.
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/dtrain-train-XXXXXX";
    const int fd = ::mkstemp(templ.data());
    DT_CHECK(fd >= 0, IoError, "--baseline: cannot create a temporary file for the ranks' report in " << templ
                                   << ": " << errno_string(errno) << " (set TMPDIR, or pass --json FILE)");
    ::close(fd);
    json = templ;
    temp_json = true;
    again.insert(again.end(), {"--json", json});
  }
  char probe[32];
  if (f.probe_speed) {
    std::vector<double> by_cpu;
    std::snprintf(probe, sizeof probe, "%.9g", run_speed_probe(f.ranks, &by_cpu));
    ::setenv("DTRAIN_SPEED_PROBE_S", probe, 1);
    ::setenv("DTRAIN_SPEED_PROBE_CPUS_S", joined(by_cpu).c_str(), 1);
  }
  // The cores' distance, always (5 ms, before any rank runs): the run records it and its
  // prediction takes the calibration's figures of that verdict.
  std::snprintf(probe, sizeof probe, "%.9g", plan::probe_core_round_trip_ns(kCoresProbeSeconds));
  ::setenv("DTRAIN_CORES_PROBE_NS", probe, 1);
  // Sampled while the ranks run (cli/cores_sampler.h).
  const int rc = run_sampled_job([&] { return launch::relaunch_self(lo, again); }, kSampleEvery, "", nullptr, kSamplerCpuShare);
  ::unsetenv("DTRAIN_PROGRESS_FD");
  ::unsetenv("DTRAIN_SPEED_PROBE_S");
  ::unsetenv("DTRAIN_SPEED_PROBE_CPUS_S");
  ::unsetenv("DTRAIN_CORES_PROBE_NS");
  if (rc != 0 || !f.baseline) {
    if (temp_json) std::remove(json.c_str());
    return rc;
  }

  nlohmann::json j = read_json_file(json);
  if (temp_json) std::remove(json.c_str());
  std::printf("baseline: the same job on 1 rank ...\n");
  std::fflush(stdout);
  TrainConfig one = f;
  one.ranks = 1;
  one.quiet = true;
  one.json.clear();
  one.trace.clear();
  one.checkpoint.clear();
  one.resume = false;
  one.batch_split = "auto";  // one rank has nothing to cut (weights were given per rank of -n N)
  const RunResult base = run_rank(one, /*print=*/false);
  const double eps_n = j.value("examples_per_second", 0.0), eps_1 = base.report.examples_per_second;
  std::printf("baseline 1 rank: %.0f examples/s, test_accuracy %.4f\n", eps_1, base.report.test.accuracy());
  print_scaling(f.ranks, eps_n, eps_1);
  if (!f.json.empty()) {
    const Scaling s = scaling(f.ranks, eps_n, eps_1);
    j["baseline"] = {{"world_size", 1},
                     {"examples_per_second", eps_1},
                     {"test_accuracy", base.report.test.accuracy()},
                     {"train_seconds", base.report.train_seconds}};
    j["speedup"] = s.speedup;
    j["efficiency"] = s.efficiency;
    if (s.speedup >= 1 && s.speedup <= f.ranks) j["serial_fraction"] = s.serial_fraction;
    write_json_file(f.json, j);
  }
  return 0;
}

bool multi_rank_strategy(const StrategyEntry& s, const TrainConfig& f) { return s.distributed || f.is_gpt(); }

}  // namespace

int train_main(const Args& given) {
  const Args args = resolve_plan_flag(given);  // --plan auto: the planner's layout flags
  TrainConfig f = parse_train_flags(args);
  if (launch::inside_launched_rank() && !f.was_given("ranks")) {
    // A rank of a job started by `dtrain run`, mpirun or srun: the job's size is -n, and a
    // job of several ranks trains with ddp unless told otherwise.
    const WorldInfo w = world_from_env();
    f.ranks = w.size;
    // Across hosts the transport is tcp (comm/transport.h: auto picks it), and the defaults
    // that depend on it (ddp's ZeRO stage: config.cc) follow.
    if (w.hosts > 1 && !f.was_given("transport")) f.transport = "tcp";
    if (!f.was_given("strategy")) f.strategy.clear();
    if (!f.was_given("zero")) f.zero = -1;  // the strategy's default, for the strategy now resolved
    resolve_defaults(f);
  }
  if (f.help) {
    std::printf("%s%s\ndatasets:\n  %s\n", train_usage("").c_str(), strategies_help().c_str(),
                data::dataset_help().c_str());
    return 0;
  }
  const StrategyEntry& strategy = check_config(f);
  DT_CHECK(!f.baseline || f.ranks > 1, InvalidArgument, "--baseline compares -n N ranks with 1 rank; add -n N (N >= 2)");
  DT_CHECK(!f.baseline || (f.strategy != "ps" && !f.is_gpt()), InvalidArgument,
           "--baseline runs the same job on 1 rank, which --strategy " << f.strategy
           << (f.is_gpt() ? " with the GPT" : "") << " cannot; compare -n values by hand");
  DT_CHECK(f.max_restarts == 0 || !f.checkpoint.empty(), InvalidArgument,
           "--max-restarts " << f.max_restarts << " restarts the ranks from their checkpoints; add --checkpoint DIR");
  DT_CHECK(f.max_restarts == 0 || (multi_rank_strategy(strategy, f) && f.ranks > 1), InvalidArgument,
           "--max-restarts applies to jobs of -n N > 1 ranks");
  DT_CHECK(!f.baseline || !strategy.run, InvalidArgument,
           "--baseline measures training throughput; --strategy " << f.strategy << " runs independent trainings");
  const bool multi = multi_rank_strategy(strategy, f);
  if (multi && f.ranks > 1 && !launch::inside_launched_rank()) return launch_job(f, args);
  if (launch::inside_launched_rank() && multi) {
    // The launcher's -n and the job's world must agree.
    const WorldInfo w = world_from_env();
    DT_CHECK(w.size == f.ranks || !f.was_given("ranks"), InvalidArgument,
             "-n " << f.ranks << " but this job has " << w.size << " ranks");
  }
  run_rank(f, /*print=*/true);
  return 0;
}

}  // namespace dtrain::cli

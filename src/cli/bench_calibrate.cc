// dtrain bench calibrate — measure the cost model's alpha, beta, gamma on this machine.
//
//   dtrain bench calibrate [-n 2] [--transport shm,tcp] [--out FILE] [--threads]
//
// For each transport: gamma = seconds per byte of a local float32 sum (reduce kernel on
// 16 MiB); alpha from an 8-byte ring all-reduce (2(p-1) messages: alpha = T / 2(p-1)); beta
// from a 16 MiB ring all-reduce, solving the ring formula
//   T = 2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma
// for beta. Times are max over ranks. Then, per size (16 KiB .. 16 MiB), the all-reduce the
// executors call (auto algorithm) and a two-way exchange with one peer (isend + irecv, what
// ps, gossip and the pipeline's sends do): the planner costs a transfer from the figure of
// its size (plan/cluster.h LinkSizes), not from the 16 MiB beta, which is 2-4x too slow for
// the ~1 MB, cache-resident buffers the models move here. They go to the file's
// "links_by_size" section ({"intra": ..., "inter": ...}, keyed by link, not transport name, so
// coll's parser still finds the top-level "shm" and "tcp" first). With the compute side, rank 0
// also times the shm all-reduce at 4 and 8 ranks (as threads of this process, the same
// sizes): "allreduce_by_ranks", which carries what ranks beyond the cores cost a collective
// (a waiting rank must be scheduled again at every step of the algorithm), something the
// 2-rank figures scaled by the formula do not show. Measured as the job's ranks are: with
// processes (the launcher, once the 2-rank job has written the file, runs
// `dtrain bench collectives -n 4` and `-n 8`, and on a host of 16 or more cores every power of
// two up to them (plan::calibrated_rank_counts), and adds their rows; "allreduce_by_ranks_with":
// "processes"); with --threads, as threads. The two differ by 3-6x at 256 KiB-4 MiB here
// (threads copy with memcpy; processes read each other through process_vm_readv, which pins
// pages, and wait on the scheduler), and the executors run processes. The result goes to FILE (default $DTRAIN_CALIBRATION
// or ~/.cache/dtrain/calibration.json), keeping the entry of a transport not measured; later
// runs and `dtrain plan collective` read it.
// Last, the launcher times tensor-parallel GPT blocks in place at 2, 4 and 8 ranks
// (`dtrain bench tp-blocks -n P`, plan/calibrate_tp.h) into compute.tp_blocks: the split
// formula misses their replicated work and the waits at each of their all-reduces.
// Then (unless --no-compute) rank 0 measures the compute side for the planner
// (plan/calibrate_compute.h: GEMM GFLOP/s by shape, element-wise GB/s, optimizer ns per
// parameter, the oversubscription penalty) into the file's "compute" section (version 2),
// which `dtrain plan train` and this_machine() read.
// The file records the machine (plan::machine_fingerprint) and the time. A calibration keeps,
// from the file it replaces, the figures of the cores' placement ("close" or "far") it did not
// see, where that file was taken on the same machine within 14 days
// (plan/calibration_carry.h; --fresh keeps none), and prints which.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

#include "base/clock.h"
#include "base/settings.h"
#include "base/error.h"
#include "base/median.h"
#include "cli/bench.h"
#include "cli/cores_sampler.h"
#include "cli/flags.h"
#include "launch/launch.h"
#include "coll/collectives.h"
#include "coll/cost_model.h"
#include "coll/reduce_kernels.h"
#include "plan/calibrate_cache.h"
#include "plan/calibrate_compute.h"
#include "plan/calibrate_mix.h"
#include "plan/coll_bench.h"
#include "plan/calibration_carry.h"
#include "plan/cluster.h"
#include "plan/simulator.h"

#include <nlohmann/json.hpp>

namespace dtrain::cli {
namespace {

// The host's cores, as the calibration's compute section records them (calibrate_compute.cc).
int host_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Writes the calibration file whole or not at all (a temporary beside it, renamed over it): a
// re-probe between runs never leaves a run reading half a file.
void replace_calibration_file(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    DT_CHECK(out.good(), IoError, "cannot write calibration file " << tmp);
    out << j.dump(2) << "\n";
    out.close();
    DT_CHECK(out.good(), IoError, "cannot write calibration file " << tmp << " (disk full?)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    DT_THROW(IoError, "cannot replace calibration file " << path << ": " << errno_string(e));
  }
}

// An existing calibration file with a compute section, which `flag` (a re-probe) refreshes.
nlohmann::json read_compute_section(const std::string& path, const char* flag) {
  std::ifstream in(path);
  DT_CHECK(in.good(), IoError, flag << " updates an existing calibration file; " << path << " cannot be read");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  DT_CHECK(j.is_object() && j.contains("compute") && j["compute"].is_object(), InvalidArgument,
           path << " has no compute section: run `dtrain bench calibrate` first");
  return j;
}

// Mean seconds per call of fn, max over ranks, running about `seconds`.
template <class Fn>
double time_collective(Communicator& c, double seconds, Fn&& fn) {
  fn();
  double t0 = now_seconds();
  fn();
  double trial = now_seconds() - t0;
  allreduce(c, &trial, 1, DType::kFloat64, ReduceOp::kMax);
  int64_t iters = std::clamp<int64_t>(static_cast<int64_t>(seconds / std::max(trial, 1e-7)), 3, 100000);
  c.barrier();
  t0 = now_seconds();
  for (int64_t i = 0; i < iters; ++i) fn();
  double per = (now_seconds() - t0) / static_cast<double>(iters);
  allreduce(c, &per, 1, DType::kFloat64, ReduceOp::kMax);
  return per;
}

struct Calibrated {
  CostParams cp;
  nlohmann::json by_size;  // plan::LinkSizes as JSON: {"p": ranks, "allreduce": [[bytes, s]], "exchange": [[bytes, s]]}
};

// The median of `batches` timings of fn (each time_collective over seconds / batches): a
// typical call on a shared machine, where one batch can be 10x the others.
template <class Fn>
double median_collective(Communicator& c, double seconds, int batches, Fn&& fn) {
  std::vector<double> t;
  for (int i = 0; i < batches; ++i) t.push_back(time_collective(c, seconds / batches, fn));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Calibrated calibrate(Communicator& c, double seconds) {
  const int p = c.size();
  CostParams cp;
  const size_t big = 4u << 20;  // elements: 16 MiB of float32
  std::vector<float> a(big, 1.0f), b(big, 2.0f);
  double t0 = now_seconds();
  int reps = 0;
  do {
    reduce_into(DType::kFloat32, ReduceOp::kSum, a.data(), b.data(), big);
    ++reps;
  } while (now_seconds() - t0 < seconds / 2);
  double gamma = (now_seconds() - t0) / reps / (big * 4.0);
  allreduce(c, &gamma, 1, DType::kFloat64, ReduceOp::kMax);
  cp.gamma_s_per_byte = gamma;
  AllreduceOptions ring;
  ring.algorithm = Algorithm::kRing;
  float tiny[2] = {1, 2};
  double t_small = time_collective(c, seconds, [&] { allreduce(c, tiny, 2, DType::kFloat32, ReduceOp::kSum, ring); });
  cp.alpha_s = p > 1 ? t_small / (2.0 * (p - 1)) : t_small;
  double t_big = time_collective(c, seconds, [&] { allreduce(c, a.data(), big, DType::kFloat32, ReduceOp::kSum, ring); });
  const double n = big * 4.0, frac = p > 1 ? (p - 1.0) / p : 1.0;
  double beta = (t_big - 2.0 * (p - 1) * cp.alpha_s - frac * n * gamma) / (2.0 * frac * n);
  cp.beta_s_per_byte = std::max(beta, 1e-12);
  cp.source = "measured";
  Calibrated out{cp, {{"p", p}, {"allreduce", nlohmann::json::array()}, {"exchange", nlohmann::json::array()}}};
  const int peer = (c.rank() ^ 1) < p ? (c.rank() ^ 1) : c.rank();
  std::vector<float> rx(big);
  for (size_t bytes = 16u << 10; bytes <= big * 4; bytes *= 4) {
    const size_t count = bytes / 4;
    double t_ar = median_collective(c, seconds / 2, 5, [&] { allreduce(c, a.data(), count, DType::kFloat32, ReduceOp::kSum); });
    // The receive is posted before the peer may send (a barrier between): the executors post
    // theirs ahead (gossip's inboxes, the parameter server's pushes, the pipeline's
    // activations), so their messages go straight into place. Without it a rank a call ahead
    // sent into the transport's buffer, and the exchange read twice gossip's measured one
    // (1 MiB: 285-311 us against ~150 us for gossip's 0.94 MB, 2026-11-25).
    double t_x = median_collective(c, seconds / 2, 5, [&] {
      if (peer == c.rank()) return;
      Request r = c.irecv(peer, rx.data(), bytes, 0x7ca1);
      barrier(c);
      Request s = c.isend(peer, b.data(), bytes, 0x7ca1);
      s.wait();
      r.wait();
    });
    out.by_size["allreduce"].push_back({static_cast<double>(bytes), t_ar});
    out.by_size["exchange"].push_back({static_cast<double>(bytes), t_x});
    if (c.rank() == 0) std::printf("      %8zu B: all-reduce %8.1f us, exchange %8.1f us\n", bytes, t_ar * 1e6, t_x * 1e6);
  }
  if (c.rank() == 0) {
    std::printf("%-5s p=%d  alpha %.2f us   beta %.3f GB/s   gamma %.3f GB/s   (ring 8 B: %.1f us, 16 MiB: %.1f us)\n",
                c.transport().kind(), p, cp.alpha_s * 1e6, 1e-9 / cp.beta_s_per_byte, 1e-9 / cp.gamma_s_per_byte,
                t_small * 1e6, t_big * 1e6);
    std::fflush(stdout);
  }
  return out;
}

constexpr const char* kByRanksSizes = "16K,64K,256K,512K,1M,2M,4M,8M,16M,32M,64M,128M,256M";
constexpr double kByRanksSeconds = 0.25;
constexpr int kByRanksPasses = 3;
// ddp's all-reduce in its window (`bench collectives --window`): the sizes of its buckets.
constexpr const char* kWindowSizes = "16K,64K,256K,1M,4M,16M,64M";
// Up to this many passes, to see both verdicts of the cores' distance (below).
constexpr int kVerdictMaxPasses = 5;
// The compute each rank burns before every call when the gap factor is measured: about an
// MLP step's per-rank compute at 4-8 ranks (training's calls are that far apart).
constexpr int kGapUs = 600;
// Passes of it, the lowest factor kept: three calibrations a few minutes apart read x1.40,
// x1.40 and x2.04 at 8 ranks with two.
constexpr int kGapPasses = 3;

// The hand-off as a line, with each verdict's rounds where the probe saw both or one.
void print_handoff(const plan::CacheHandoff& h) {
  std::printf("cross-core hand-off: %.3f ns/B rewriting lines a peer read, %.3f ns/B reading lines it wrote%s",
              h.write_after_read_s_per_byte * 1e9, h.read_after_write_s_per_byte * 1e9,
              h.measured ? "" : " (not measured: one CPU)");
  for (const auto& [verdict, r] : h.by_cores)
    std::printf("; %d rounds %s: %.3f and %.3f", r.rounds, verdict.c_str(), r.write_after_read_s_per_byte * 1e9,
                r.read_after_write_s_per_byte * 1e9);
  std::printf("\n");
}

// A fresh hand-off measurement over the file's old one, keeping the old one's verdicts that
// the fresh one did not see (the VM stays in one placement for minutes at a time).
nlohmann::json merged_handoff(const nlohmann::json& old, const plan::CacheHandoff& h) {
  nlohmann::json j = plan::handoff_json(h);
  if (!h.measured || !old.is_object() || !old.contains("by_cores")) return j;
  for (const auto& [verdict, v] : old["by_cores"].items())
    if (!j.contains("by_cores") || !j["by_cores"].contains(verdict)) j["by_cores"][verdict] = v;
  return j;
}

// The file at `path` as JSON before a calibration replaces it; null where there is none or it
// does not parse (nothing to carry from).
nlohmann::json previous_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

// The calibration's last step: the verdicts it did not see, kept from the file it replaced
// where that one was taken on this machine (plan/calibration_carry.h), and a line that says
// which and from when.
void carry_other_placements(const std::string& path, const nlohmann::json& previous) {
  if (previous.is_null()) return;
  nlohmann::json j = previous_calibration(path);
  if (!j.is_object()) return;
  std::string why_none;
  const auto carried = plan::carry_placements(previous, &j, static_cast<double>(std::time(nullptr)),
                                              plan::kCarryMaxAgeDays, &why_none);
  if (!why_none.empty()) {
    std::printf("kept no placement from the file this calibration replaced: %s\n", why_none.c_str());
    return;
  }
  if (carried.empty()) {
    std::printf("kept nothing from the calibration this one replaced (same machine): this one saw every placement "
                "it had, or its tables were over %.0f days old\n",
                plan::kCarryMaxAgeDays);
    return;
  }
  replace_calibration_file(path, j);
  std::printf("kept from the calibration this one replaced (same machine; the cores' placement it did not see, "
              "up to %.0f days old; --fresh keeps none):\n",
              plan::kCarryMaxAgeDays);
  for (const plan::Carried& c : carried)
    std::printf("  %s, measured %s\n", c.table.c_str(), plan::utc_minutes(c.measured_unix).c_str());
}

void write_calibration(const std::string& path, const std::vector<std::pair<std::string, Calibrated>>& measured,
                       double compute_seconds, const std::vector<std::string>& models, bool by_ranks_threads) {
  CostParams shm = default_cost_params("shm"), tcp = default_cost_params("tcp");
  std::ifstream in(path);
  nlohmann::json compute, by_size = nlohmann::json::object();
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    parse_calibration(ss.str(), "shm", &shm);
    parse_calibration(ss.str(), "tcp", &tcp);
    try {
      auto old = nlohmann::json::parse(ss.str());
      if (old.contains("compute")) compute = old["compute"];
      if (old.contains("links_by_size")) by_size = old["links_by_size"];
    } catch (const nlohmann::json::exception&) {
    }
  }
  if (compute_seconds > 0) {
    plan::ComputeRates r = plan::measure_compute(compute_seconds, models);
    compute = plan::compute_json(r);
    std::printf("compute: gemm %.2f GFLOP/s (median of %zu shapes), element-wise %.2f GB/s (%.2f with every core), "
                "gather %.2f GB/s, adamw %.2f ns/param, sgd %.2f ns/param, oversubscription penalty %.2f (%d cores)\n",
                r.gemm_gflops, r.gemm_by_shape.size(), r.elementwise_gbps, r.elementwise_node_gbps, r.gather_gbps,
                r.adamw_ns_per_param, r.sgd_ns_per_param, r.oversub_penalty, r.cores);
    if (const std::string w = plan::slowdown_warning(r.slowdown, r.cores); !w.empty())
      std::fprintf(stderr, "dtrain bench calibrate: warning: %s\n", w.c_str());
    print_handoff(r.handoff);
    std::printf("gossip mix (two ranks at once):");
    for (const auto& [bytes, bps] : r.mix.all) std::printf(" %.0f KiB %.1f GB/s,", bytes / 1024, bps / 1e9);
    std::printf("%s\n", r.mix.all.empty() ? " not measured (one CPU)" : "");
    for (const auto& [verdict, points] : r.mix.by_cores) {
      std::printf("  rounds whose cores probed %s:", verdict.c_str());
      for (const auto& [bytes, bps] : points) std::printf(" %.0f KiB %.1f GB/s,", bytes / 1024, bps / 1e9);
      std::printf("\n");
    }
    if (!r.mix.shared.empty()) {
      std::printf("gossip mix shared (each rank half, 2 ranks):");
      for (const auto& [bytes, bps] : r.mix.shared) std::printf(" %.0f KiB %.1f GB/s,", bytes / 1024, bps / 1e9);
      std::printf("\n");
    }
    for (const auto& [verdict, points] : r.mix.shared_by_cores) {
      std::printf("  rounds whose cores probed %s:", verdict.c_str());
      for (const auto& [bytes, bps] : points) std::printf(" %.0f KiB %.1f GB/s,", bytes / 1024, bps / 1e9);
      std::printf("\n");
    }
    for (const auto& [kind, u] : r.units)
      std::printf("unit %-14s forward %.1f us + %.3f ns/kwork, backward %.1f us + %.3f ns/kwork\n", kind.c_str(),
                  u.fwd.fixed_s * 1e6, u.fwd.s_per_work * 1e12, u.bwd.fixed_s * 1e6, u.bwd.s_per_work * 1e12);
  }
  for (const auto& [kind, m] : measured) {
    (kind == "shm" ? shm : tcp) = m.cp;
    by_size[kind == "shm" ? "intra" : "inter"] = m.by_size;
  }
  if (compute_seconds > 0 && by_size.contains("intra") && by_ranks_threads) {
    CollBenchConfig cfg;
    cfg.seconds = kByRanksSeconds;
    cfg.print = false;
    cfg.sizes = parse_size_range(kByRanksSizes, 4);
    by_size["intra"]["allreduce_by_ranks_with"] = "threads";
    nlohmann::json& by_ranks = by_size["intra"]["allreduce_by_ranks"] = nlohmann::json::object();
    for (int p : {4, 8}) {
      nlohmann::json pts = nlohmann::json::array();
      for (const CollBenchRow& r : bench_collectives_threads(p, TransportKind::kShm, cfg)) {
        pts.push_back({static_cast<double>(r.size_bytes), r.time_us * 1e-6});
        std::printf("shm all-reduce, %d ranks (threads), %8zu B: %8.1f us\n", p, r.size_bytes, r.time_us);
      }
      by_ranks[std::to_string(p)] = pts;
    }
  }
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1))
    ::mkdir(path.substr(0, slash).c_str(), 0755);
  nlohmann::json j = nlohmann::json::parse(format_calibration(shm, tcp));
  j["version"] = plan::kCalibrationVersion;
  plan::stamp_calibration(j, static_cast<double>(std::time(nullptr)));
  if (!compute.is_null()) j["compute"] = compute;
  if (!by_size.empty()) j["links_by_size"] = by_size;
  replace_calibration_file(path, j);
  std::printf("wrote %s\n", path.c_str());
}

// The launcher's part after the 2-rank job wrote `path`: the shm all-reduce, reduce-scatter,
// all-gather and broadcast at 2, 4 and 8 ranks, processes as in training (ZeRO's sync: their
// shared-memory paths are not an all-reduce's halves; the broadcast and up to 256 MiB for what
// `dtrain bench collectives` predicts), each rank count a job of its own (`dtrain bench
// collectives -n P`, rows to a temporary JSON file), into the file's links_by_size.intra
// allreduce_by_ranks, reducescatter_by_ranks, allgather_by_ranks and broadcast_by_ranks.
// One `dtrain bench NAME -n p` job with `args`, its rows (a non-empty JSON array) into *rows
// through a temporary file beside the calibration (stem + p + ".json"); returns the job's
// exit code.
int bench_job(const char* name, const std::string& stem, int p, double timeout, const std::vector<std::string>& args,
              nlohmann::json* rows) {
  const std::string file = stem + std::to_string(p) + ".json";
  launch::LaunchOptions o;
  o.nproc = p;
  o.timeout_s = timeout;
  o.tag_output = false;
  std::vector<std::string> a{"-n", std::to_string(p), "--timeout", std::to_string(timeout), "--json", file};
  a.insert(a.end(), args.begin(), args.end());
  const int rc = launch::relaunch_command(o, {"bench", name}, a);
  std::ifstream r(file);
  *rows = nlohmann::json::parse(r, nullptr, false);
  std::remove(file.c_str());
  if (rc != 0) return rc;
  DT_CHECK(rows->is_array() && !rows->empty(), IoError, "bench calibrate: the " << p << "-rank " << name << " wrote no rows");
  return 0;
}
// A `dtrain bench collectives -n p` job over shm.
int collectives_job(const std::string& stem, int p, double timeout, std::vector<std::string> args, nlohmann::json* rows) {
  args.insert(args.begin(), {"--transport", "shm"});
  return bench_job("collectives", stem, p, timeout, args, rows);
}

// One shape's timings over the passes, and how many of them took the slots (all-reduce).
struct PassTimes {
  std::vector<double> seconds;
  int slots = 0;
  void add(double t, bool took_slots) { seconds.push_back(t), slots += took_slots ? 1 : 0; }
  // The median pass (the mean of the middle two for an even count): what a call typically
  // takes, which is what the planner predicts.
  double median() const { return dtrain::median(seconds, "PassTimes"); }
  bool took_slots() const { return 2 * slots >= static_cast<int>(seconds.size()); }
};

// The cores' verdict now, from this process ("" where two CPUs cannot be had): what the
// calibration brackets each job of more than 2 ranks with.
std::string cores_now() {
  const double rt = plan::probe_core_round_trip_ns(0.005);
  return rt > 0 ? plan::core_distance(rt) : "";
}

// The hand-off and gossip's two mixes for a placement of the cores the compute pass did not
// see, timed when a probe between the collective passes finds the cores in it. The compute
// pass times them within a few seconds, and the EPYC VM's placement holds for seconds to
// minutes: a calibration of 8 minutes passed through both placements in its collective
// passes while all 101 hand-off rounds and every mix round had seen one (cal-i1 and cal-i3,
// 2026-11-30). Only the verdict asked for is taken from the fresh rounds; a figure once
// kept is not timed again, and a verdict is tried at most kPlacementTries times (~5 s each).
constexpr int kPlacementTries = 3;
void time_missing_placement(nlohmann::json& compute, const std::string& verdict, std::map<std::string, int>& tries) {
  if (verdict.empty() || !compute.is_object() || !compute.contains("handoff")) return;
  auto has = [&](const nlohmann::json& by) { return by.is_object() && by.contains(verdict); };
  const bool handoff = has(compute["handoff"].value("by_cores", nlohmann::json())),
             mix = has(compute.value("mix_gbps_by_cores", nlohmann::json())),
             shared = has(compute.value("mix_shared_gbps_by_cores", nlohmann::json()));
  if ((handoff && mix && shared) || tries[verdict]++ >= kPlacementTries) return;
  std::string missing, added;
  for (const auto& [lacks, name] : {std::pair{!handoff, " hand-off"}, {!mix, " mix"}, {!shared, " shared-mix"}})
    if (lacks) missing += name;
  if (!handoff) {
    const nlohmann::json fresh = plan::handoff_json(plan::measure_handoff());
    if (fresh.contains("by_cores") && fresh["by_cores"].contains(verdict)) {
      compute["handoff"]["by_cores"][verdict] = fresh["by_cores"][verdict];
      added += " hand-off";
    }
  }
  if (!mix || !shared) {
    const plan::MixRates r = plan::measure_mix(plan::mix_calibration_sizes(), 2.0);
    if (!mix && r.by_cores.count(verdict))
      compute["mix_gbps_by_cores"][verdict] = plan::mix_json(r.by_cores.at(verdict)), added += " mix";
    if (!shared && r.shared_by_cores.count(verdict))
      compute["mix_shared_gbps_by_cores"][verdict] = plan::mix_json(r.shared_by_cores.at(verdict)), added += " shared-mix";
  }
  std::printf("the cores probed %s between passes, and the compute pass had no %s figures for%s: timed again, kept%s\n",
              verdict.c_str(), verdict.c_str(), missing.c_str(),
              added.empty() ? " nothing (the cores moved back)" : added.c_str());
}

// Runs `job` (one pass of more ranks than 2) with the cores sampled while it runs
// (cli/cores_sampler.h) and returns its exit code. *verdict: the verdict 75% of those samples
// read ("" where they were mixed), or for a pass too short for 3 samples the probes right
// before (`before`) and after it where both agree. (Both probes had to agree before: cal-i4
// filed none of its three 4-rank window passes, and dv-i8's far 4-rank ddp runs were priced
// close, 0.55 ms a step against 1.14-1.21 measured.)
// The sampler's file goes beside the calibration file (`path`), as the jobs' rows do.
template <class Job>
int run_sampled(const std::string& path, const std::string& before, Job&& job, std::string* verdict) {
  std::pair<int64_t, int64_t> counts{0, 0};
  int rc = 0;
  {
    std::unique_ptr<CoresSampler> sampler;
    const size_t slash = path.rfind('/');
    if (host_cores() >= 2) sampler = std::make_unique<CoresSampler>(slash == std::string::npos ? "." : path.substr(0, slash));
    rc = job();
    if (sampler) counts = sampler->counts();
  }
  *verdict = counts.first + counts.second >= 3 ? sampled_verdict({0, 0}, counts)
                                               : (cores_now() == before ? before : std::string());
  return rc;
}

int add_collectives_by_ranks(const std::string& path, double timeout) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  DT_CHECK(j.is_object() && j.contains("links_by_size") && j["links_by_size"].contains("intra"), IoError,
           "bench calibrate: " << path << " has no intra-host link figures to add the collectives by rank count to");
  nlohmann::json by_ranks = nlohmann::json::object(), rs = nlohmann::json::object(), ag = nlohmann::json::object(),
                 bc = nlohmann::json::object(), gap = nlohmann::json::object(), slots_from = nlohmann::json::object(),
                 two_rank = nlohmann::json::object(), by_cores_by_ranks = nlohmann::json::object(),
                 window = nlohmann::json::object();
  std::set<std::string> seen;  // the verdicts any pass so far was filed under
  std::map<std::string, int> placement_tries;  // time_missing_placement's, by verdict

  for (int p : plan::calibrated_rank_counts(host_cores())) {
    // Each row is the median of kByRanksPasses jobs. It was the fastest of two (on a shared VM
    // a pass is sometimes disturbed, a row 20-70% slower than the same row a minute later),
    // and the collectives checks after it measured slower than it in three of four on the
    // EPYC VM and on a 16-core Xeon (median error -6.3 to -15.5%; the fourth +10.0%;
    // 2026-11-25 to 27): the fastest pass is not the typical call. The median of three drops
    // one disturbed pass either way.
    std::map<std::pair<std::string, double>, PassTimes> passes;  // (op, bytes) -> its timings
    // Two ranks with a core each: the same rows again by the verdict each pass's probe gave
    // ("close": its all-gather took the slots; "far": the reads), for LinkSizes::two_rank_by_cores.
    // More ranks: the pass goes under the verdict the cores' round trip gave from this process
    // right before and right after it, where both agree (LinkSizes::by_cores_by_ranks).
    // Passes go on (up to kVerdictMaxPasses) until both verdicts were seen: on the EPYC VM
    // they alternate within seconds to minutes (a validation there, 2026-11-30 07:10, had all
    // three 8-rank passes far and every 8-rank run close: ddp predicted +87%). The 2-rank
    // passes always look for both; more ranks only where some pass already saw both, so a
    // machine whose cores never move pays kByRanksPasses there.
    const bool job_verdict = p == 2 && host_cores() >= 2;
    std::map<std::string, std::map<std::pair<std::string, double>, PassTimes>> by_verdict;
    auto more = [&](int pass) {
      return pass < kByRanksPasses || (host_cores() >= 2 && (job_verdict || seen.size() == 2) && by_verdict.size() < 2 &&
                                       pass < kVerdictMaxPasses);
    };
    for (int pass = 0; more(pass); ++pass) {
      nlohmann::json got;
      const std::string now = cores_now(), before = p > 2 ? now : "";
      if (j.contains("compute")) time_missing_placement(j["compute"], now, placement_tries);
      auto job = [&] {
        return collectives_job(path + ".ranks", p, timeout,
                               {"--op", "allreduce,reducescatter,allgather,broadcast", "--sizes", kByRanksSizes,
                                "--seconds", std::to_string(kByRanksSeconds)},
                               &got);
      };
      std::string verdict;
      const int rc = p > 2 ? run_sampled(path, before, job, &verdict) : job();
      if (rc != 0) return rc;
      for (const auto& row : got)
        if (job_verdict && row["op"] == "allgather" && row.contains("path"))
          verdict = row["path"] == "slots" ? "close" : row["path"] == "reads" ? "far" : "";
      for (const auto& row : got) {
        const auto k = std::make_pair(row["op"].get<std::string>(), row["size_bytes"].get<double>());
        const double t = row["time_us"].get<double>() * 1e-6;
        const bool took_slots = row.value("path", std::string()) == "slots";
        passes[k].add(t, took_slots);
        // A job re-probes the distance as it goes (ShmContext::after_call): a row whose calls
        // were counted goes to the verdict most of them ran under, the others to the pass's.
        const double far_share = row.value("far_share", -1.0);
        const std::string v = !job_verdict || far_share < 0 ? verdict : far_share > 0.5 ? "far" : "close";
        if (!v.empty()) by_verdict[v][k].add(t, took_slots), seen.insert(v);
      }
    }
    const std::string key = std::to_string(p);
    auto slots_of = [](const std::map<std::pair<std::string, double>, PassTimes>& rows) {
      std::map<double, bool> slots;  // all-reduce bytes -> most passes took the slots
      for (const auto& [k, t] : rows)
        if (k.first == "allreduce") slots[k.second] = t.took_slots();
      return slots;
    };
    // Where the all-reduce goes through the context's slots from some size on (with a core
    // per rank: only where the context's probe found the cores close), the planner's memory
    // counts one model-sized buffer less (plan/cluster.h allreduce_slots_from_by_ranks).
    if (const double from = plan::slots_from_sizes(slots_of(passes)); from > 0) slots_from[key] = from;
    // The gap factor (plan/cluster.h LinkSizes::gap_factor_by_ranks): where the ranks
    // outnumber the cores, the 1 MiB all-reduce with kGapUs of CPU burnt by every rank before
    // each call (`bench collectives --gap-us`), less the gaps as the cores serialise them,
    // over the same call back to back. The lowest of kGapPasses (a disturbed pass is slower).
    // Each pass is bracketed by the cores' verdict as the tables' passes are, and divided by
    // the back-to-back call of the same verdict where there is one: on the EPYC VM a gap pass
    // with the cores far apart (2.1 ms a call) over the close back-to-back call (0.24 ms) read
    // x3.93 where either verdict alone reads x1.0-1.3 (2026-11-30).
    const int cores = host_cores();
    const auto b2b = passes.find({"allreduce", 1048576.0});
    std::map<std::string, double> gap_by_verdict;
    if (p > cores && b2b != passes.end()) {
      double factor = -1;
      for (int pass = 0; pass < kGapPasses; ++pass) {
        nlohmann::json got;
        const std::string before = cores_now();
        std::string verdict;
        const int rc = run_sampled(
            path, before,
            [&] {
              return collectives_job(path + ".gap", p, timeout,
                                     {"--op", "allreduce", "--sizes", "1M", "--seconds", "0.3", "--gap-us",
                                      std::to_string(kGapUs)},
                                     &got);
            },
            &verdict);
        if (rc != 0) return rc;
        double base = b2b->second.median();
        bool matched = false;
        if (const auto rows = by_verdict.find(verdict); !verdict.empty() && rows != by_verdict.end())
          if (const auto same = rows->second.find({"allreduce", 1048576.0}); same != rows->second.end())
            base = same->second.median(), matched = true;
        const double gaps = kGapUs * 1e-6 * static_cast<double>(p) / cores;
        const double f = std::max(1.0, (got[0]["time_us"].get<double>() * 1e-6 - gaps) / base);
        factor = factor < 0 ? f : std::min(factor, f);
        if (matched) gap_by_verdict[verdict] = gap_by_verdict.count(verdict) ? std::min(gap_by_verdict[verdict], f) : f;
      }
      gap[key] = factor;
      std::printf("shm allreduce, %d ranks (processes), 1 MiB with %d us of compute before each call: x%.2f", p,
                  kGapUs, factor);
      for (const auto& [v, f] : gap_by_verdict) std::printf("; cores %s x%.2f", v.c_str(), f);
      std::printf("\n");
    }
    // ddp's all-reduce as it runs on one host (LinkSizes::allreduce_window_by_ranks): the
    // gradient in a shared-memory window, reduced in place where it lies; the median of
    // kByRanksPasses jobs.
    // Filed by verdict as the tables' passes are (a 2-rank row by its own calls' verdict, a
    // pass of more ranks by the round trip around it), into the verdict's "allreduce_window".
    std::map<double, PassTimes> window_rows;
    std::map<std::string, std::map<double, PassTimes>> window_by_verdict;
    for (int pass = 0; pass < kByRanksPasses; ++pass) {
      nlohmann::json got;
      const std::string before = p > 2 ? cores_now() : "";
      auto job = [&] {
        return collectives_job(path + ".window", p, timeout,
                               {"--op", "allreduce", "--window", "--sizes", kWindowSizes, "--seconds",
                                std::to_string(kByRanksSeconds)},
                               &got);
      };
      std::string verdict;
      const int rc = p > 2 ? run_sampled(path, before, job, &verdict) : job();
      if (rc != 0) return rc;
      for (const auto& row : got) {
        const double b = row["size_bytes"].get<double>(), t = row["time_us"].get<double>() * 1e-6;
        window_rows[b].add(t, false);
        std::string v = verdict;
        if (job_verdict) {
          const double far_share = row.value("far_share", -1.0);
          const std::string path_taken = row.value("path", std::string());
          v = far_share >= 0 ? (far_share > 0.5 ? "far" : "close")
              : path_taken == "slots" ? "close" : path_taken == "reads" ? "far" : "";
        }
        if (!v.empty()) window_by_verdict[v][b].add(t, false);
      }
    }
    for (const auto& [b, t] : window_rows) {
      window[key].push_back({b, t.median()});
      if (b == 1048576.0)
        std::printf("shm allreduce in ddp's window, %d ranks (processes), 1 MiB: %.1f us\n", p, t.median() * 1e6);
    }
    for (const auto& [verdict, rows] : window_by_verdict) by_verdict[verdict];  // a verdict only the window saw
    for (const auto& [verdict, rows] : by_verdict) {
      nlohmann::json tables = nlohmann::json::object();
      for (const auto& [k, t] : rows) {
        if (!tables.contains(k.first)) tables[k.first] = nlohmann::json::array();
        tables[k.first].push_back({k.second, t.median()});
      }
      tables["allreduce_slots_from"] = plan::slots_from_sizes(slots_of(rows));
      if (gap_by_verdict.count(verdict)) tables["gap_factor"] = gap_by_verdict[verdict];
      if (const auto w = window_by_verdict.find(verdict); w != window_by_verdict.end())
        for (const auto& [b, t] : w->second) tables["allreduce_window"].push_back({b, t.median()});
      (p == 2 ? two_rank : by_cores_by_ranks[key])[verdict] = tables;
      auto us_at = [](const auto& table, const auto& key) {
        const auto it = table.find(key);
        return it == table.end() ? 0.0 : it->second.median() * 1e6;
      };
      const auto w = window_by_verdict.find(verdict);
      std::printf("shm, %d ranks (processes), the cores %s: all-reduce 1 MiB %.1f us, all-gather 1 MiB %.1f us, "
                  "ddp's window all-reduce 1 MiB %.1f us (0: none under this verdict)\n",
                  p, verdict.c_str(), us_at(rows, std::make_pair(std::string("allreduce"), 1048576.0)),
                  us_at(rows, std::make_pair(std::string("allgather"), 1048576.0)),
                  w == window_by_verdict.end() ? 0.0 : us_at(w->second, 1048576.0));
    }
    for (const auto& [k, pt] : passes) {  // (op, bytes) order: bytes increase within an op
      const std::string& op = k.first;
      const double t = pt.median();
      nlohmann::json& dst = op == "allreduce" ? by_ranks : op == "reducescatter" ? rs : op == "allgather" ? ag : bc;
      if (!dst.contains(key)) dst[key] = nlohmann::json::array();
      dst[key].push_back({k.second, t});
      std::printf("shm %s, %d ranks (processes), %8.0f B: %8.1f us\n", op.c_str(), p, k.second, t * 1e6);
    }
  }
  j["links_by_size"]["intra"]["allreduce_by_ranks"] = by_ranks;
  j["links_by_size"]["intra"]["reducescatter_by_ranks"] = rs;
  j["links_by_size"]["intra"]["allgather_by_ranks"] = ag;
  j["links_by_size"]["intra"]["broadcast_by_ranks"] = bc;
  j["links_by_size"]["intra"]["gap_factor_by_ranks"] = gap;
  j["links_by_size"]["intra"]["allreduce_slots_from_by_ranks"] = slots_from;
  j["links_by_size"]["intra"]["two_rank_by_cores"] = two_rank;
  j["links_by_size"]["intra"]["by_cores_by_ranks"] = by_cores_by_ranks;
  j["links_by_size"]["intra"]["allreduce_window_by_ranks"] = window;
  j["links_by_size"]["intra"]["allreduce_by_ranks_with"] = "processes";
  replace_calibration_file(path, j);
  std::printf("added the 2-, 4- and 8-rank all-reduce, reduce-scatter, all-gather and broadcast (processes) to %s\n",
              path.c_str());
  return 0;
}

}  // namespace

nlohmann::json median_tp_rows(const nlohmann::json& rows) {
  // Rows by (spec, tp, ranks or 0, items), in the order first seen, and their rounds' times.
  std::map<std::tuple<std::string, int, int, int64_t>, size_t> index;
  std::vector<nlohmann::json> firsts;
  std::vector<std::pair<PassTimes, PassTimes>> times;
  for (const auto& row : rows) {
    const auto key = std::make_tuple(row.at("spec").get<std::string>(), row.at("tp").get<int>(), row.value("ranks", 0),
                                     row.at("items").get<int64_t>());
    const auto [at, fresh] = index.emplace(key, firsts.size());
    if (fresh) firsts.push_back(row), times.emplace_back();
    auto& [fwd, bwd] = times[at->second];
    fwd.add(row.at("fwd_s").get<double>(), false);
    bwd.add(row.at("bwd_s").get<double>(), false);
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < firsts.size(); ++i) {
    firsts[i]["fwd_s"] = times[i].first.median();
    firsts[i]["bwd_s"] = times[i].second.median();
    out.push_back(firsts[i]);
  }
  return out;
}

namespace {

// The launcher's last part: tensor-parallel GPT blocks timed in place (plan/calibrate_tp.h)
// at 2, 4 and 8 ranks, each degree a `dtrain bench tp-blocks -n P` job per block shape (the
// calibration's two GPT widths and those of --models; a degree must divide the heads), into
// the file's compute.tp_blocks (~10 s a round). Where P ranks outnumber the host's cores, also groups
// of each smaller degree T side by side (`-n P --tp T`): a hybrid layout's tensor-parallel
// groups wait for partners scheduled among all the job's ranks, which neither the group
// alone nor one group of P measures (the simulator's tp_block_ratio says by how much).
// The jobs run in kTpRounds interleaved rounds (every job, then every job again) and each
// row is the median of its rounds, as the units' points are (calibrate_units.cc): timed once,
// one calibration's 4-rank rows read 40-80% above three others' (2026-11-29, dv-p3 against
// dv-x1, dv-x2 and dv-p2: the 12-sequence forward 14.9 ms against 6.7-8.2), and put its
// gpt-tp row at 4 ranks 53% above the runs.
constexpr int kTpRounds = 3;

int add_tp_blocks(const std::string& path, double timeout, const std::vector<std::string>& extra) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  DT_CHECK(j.is_object() && j.contains("compute"), IoError,
           "bench calibrate: " << path << " has no compute section to add the tensor-parallel blocks to");
  std::vector<plan::ModelSpec> shapes;
  std::vector<std::string> specs{"gpt:layers=1,heads=4,width=64,context=64", "gpt:layers=1,heads=8,width=128,context=64"};
  specs.insert(specs.end(), extra.begin(), extra.end());
  struct Job {
    std::string block;
    int p, t;
  };
  std::vector<Job> jobs;
  const int cores = host_cores();
  for (const std::string& spec : specs) {
    const plan::ModelSpec m = plan::ModelSpec::parse(spec);
    if (!m.gpt || std::any_of(shapes.begin(), shapes.end(), [&](const plan::ModelSpec& s) {
          return s.heads == m.heads && s.width == m.width && s.context == m.context;
        }))
      continue;
    shapes.push_back(m);
    for (int p : {2, 4, 8}) {
      if (m.heads % p != 0) continue;
      for (int t = p; t >= 2; t /= 2)
        if (m.heads % t == 0 && !(t < p && p <= cores)) jobs.push_back({plan::gpt_block_spec(m.heads, m.width, m.context), p, t});
    }
  }
  nlohmann::json all = nlohmann::json::array();
  for (int round = 0; round < kTpRounds; ++round)
    for (const Job& job : jobs) {
      std::vector<std::string> extra_args{"--spec", job.block, "--items", "2,6,12", "--seconds", "0.2"};
      if (job.t < job.p) extra_args.insert(extra_args.end(), {"--tp", std::to_string(job.t)});
      nlohmann::json got;
      const int rc = bench_job("tp-blocks", path + ".tp", job.p, timeout, extra_args, &got);
      if (rc != 0) return rc;
      for (auto& row : got) all.push_back(row);
    }
  const nlohmann::json rows = median_tp_rows(all);
  plan::tp_blocks_from_json(rows, path + ".compute.tp_blocks");  // refuse what the simulator would
  j["compute"]["tp_blocks"] = rows;
  replace_calibration_file(path, j);
  std::printf("added %zu tensor-parallel block timings (2, 4 and 8 ranks, processes; smaller groups among them where they "
              "outnumber the cores) to %s\n",
              rows.size(), path.c_str());
  return 0;
}

}  // namespace

int bench_calibrate(const Args& args) {
  Flags f("bench calibrate", args);
  int n = static_cast<int>(f.get_int("nproc", 2, 1, 1024, "ranks to start", "n"));
  std::string transport = f.get_string("transport", "shm,tcp", "shm, tcp or both");
  std::string out = f.get_string("out", Settings::process().calibration_path(), "calibration file to write");
  double seconds = f.get_double("seconds", 0.5, 1e-3, 3600, "time per measurement");
  bool threads = f.get_bool("threads", "run the ranks as threads of this process");
  double timeout = f.get_double("timeout", 120, 0.1, 1e6, "seconds any blocking call may wait");
  bool no_compute = f.get_bool("no-compute", "skip the compute rates (GEMM, element-wise, optimizer, oversubscription)");
  std::string models = f.get_string("models", "", "more model specs whose units to time, separated by ';' (gpt specs hold commas); predictions for exactly that spec use its own lines");
  bool slowdown_only = f.get_bool("slowdown-only",
                                  "only re-measure the oversubscription curve, the speed probe and the cross-core hand-off "
                                  "into the file's compute section (a few seconds; beside a run on a machine whose "
                                  "background load moves)");
  bool probe_only = f.get_bool("probe-only",
                               "only re-measure the speed probe (one warm GPT-block pass, about half a second) into the "
                               "file's compute section: predictions from the file then scale every compute rate by how "
                               "much faster or slower the machine runs now than at calibration");
  bool fresh = f.get_bool("fresh",
                          "keep nothing of the file this calibration replaces (by default a calibration keeps the "
                          "figures of the cores' placement it did not see from an earlier one of this machine, up to "
                          "14 days old)");
  const double compute_seconds = no_compute ? 0 : std::max(1.0, 4 * seconds);
  if (f.help_requested()) {
    std::printf("%s", f.help_text("[-n 2] [--transport shm,tcp] [--out FILE]").c_str());
    return 0;
  }
  f.finish();
  DT_CHECK(!(probe_only && slowdown_only), InvalidArgument,
           "--probe-only and --slowdown-only are two ways to refresh a file; pass one (--slowdown-only includes the probe)");
  DT_CHECK(!(fresh && (probe_only || slowdown_only)), InvalidArgument,
           "--fresh starts a calibration over; --probe-only and --slowdown-only refresh part of one: pass one of them");
  if (probe_only) {
    nlohmann::json j = read_compute_section(out, "--probe-only");
    const double now = plan::speed_probe(0.5);
    j["compute"]["speed_probe_now_s"] = now;
    replace_calibration_file(out, j);
    const double ref = j["compute"].value("speed_probe_s", 0.0);
    std::printf("speed probe: %.1f us a pass", now * 1e6);
    if (ref > 0)
      std::printf(" (at calibration %.1f us: compute priced x%.3f)", ref * 1e6, now / ref);
    else
      std::printf(" (the file has no probe of its own: calibrate again to scale by it)");
    std::printf(" -> %s\n", out.c_str());
    return 0;
  }
  if (slowdown_only) {
    nlohmann::json j = read_compute_section(out, "--slowdown-only");
    const int cores = host_cores();
    double pass_s = 0;
    auto curve = plan::measure_slowdown(cores, &pass_s);
    j["compute"]["slowdown"] = curve;
    j["compute"]["probe_now_pass_s"] = pass_s;
    j["compute"]["speed_probe_now_s"] = plan::speed_probe(0.5);
    j["compute"]["oversub_penalty"] = std::max(1.0, curve.back().second / (curve.back().first / cores));
    if (const std::string w = plan::slowdown_warning(curve, cores); !w.empty())
      std::fprintf(stderr, "dtrain bench calibrate: warning: %s\n", w.c_str());
    const plan::CacheHandoff h = plan::measure_handoff();
    j["compute"]["handoff"] = merged_handoff(j["compute"].value("handoff", nlohmann::json::object()), h);
    replace_calibration_file(out, j);
    std::printf("slowdown:");
    for (const auto& [k, v] : curve) std::printf(" %g ranks %.2fx", k, v);
    std::printf("; block pass %.1f us (at calibration %.1f us) -> %s\n", pass_s * 1e6,
                j["compute"].value("probe_pass_s", 0.0) * 1e6, out.c_str());
    print_handoff(h);
    return 0;
  }
  std::vector<std::string> extra;
  for (size_t pos = 0; pos < models.size();) {
    size_t semi = models.find(';', pos);
    if (semi == std::string::npos) semi = models.size();
    if (semi > pos) extra.push_back(models.substr(pos, semi - pos));
    pos = semi + 1;
  }
  std::vector<TransportKind> kinds;
  for (size_t pos = 0; pos <= transport.size();) {
    size_t comma = transport.find(',', pos);
    if (comma == std::string::npos) comma = transport.size();
    TransportKind k = parse_transport_kind(transport.substr(pos, comma - pos));
    DT_CHECK(k != TransportKind::kAuto, InvalidArgument, "--transport: name shm or tcp, not auto");
    kinds.push_back(k);
    pos = comma + 1;
  }
  DT_CHECK(!out.empty(), InvalidArgument, "--out: no calibration path (set HOME or DTRAIN_CALIBRATION)");
  // Read before anything replaces it; the ranks of a launched calibration carry nothing.
  const nlohmann::json previous =
      fresh || launch::inside_launched_rank() ? nlohmann::json() : previous_calibration(out);
  std::vector<std::pair<std::string, Calibrated>> measured;
  if (threads) {
    for (TransportKind kind : kinds) {
      auto store = std::make_shared<MemoryStore>(timeout);
      TransportOptions t;
      t.kind = kind;
      t.timeout_s = timeout;
      t.fabric.token = "calibrate";
      std::mutex mu;
      std::exception_ptr first;
      Calibrated result;
      std::vector<std::thread> ts;
      for (int r = 0; r < n; ++r)
        ts.emplace_back([&, r] {
          try {
            Communicator c(store, r, n, t, "calibrate");
            Calibrated cp = calibrate(c, seconds);
            if (r == 0) result = cp;
          } catch (...) {
            std::lock_guard<std::mutex> lock(mu);
            if (!first) first = std::current_exception();
          }
        });
      for (auto& th : ts) th.join();
      if (first) std::rethrow_exception(first);
      measured.emplace_back(transport_kind_name(kind), result);
    }
    write_calibration(out, measured, compute_seconds, extra, /*by_ranks_threads=*/true);
    carry_other_placements(out, previous);
    return 0;
  }
  if (!launch::inside_launched_rank()) {
    launch::LaunchOptions o;
    o.nproc = n;
    o.timeout_s = timeout;
    o.tag_output = false;
    const int rc = launch::relaunch_command(o, {"bench", "calibrate"}, args);
    const bool shm = std::find(kinds.begin(), kinds.end(), TransportKind::kShm) != kinds.end();
    if (rc != 0) return rc;
    if (compute_seconds > 0 && shm) {
      if (const int rc2 = add_collectives_by_ranks(out, timeout); rc2 != 0) return rc2;
      if (const int rc3 = add_tp_blocks(out, timeout, extra); rc3 != 0) return rc3;
    }
    carry_other_placements(out, previous);
    return 0;
  }
  WorldInfo info = world_from_env();
  std::shared_ptr<void> keepalive;
  auto store = open_world_store(info, &keepalive);
  for (TransportKind kind : kinds) {
    TransportOptions t = info.transport;
    t.kind = kind;
    t.timeout_s = timeout;
    // The executors' collective settings (their auto all-reduce is what links_by_size times).
    Communicator c(store, info.rank, info.size, t, std::string("calibrate-") + transport_kind_name(kind), {},
                   coll_config_from(Settings::process()));
    measured.emplace_back(transport_kind_name(kind), calibrate(c, seconds));
    c.barrier();
  }
  if (info.rank == 0) write_calibration(out, measured, compute_seconds, extra, /*by_ranks_threads=*/false);
  return 0;
}

}  // namespace dtrain::cli

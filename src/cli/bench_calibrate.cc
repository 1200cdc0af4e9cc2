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
// ps, gossip and the pipeline's sends do; over tcp paced with a gap of compute between
// transfers, at x2 sizes, and one way too: paced_transfer): the planner costs a transfer from the figure of
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
#include "cli/bench_calibrate_jobs.h"
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

namespace {


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

// Over tcp the executors' messages have compute between them (gossip's step, the parameter
// server's apply, a pipeline stage's forward): a message sent then lands in the peer's socket
// while the peer computes, and the peer's wait is little more than its read. Timed back to
// back behind a barrier (the loop in calibrate, which shared memory keeps) a 0.94 MB exchange
// took 266-281 us on loopback where gossip's took 165-173 in training (docs/PLANNER.md, the
// sixty-second session). So over tcp each transfer follows kTcpGapS of untimed spinning,
// receives are posted one transfer ahead as gossip and the parameter server post theirs, and
// the figure is the median transfer, the max over ranks: a two-way exchange with the pair's
// other rank, or (one_way) half a ping-pong timed on the pair's even rank (the parameter
// server's push and pull are one: a message each way with the server's work between).
constexpr double kTcpGapS = 300e-6;

double paced_transfer(Communicator& c, int peer, size_t bytes, const float* tx, std::vector<float>& rx_a,
                      std::vector<float>& rx_b, bool one_way, double seconds) {
  const bool alone = peer == c.rank(), leads = c.rank() < peer;
  float* rx[2] = {rx_a.data(), rx_b.data()};
  constexpr uint64_t kTag = 0x7ca3;
  // One way, the pair's odd rank is the server: it answers each message as it comes, untimed.
  const bool answers = one_way && !leads;
  auto run = [&](int iters, std::vector<double>* times) {
    barrier(c);
    if (alone) return;
    int set = 0;
    Request ahead = c.irecv(peer, rx[set], bytes, kTag);
    for (int i = 0; i < iters; ++i) {
      if (!answers) {
        const double until = now_seconds() + kTcpGapS;
        while (now_seconds() < until) {
        }
      }
      const double t0 = now_seconds();
      if (answers) ahead.wait();
      Request s = c.isend(peer, tx, bytes, kTag), next;
      if (i + 1 < iters) next = c.irecv(peer, rx[1 - set], bytes, kTag);
      if (!answers) ahead.wait();
      s.wait();
      if (times && !answers) times->push_back((now_seconds() - t0) / (one_way ? 2.0 : 1.0));
      ahead = std::move(next);
      set = 1 - set;
    }
  };
  std::vector<double> warm;
  run(5, &warm);
  double trial = warm.empty() ? 0.0 : median(warm);
  allreduce(c, &trial, 1, DType::kFloat64, ReduceOp::kMax);
  const int iters = static_cast<int>(std::clamp(seconds / (kTcpGapS + 2 * trial), 30.0, 2000.0));
  std::vector<double> times;
  run(iters, &times);
  double med = times.empty() ? 0.0 : median(times);
  allreduce(c, &med, 1, DType::kFloat64, ReduceOp::kMax);
  return med;
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
  const bool tcp = std::string(c.transport().kind()) == "tcp" && p > 1;
  if (tcp) out.by_size["send"] = nlohmann::json::array();
  std::vector<float> rx(big), rx2(tcp ? big : 0);
  for (size_t bytes = 16u << 10; bytes <= big * 4; bytes *= 4) {
    const size_t count = bytes / 4;
    double t_ar = median_collective(c, seconds / 2, 5, [&] { allreduce(c, a.data(), count, DType::kFloat32, ReduceOp::kSum); });
    // Over shared memory the receive is posted before the peer may send (a barrier between):
    // the executors post theirs ahead (gossip's inboxes, the parameter server's pushes, the
    // pipeline's activations), so their messages go straight into place. Without it a rank a
    // call ahead sent into the transport's buffer, and the exchange read twice gossip's
    // measured one (1 MiB: 285-311 us against ~150 us for gossip's 0.94 MB, 2026-11-25).
    // Over tcp paced, as the executors send (paced_transfer, above), and also one way (ps's
    // push and pull, a pipeline's sends): the kernel copies on both sides, so a two-way
    // exchange costs about two one-way sends (plan/cluster.h LinkSizes::send); over shared
    // memory each side copies its own half and an exchange is one way's time.
    double t_x = 0, t_send = -1;
    if (tcp) {
      t_x = paced_transfer(c, peer, bytes, b.data(), rx, rx2, false, seconds / 2);
      t_send = paced_transfer(c, peer, bytes, b.data(), rx, rx2, true, seconds / 2);
    } else {
      t_x = median_collective(c, seconds / 2, 5, [&] {
        if (peer == c.rank()) return;
        Request r = c.irecv(peer, rx.data(), bytes, 0x7ca1);
        barrier(c);
        Request s = c.isend(peer, b.data(), bytes, 0x7ca1);
        s.wait();
        r.wait();
      });
    }
    out.by_size["allreduce"].push_back({static_cast<double>(bytes), t_ar});
    out.by_size["exchange"].push_back({static_cast<double>(bytes), t_x});
    if (tcp) out.by_size["send"].push_back({static_cast<double>(bytes), t_send});
    if (c.rank() == 0) {
      std::printf("      %8zu B: all-reduce %8.1f us, exchange %8.1f us", bytes, t_ar * 1e6, t_x * 1e6);
      if (t_send >= 0) std::printf(", one way %8.1f us", t_send * 1e6);
      std::printf("\n");
    }
    // Over tcp also halfway to the next size: a loopback transfer's time per byte rises by a
    // third between 512 KiB and 1 MiB (a knee the x4 points straddle; the sixty-second
    // session), and a model of 0.94 MB was priced from the line between 256 KiB and 1 MiB.
    if (tcp && 2 * bytes < big * 4) {
      const size_t mid = 2 * bytes;
      const double x_mid = paced_transfer(c, peer, mid, b.data(), rx, rx2, false, seconds / 2);
      const double s_mid = paced_transfer(c, peer, mid, b.data(), rx, rx2, true, seconds / 2);
      out.by_size["exchange"].push_back({static_cast<double>(mid), x_mid});
      out.by_size["send"].push_back({static_cast<double>(mid), s_mid});
      if (c.rank() == 0) std::printf("      %8zu B: exchange %8.1f us, one way %8.1f us\n", mid, x_mid * 1e6, s_mid * 1e6);
    }
  }
  if (c.rank() == 0) {
    std::printf("%-5s p=%d  alpha %.2f us   beta %.3f GB/s   gamma %.3f GB/s   (ring 8 B: %.1f us, 16 MiB: %.1f us)\n",
                c.transport().kind(), p, cp.alpha_s * 1e6, 1e-9 / cp.beta_s_per_byte, 1e-9 / cp.gamma_s_per_byte,
                t_small * 1e6, t_big * 1e6);
    std::fflush(stdout);
  }
  return out;
}

// The hand-off as a line, with each verdict's rounds where the probe saw both or one.
void print_handoff(const plan::CacheHandoff& h) {
  std::printf(
      "cross-core hand-off: %.3f ns/B rewriting lines a peer read, %.3f ns/B reading lines it wrote, %.3f ns/B "
      "overwriting lines it read%s",
      h.write_after_read_s_per_byte * 1e9, h.read_after_write_s_per_byte * 1e9, h.store_after_read_s_per_byte * 1e9,
      h.measured ? "" : " (not measured: one CPU)");
  for (const auto& [verdict, r] : h.by_cores)
    std::printf("; %d rounds %s: %.3f, %.3f and %.3f", r.rounds, verdict.c_str(), r.write_after_read_s_per_byte * 1e9,
                r.read_after_write_s_per_byte * 1e9, r.store_after_read_s_per_byte * 1e9);
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

// hosts > 1: the ranks ran across that many hosts, and their tcp figures are the link between
// hosts ("links_by_size"."hosts", with its alpha-beta-gamma as "link"; plan::over_fabric
// prices a job across hosts with it), not this host's loopback tcp, which stays as it was.
void write_calibration(const std::string& path, const std::vector<std::pair<std::string, Calibrated>>& measured,
                       double compute_seconds, const std::vector<std::string>& models, bool by_ranks_threads,
                       int hosts = 1) {
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
    if (kind == "tcp" && hosts > 1) {
      nlohmann::json& h = by_size["hosts"] = m.by_size;
      h["hosts"] = hosts;
      h["link"] = plan::link_json(m.cp);
      continue;
    }
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
    // Timed under the name predictions look its lines up by (ModelSpec::unit_spec): a GPT's
    // one-block spec of its shape, whatever its layers; an MLP's own spec. A malformed spec
    // is refused here, naming it. (A spec named twice is timed once: measure_compute and
    // add_tp_blocks skip what they already have.)
    if (semi > pos) extra.push_back(plan::ModelSpec::parse(models.substr(pos, semi - pos)).unit_spec);
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
    const bool shm = std::find(kinds.begin(), kinds.end(), TransportKind::kShm) != kinds.end(),
               tcp = std::find(kinds.begin(), kinds.end(), TransportKind::kTcp) != kinds.end();
    if (rc != 0) return rc;
    // The tcp collectives by rank count, on this host (a calibration across hosts times the
    // link between them and leaves this host's loopback figures as they were): kByRanksPasses
    // passes spread over the jobs below, each row the median pass.
    TcpByRanksPasses tcp_passes;
    const bool tcp_tables = compute_seconds > 0 && tcp;
    auto tcp_pass = [&] { return tcp_tables ? tcp_collectives_pass(out, timeout, &tcp_passes) : 0; };
    if (const int rc1 = tcp_pass(); rc1 != 0) return rc1;
    if (compute_seconds > 0 && shm) {
      if (const int rc2 = add_collectives_by_ranks(out, timeout); rc2 != 0) return rc2;
      if (const int rc3 = tcp_pass(); rc3 != 0) return rc3;
      if (const int rc4 = add_tp_blocks(out, timeout, extra); rc4 != 0) return rc4;
    }
    while (tcp_tables && tcp_passes.count < kByRanksPasses)
      if (const int rc5 = tcp_pass(); rc5 != 0) return rc5;
    if (tcp_tables) write_tcp_collectives_by_ranks(out, tcp_passes);
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
  DT_CHECK(info.hosts <= 1 || std::find(kinds.begin(), kinds.end(), TransportKind::kShm) == kinds.end(), InvalidArgument,
           "bench calibrate across " << info.hosts << " hosts times the tcp link between them: pass --transport tcp "
           "--no-compute (shared memory and compute are each host's own: calibrate them on one host)");
  if (info.rank == 0)
    write_calibration(out, measured, compute_seconds, extra, /*by_ranks_threads=*/false, info.hosts);
  return 0;
}

}  // namespace dtrain::cli

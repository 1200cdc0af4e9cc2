// The launcher's jobs of `dtrain bench calibrate` after the 2-rank job wrote the file: see
// cli/bench_calibrate_jobs.h.
#include "cli/bench_calibrate_jobs.h"

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
  // (The job's launcher reads this sampler's file instead of starting a second one.)
  std::pair<int64_t, int64_t> counts{0, 0};
  const size_t slash = path.rfind('/');
  const int rc = run_sampled_job(job, kSampleEvery, slash == std::string::npos ? "." : path.substr(0, slash), &counts,
                                 kSamplerCpuShare);
  *verdict = counts.first + counts.second >= 3 ? sampled_verdict({0, 0}, counts)
                                               : (cores_now() == before ? before : std::string());
  return rc;
}

}  // namespace

double gap_pass_base_s(const std::string& verdict, const std::string& own_verdict, double own_s, double table_s,
                       double all_s, int cores) {
  if (cores < 2) return all_s;
  if (verdict.empty()) return -1;
  if (verdict == own_verdict && own_s > 0) return own_s;
  return table_s > 0 ? table_s : -1;
}

GapFactors gap_factors(const std::vector<std::pair<std::string, double>>& counted) {
  GapFactors out;
  std::map<std::string, int> n;
  for (const auto& [verdict, f] : counted) {
    out.mixed = out.mixed < 0 ? f : std::min(out.mixed, f);
    if (verdict.empty()) continue;
    out.by_verdict[verdict] = out.by_verdict.count(verdict) ? std::min(out.by_verdict[verdict], f) : f;
    ++n[verdict];
  }
  if (static_cast<int>(counted.size()) < kGapMinCounted) out.mixed = -1;
  for (const auto& [verdict, k] : n)
    if (k < kGapMinCounted) out.by_verdict.erase(verdict);
    else out.passes[verdict] = k;
  return out;
}

int add_collectives_by_ranks(const std::string& path, double timeout) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  DT_CHECK(j.is_object() && j.contains("links_by_size") && j["links_by_size"].contains("intra"), IoError,
           "bench calibrate: " << path << " has no intra-host link figures to add the collectives by rank count to");
  nlohmann::json by_ranks = nlohmann::json::object(), rs = nlohmann::json::object(), ag = nlohmann::json::object(),
                 bc = nlohmann::json::object(), gap = nlohmann::json::object(), penalty = nlohmann::json::object(),
                 slots_from = nlohmann::json::object(),
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
    // A ratio means something only between passes that ran in one placement of the cores:
    // each gap pass comes right after a back-to-back pass of its own, both filed by the
    // cores' samples as the tables' passes are, and counts where the two read one verdict
    // (or, failing that, where the tables have a back-to-back row of the gap pass's verdict).
    // Across verdicts it read x3.93 and x3.24 on the EPYC VM (a far gap pass over close
    // calls) where either verdict alone reads x1.0-1.3; cal-i5's x3.24 at 4 ranks, applied
    // to both placements, priced ddp at 4 ranks +11..+54% close and +84..+138% far
    // (2026-11-30). A pass without a verdict counts only on a host that gives none (one core).
    const int cores = host_cores();
    const auto b2b = passes.find({"allreduce", 1048576.0});
    GapFactors gaps;  // this rank count's, from its gap passes below
    if (p > cores && b2b != passes.end()) {
      std::vector<std::pair<std::string, double>> counted;
      std::vector<double> alphas;  // each counted pass's meeting penalty (plan/cluster.h)
      auto timed = [&](const std::string& name, std::vector<std::string> args, nlohmann::json* got,
                       std::string* verdict) {
        const std::string before = cores_now();
        return run_sampled(path, before, [&] { return collectives_job(path + name, p, timeout, args, got); }, verdict);
      };
      for (int pass = 0; pass < kGapPasses; ++pass) {
        nlohmann::json got, own;
        std::string verdict, own_verdict;
        const std::vector<std::string> one{"--op", "allreduce", "--sizes", "1M", "--seconds", "0.3"};
        std::vector<std::string> with_gap = one;
        with_gap.insert(with_gap.end(), {"--gap-us", std::to_string(kGapUs)});
        if (const int rc = timed(".gap", one, &own, &own_verdict); rc != 0) return rc;
        if (const int rc = timed(".gap", with_gap, &got, &verdict); rc != 0) return rc;
        double table_s = -1;
        if (const auto rows = by_verdict.find(verdict); !verdict.empty() && rows != by_verdict.end())
          if (const auto same = rows->second.find({"allreduce", 1048576.0}); same != rows->second.end())
            table_s = same->second.median();
        const double base = gap_pass_base_s(verdict, own_verdict, own[0]["time_us"].get<double>() * 1e-6, table_s,
                                            b2b->second.median(), cores);
        if (base <= 0) {
          std::printf("shm allreduce, %d ranks, gap pass %d: the cores read %s with the gap and %s back to back; "
                      "not counted\n",
                      p, pass + 1, verdict.empty() ? "mixed" : verdict.c_str(),
                      own_verdict.empty() ? "mixed" : own_verdict.c_str());
          continue;
        }
        const double gaps = kGapUs * 1e-6 * static_cast<double>(p) / cores;
        const double f = std::max(1.0, (got[0]["time_us"].get<double>() * 1e-6 - gaps) / base);
        counted.push_back({verdict, f});
        alphas.push_back((f - 1) * base / gaps);  // the same excess per second of the node's compute
        std::printf("shm allreduce, %d ranks, gap pass %d: cores %s, x%.2f\n", p, pass + 1,
                    verdict.empty() ? "mixed" : verdict.c_str(), f);
        std::fflush(stdout);
      }
      // One pass is no factor (kGapMinCounted): left out, as a figure this calibration could
      // not time (calibration_carry.h keeps the previous file's, timed the same way).
      gaps = gap_factors(counted);
      const double factor = gaps.mixed;
      if (factor > 0) gap[key] = factor;
      // The meeting penalty is the median pass's, in any placement of the cores: the
      // imbalance it measures is the scheduler's, which every pass sees (three rounds of the
      // 600 us pass on 2026-12-01 read 0.12, 0.31 and 0.44 at 8 ranks, 0, 0.14 and 0.16 at
      // 4; the gap factor above keeps the least disturbed pass).
      if (static_cast<int>(alphas.size()) >= kGapMinCounted) penalty[key] = dtrain::median(alphas, "meeting penalty");
      std::printf("shm allreduce, %d ranks (processes), 1 MiB with %d us of compute before each call: ", p, kGapUs);
      if (factor > 0) std::printf("x%.2f", factor);
      else std::printf("fewer than %d passes in one placement of the cores (no factor: 1)", kGapMinCounted);
      for (const auto& [v, f] : gaps.by_verdict) std::printf("; cores %s x%.2f", v.c_str(), f);
      if (penalty.contains(key))
        std::printf("; meeting penalty %.2f (the median pass's excess per second of the node's compute)",
                    penalty[key].get<double>());
      std::printf("\n");
      std::fflush(stdout);  // before the next job's ranks write to the same stream
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
      if (gaps.by_verdict.count(verdict)) {
        tables["gap_factor"] = gaps.by_verdict.at(verdict);
        tables["gap_passes"] = gaps.passes.at(verdict);
      }
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
  if (!penalty.empty()) j["links_by_size"]["intra"]["meeting_penalty_by_ranks"] = penalty;
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

int tcp_collectives_pass(const std::string& path, double timeout, TcpByRanksPasses* passes) {
  for (int p : plan::calibrated_rank_counts(host_cores())) {
    nlohmann::json got;
    const int rc = bench_job("collectives", path + ".tcp", p, timeout,
                             {"--transport", "tcp", "--op", "allreduce,reducescatter,allgather,broadcast", "--sizes",
                              kTcpByRanksSizes, "--seconds", std::to_string(kByRanksSeconds)},
                             &got);
    if (rc != 0) return rc;
    for (const auto& row : got)
      passes->seconds[p][{row["op"].get<std::string>(), row["size_bytes"].get<double>()}].push_back(
          row["time_us"].get<double>() * 1e-6);
  }
  ++passes->count;
  return 0;
}

void write_tcp_collectives_by_ranks(const std::string& path, const TcpByRanksPasses& passes) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  DT_CHECK(j.is_object() && j.contains("links_by_size") && j["links_by_size"].contains("inter"), IoError,
           "bench calibrate: " << path << " has no tcp link figures to add the tcp collectives by rank count to");
  std::map<std::string, nlohmann::json> tables;  // "allreduce_by_ranks" ... -> {"ranks": [[bytes, s], ...]}
  for (const auto& [p, rows] : passes.seconds) {
    const std::string key = std::to_string(p);
    for (const auto& [k, seconds] : rows) {  // (op, bytes) order: bytes increase within an op
      const double t = dtrain::median(seconds, "tcp collective passes");
      nlohmann::json& dst = tables[k.first + "_by_ranks"];
      if (!dst.contains(key)) dst[key] = nlohmann::json::array();
      dst[key].push_back({k.second, t});
      if (k.second == 1048576.0 || k.second == 16777216.0) {
        std::printf("tcp %s, %d ranks (processes), %8.0f B: %8.1f us (passes", k.first.c_str(), p, k.second, t * 1e6);
        for (double s : seconds) std::printf(" %.1f", s * 1e6);
        std::printf(")\n");
      }
    }
  }
  for (const auto& [name, t] : tables) j["links_by_size"]["inter"][name] = t;
  j["links_by_size"]["inter"]["allreduce_by_ranks_with"] = "processes";
  replace_calibration_file(path, j);
  std::printf("added the tcp all-reduce, reduce-scatter, all-gather and broadcast by rank count (processes, one host, "
              "the median of %d passes) to %s\n",
              passes.count, path.c_str());
  std::fflush(stdout);
}

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

}  // namespace

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


}  // namespace dtrain::cli

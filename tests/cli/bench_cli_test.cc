// dtrain bench collectives / calibrate and dtrain plan collective, run in-process with ranks
// as threads (--threads): the JSON rows carry the documented keys, --check finds no wrong
// element, auto reports the algorithm it actually used, and bad flags are usage errors.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>

#include <cstdio>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include <thread>

#include "base/error.h"
#include "cli/bench.h"
#include "cli/bench_calibrate_jobs.h"
#include "coll/config.h"
#include "coll/path_tuner.h"
#include "plan/calibration_carry.h"
#include "plan/cluster.h"
#include "plan/coll_bench.h"
#include "cli/commands.h"
#include "cli/bench_files.h"

namespace dtrain::cli {
namespace {

using dtrain::testing::read_json;
using dtrain::testing::temp_path;

TEST(BenchCollectivesCli, AllAlgorithmsCheckedWithJsonRows) {
  std::string json = temp_path("rows.json");
  int rc = bench_collectives({"-n", "3", "--threads", "--op", "allreduce,allgather,reducescatter,broadcast", "--algo",
                              "all", "--sizes", "8:4K", "--factor", "8", "--seconds", "0.002", "--warmup", "1",
                              "--check", "--json", json, "--segment", "256"});
  EXPECT_EQ(rc, 0);
  auto rows = read_json(json);
  ASSERT_TRUE(rows.is_array());
  std::set<std::string> algos;
  for (const auto& row : rows) {
    for (const char* key : {"op", "algo", "transport", "world_size", "type", "size_bytes", "count", "time_us",
                            "algbw_gbps", "busbw_gbps", "wrong"})
      ASSERT_TRUE(row.contains(key)) << key << " missing in " << row.dump();
    EXPECT_EQ(row["wrong"], 0) << row.dump();
    EXPECT_EQ(row["world_size"], 3);
    EXPECT_EQ(row["transport"], "shm");
    EXPECT_GT(row["time_us"].get<double>(), 0);
    algos.insert(row["op"].get<std::string>() + "/" + row["algo"].get<std::string>());
    // shm_direct says which of its two paths carried the call; other algorithms have none.
    if (row["algo"] == "shm_direct") {
      EXPECT_TRUE(row["path"] == "slots" || row["path"] == "reads") << row.dump();
    } else {
      EXPECT_EQ(row["path"], "") << row.dump();
    }
  }
  for (const char* want : {"allreduce/ring", "allreduce/tree", "allreduce/halving_doubling", "allreduce/shm_direct",
                           "allgather/bruck", "reducescatter/halving_doubling", "broadcast/chain"})
    EXPECT_TRUE(algos.count(want)) << want;
  std::remove(json.c_str());
}

TEST(BenchCollectivesCli, AutoReportsTheAlgorithmUsedAndBusBandwidthFactor) {
  CollBenchConfig cfg;
  cfg.sizes = {8, 1 << 20};
  cfg.seconds = 0.002;
  cfg.warmup = 1;
  cfg.check = true;
  cfg.print = false;
  auto rows = bench_collectives_threads(4, TransportKind::kTcp, cfg);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_NE(r.algo, "auto");
    EXPECT_EQ(r.wrong, 0);
    EXPECT_NEAR(r.busbw_gbps, r.algbw_gbps * 2 * 3 / 4, 1e-9);
  }
  EXPECT_DOUBLE_EQ(bus_factor(CollOp::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollOp::kBroadcast, 4), 1.0);
}

// One size, one short silent row.
CollBenchConfig one_short_row(size_t bytes) {
  CollBenchConfig cfg;
  cfg.sizes = {bytes};
  cfg.seconds = 0.01;
  cfg.warmup = 1;
  cfg.print = false;
  return cfg;
}

// --gap-us: each rank burns that much CPU before every timed call, so a row's time includes
// at least the gap, and the row carries no prediction.
TEST(BenchCollectivesCli, GapIsComputedBeforeEveryCallAndCounted) {
  CollBenchConfig cfg = one_short_row(1024);
  cfg.gap_s = 2e-3;
  auto rows = bench_collectives_threads(2, TransportKind::kShm, cfg);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GE(rows[0].time_us, 2000.0);
  EXPECT_EQ(rows[0].predicted_from, "none");
  EXPECT_EQ(rows[0].predicted_us, 0);
}

// --settle: where the ranks outnumber the cores the context times both shared-memory paths,
// and its first try of the other path waits for kExploreEvery x kMinCalls calls; a row with
// settle_s is timed only after that try, so its untimed calls are at least that many (less
// the warm-up's). Without settle_s it makes none.
TEST(BenchCollectivesCli, ARowIsTimedAfterThePathChoiceSettled) {
  if (std::thread::hardware_concurrency() >= 4) GTEST_SKIP() << "4 ranks must outnumber the cores for paths to be timed";
  CollBenchConfig cfg = one_short_row(1 << 20);
  cfg.ops = {CollOp::kAllreduce};
  cfg.settle_s = 120;  // a bound for a broken tuner, not a measurement
  auto rows = bench_collectives_threads(4, TransportKind::kShm, cfg);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].algo, "shm_direct");
  EXPECT_GE(rows[0].settle_calls, PathTuner::kExploreEvery * PathTuner::kMinCalls - cfg.warmup);
  cfg.settle_s = 0;
  rows = bench_collectives_threads(4, TransportKind::kShm, cfg);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].settle_calls, 0);
}

// --passes: every row is timed once a pass, the passes going over all rows in order, and a
// row reports its median pass with the fastest and slowest beside it: one row per shape, not
// one per pass. The fake sampler counts rank 0's reads, two around each timed row.
TEST(BenchCollectivesCli, PassesTimeEveryRowAgainAndReportTheMedianPass) {
  CollBenchConfig cfg = one_short_row(4096);
  cfg.sizes = {4096, 65536};
  cfg.passes = 3;
  cfg.check = true;
  auto reads = std::make_shared<std::atomic<int64_t>>(0);
  cfg.cores_samples = [reads] {
    const int64_t k = reads->fetch_add(1) + 1;
    return std::pair<int64_t, int64_t>{k, k};
  };
  auto rows = bench_collectives_threads(4, TransportKind::kShm, cfg);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(reads->load(), 2 * 2 * 3);
  for (const auto& r : rows) {
    EXPECT_EQ(r.passes, 3);
    EXPECT_EQ(r.wrong, 0);
    EXPECT_GT(r.time_min_us, 0);
    EXPECT_LE(r.time_min_us, r.time_us);
    EXPECT_LE(r.time_us, r.time_max_us);
    EXPECT_NEAR(r.algbw_gbps, static_cast<double>(r.size_bytes) / r.time_us / 1e3, 1e-9 * r.algbw_gbps);
    EXPECT_NEAR(r.busbw_gbps, r.algbw_gbps * bus_factor(CollOp::kAllreduce, 4), 1e-9 * r.busbw_gbps);
  }
  EXPECT_EQ(rows[0].size_bytes, 4096u);
  EXPECT_EQ(rows[1].size_bytes, 65536u);
  // One pass is itself: its fastest and slowest are its time.
  cfg.passes = 1;
  rows = bench_collectives_threads(2, TransportKind::kShm, cfg);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].passes, 1);
  EXPECT_EQ(rows[0].time_min_us, rows[0].time_us);
  EXPECT_EQ(rows[0].time_max_us, rows[0].time_us);
}

// More ranks than two have no verdict of their own: rank 0 reads the launcher's sampler of the
// cores before and after each row's timed calls, and the row carries the far share of the
// samples taken in between (here a fake sampler: every read adds one close and three far).
TEST(BenchCollectivesCli, ARowOfMoreRanksCarriesTheShareOfFarSamplesDuringItsCalls) {
  CollBenchConfig cfg = one_short_row(4096);
  auto reads = std::make_shared<std::atomic<int64_t>>(0);
  cfg.cores_samples = [reads] {
    const int64_t k = reads->fetch_add(1) + 1;
    return std::pair<int64_t, int64_t>{k, 3 * k};
  };
  auto rows = bench_collectives_threads(4, TransportKind::kShm, cfg);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].far_share, 0.75);
  EXPECT_EQ(rows[0].far_share_from, "calls");
  EXPECT_EQ(reads->load(), 2);  // rank 0 alone, once before and once after the row
  // Fewer than 3 samples in between: no share.
  cfg.cores_samples = [] { return std::pair<int64_t, int64_t>{5, 5}; };
  rows = bench_collectives_threads(4, TransportKind::kShm, cfg);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].far_share, -1);
  EXPECT_EQ(rows[0].far_share_from, "");
}

// Under 3 samples during a row's calls (the probe's threads meet late among spinning ranks):
// the latest 3 or more before the row's end price it. One far sample between any two reads:
// the first row has 1 and nothing before it; the second has 1 during its calls and 3 since
// the first row's start.
TEST(BenchCollectivesCli, ARowWithFewSamplesTakesTheLatestBeforeItsEnd) {
  CollBenchConfig cfg = one_short_row(4096);
  cfg.sizes = {4096, 8192};
  auto reads = std::make_shared<std::atomic<int64_t>>(0);
  cfg.cores_samples = [reads] { return std::pair<int64_t, int64_t>{0, reads->fetch_add(1) + 1}; };
  auto rows = bench_collectives_threads(4, TransportKind::kShm, cfg);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].far_share, -1);
  EXPECT_EQ(rows[0].far_share_from, "");
  EXPECT_DOUBLE_EQ(rows[1].far_share, 1.0);
  EXPECT_EQ(rows[1].far_share_from, "recent");
}

// The prediction is the calibration's own measurement of the shape where it has one (ranks as
// processes on shm, the default path, float32 sum, broadcast from rank 0), else -1 (the
// formula then): a forced algorithm, threads, another type or root were not what it timed.
TEST(BenchCollectivesCli, CalibratedPredictionOnlyForTheShapesTheCalibrationTimed) {
  plan::Cluster cal;
  cal.intra_sizes.allreduce_by_ranks[4] = {{1 << 20, 1e-4}, {4 << 20, 4e-4}};
  cal.intra_sizes.broadcast_by_ranks[4] = {{1 << 20, 5e-5}};
  CollBenchConfig cfg;
  EXPECT_NEAR(calibrated_seconds(cal, CollOp::kAllreduce, 4, 2 << 20, cfg, Algorithm::kAuto, true), 2e-4, 1e-12);
  EXPECT_NEAR(calibrated_seconds(cal, CollOp::kBroadcast, 4, 1 << 20, cfg, Algorithm::kAuto, true), 5e-5, 1e-12);
  EXPECT_EQ(calibrated_seconds(cal, CollOp::kAllreduce, 8, 2 << 20, cfg, Algorithm::kAuto, true), -1);  // not timed
  EXPECT_EQ(calibrated_seconds(cal, CollOp::kAllreduce, 4, 2 << 20, cfg, Algorithm::kRing, true), -1);
  EXPECT_EQ(calibrated_seconds(cal, CollOp::kAllreduce, 4, 2 << 20, cfg, Algorithm::kAuto, false), -1);  // tcp, hosts
  // Over tcp on one host: the calibration's loopback tcp tables, as a training job is priced.
  cal.inter_sizes.allreduce_by_ranks[4] = {{1 << 20, 3e-4}, {4 << 20, 1.2e-3}};
  const plan::Cluster tcp = plan::over_fabric(cal, "tcp", 1, 0);
  EXPECT_NEAR(calibrated_seconds(tcp, CollOp::kAllreduce, 4, 2 << 20, cfg, Algorithm::kAuto, true), 6e-4, 1e-12);
  EXPECT_EQ(calibrated_seconds(tcp, CollOp::kBroadcast, 4, 1 << 20, cfg, Algorithm::kAuto, true), -1);  // shm's only
  EXPECT_EQ(calibrated_seconds(cal, CollOp::kReduceScatter, 4, 2 << 20, cfg, Algorithm::kAuto, true), -1);
  CollBenchConfig half = cfg;
  half.dtype = DType::kFloat16;
  EXPECT_EQ(calibrated_seconds(cal, CollOp::kAllreduce, 4, 2 << 20, half, Algorithm::kAuto, true), -1);
  CollBenchConfig root1 = cfg;
  root1.root = 1;
  EXPECT_EQ(calibrated_seconds(cal, CollOp::kBroadcast, 4, 1 << 20, root1, Algorithm::kAuto, true), -1);
  CollBenchConfig threads = cfg;
  threads.ranks_are_threads = true;
  EXPECT_EQ(calibrated_seconds(cal, CollOp::kAllreduce, 4, 2 << 20, threads, Algorithm::kAuto, true), -1);
}

TEST(BenchCollectivesCli, UsageErrors) {
  EXPECT_THROW(bench_collectives({"--threads", "--bogus"}), InvalidArgument);
  EXPECT_THROW(bench_collectives({"--threads", "--algo", "warp"}), InvalidArgument);
  EXPECT_THROW(bench_collectives({"--threads", "--op", "allsum"}), InvalidArgument);
  EXPECT_THROW(bench_collectives({"--threads", "--sizes", "9:3"}), InvalidArgument);
  EXPECT_EQ(parse_size_range("8:256M", 4).front(), 8u);
  EXPECT_EQ(parse_size_range("8:256M", 4).back(), 256u << 20);
}

// A gap pass counts against a back-to-back pass of the same placement of the cores: its own
// (run right before it) where both read one verdict, else the tables' row of its verdict.
TEST(BenchCalibrateCli, AGapPassIsDividedOnlyByCallsInTheSamePlacement) {
  EXPECT_EQ(gap_pass_base_s("far", "far", 8e-4, 1e-4, 2e-4, 2), 8e-4);
  EXPECT_EQ(gap_pass_base_s("far", "close", 1e-4, 9e-4, 2e-4, 2), 9e-4);  // the tables' far row
  EXPECT_EQ(gap_pass_base_s("far", "close", 1e-4, -1, 2e-4, 2), -1);     // nothing far to divide by
  EXPECT_EQ(gap_pass_base_s("", "close", 1e-4, -1, 2e-4, 2), -1);        // mixed samples
  EXPECT_EQ(gap_pass_base_s("", "", 1e-4, -1, 2e-4, 1), 2e-4);           // one core: no verdicts at all
}

// A gap factor needs two passes that counted, mixed or of one verdict: one pass alone is
// left out (cal-m1's x1.69 far at 4 ranks was one pass). Each is the lowest of its passes.
TEST(BenchCalibrateCli, AGapFactorNeedsTwoPassesThatCounted) {
  const GapFactors none = gap_factors({});
  EXPECT_EQ(none.mixed, -1);
  EXPECT_TRUE(none.by_verdict.empty());
  const GapFactors one = gap_factors({{"far", 1.69}});
  EXPECT_EQ(one.mixed, -1);
  EXPECT_TRUE(one.by_verdict.empty());
  const GapFactors some = gap_factors({{"far", 1.69}, {"close", 1.30}, {"close", 1.10}, {"", 1.05}});
  EXPECT_EQ(some.mixed, 1.05);
  ASSERT_EQ(some.by_verdict.size(), 1u);
  EXPECT_EQ(some.by_verdict.at("close"), 1.10);
  const GapFactors far = gap_factors({{"far", 1.4}, {"far", 1.2}});
  EXPECT_EQ(far.mixed, 1.2);
  EXPECT_EQ(far.by_verdict.at("far"), 1.2);
}

// Over tcp the calibration also times a one-way send at every size (plan/cluster.h
// LinkSizes::send: ps's push and pull, a pipeline's sends), paced as the executors send
// (half a ping-pong after a gap of compute); over shared memory it times none.
TEST(BenchCalibrateCli, TcpAlsoTimesAOneWaySend) {
  std::string path = temp_path("calib-send.json");
  EXPECT_EQ(bench_calibrate({"-n", "2", "--threads", "--transport", "shm,tcp", "--no-compute", "--seconds", "0.02", "--out",
                             path}),
            0);
  const auto j = read_json(path);
  const auto& inter = j["links_by_size"]["inter"];
  ASSERT_TRUE(inter.contains("send")) << inter.dump();
  ASSERT_EQ(inter["send"].size(), inter["exchange"].size());
  for (size_t i = 0; i < inter["send"].size(); ++i) {
    EXPECT_EQ(inter["send"][i][0], inter["exchange"][i][0]);
    EXPECT_GT(inter["send"][i][1].get<double>(), 0);
  }
  EXPECT_FALSE(j["links_by_size"]["intra"].contains("send")) << j["links_by_size"]["intra"].dump();
  // Over tcp the transfers are also timed halfway between the all-reduce's x4 sizes (a knee
  // between 512 KiB and 1 MiB on loopback), in increasing order.
  const auto& intra = j["links_by_size"]["intra"];
  ASSERT_EQ(inter["exchange"].size(), 2 * intra["exchange"].size() - 1) << inter.dump();
  for (size_t i = 1; i < inter["exchange"].size(); ++i)
    EXPECT_EQ(inter["exchange"][i][0].get<double>(), 2 * inter["exchange"][i - 1][0].get<double>()) << i;
  EXPECT_EQ(inter["allreduce"].size(), intra["allreduce"].size());
  // And the planner reads it back.
  EXPECT_EQ(plan::this_machine(path).inter_sizes.send.size(), inter["send"].size());
  std::remove(path.c_str());
}

TEST(BenchCalibrateCli, KeepsTheOtherPlacementFromTheFileItReplaces) {
  const std::string path = temp_path("calib-carry.json");
  const std::vector<std::string> calibrate{"-n", "2", "--threads", "--transport", "shm", "--seconds", "0.02",
                                           "--no-compute", "--out", path};
  ASSERT_EQ(bench_calibrate(calibrate), 0);
  const auto first = read_json(path);
  ASSERT_TRUE(first.contains("machine")) << first.dump();
  EXPECT_EQ(first["machine"], plan::machine_fingerprint());
  // A far 4-rank table, as a calibration that saw the cores far would have filed it.
  const nlohmann::json far = {{"allreduce", {{1 << 20, 9e-4}, {4 << 20, 3e-3}}},
                              {"reducescatter", nlohmann::json::array()},
                              {"allgather", nlohmann::json::array()},
                              {"broadcast", nlohmann::json::array()},
                              {"gap_factor", 1.5},
                              {"gap_passes", 2}};
  auto with_far = [&](nlohmann::json j) {
    j["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["far"] = far;
    std::ofstream o(path);
    o << j.dump(2);
  };
  with_far(first);
  ASSERT_EQ(bench_calibrate(calibrate), 0);  // re-times the 2-rank links, sees no 4-rank verdict
  auto kept = read_json(path);
  EXPECT_EQ(kept["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["far"], far) << kept.dump();
  ASSERT_EQ(kept["carried"].size(), 1u) << kept["carried"].dump();
  EXPECT_EQ(kept["carried"][0]["table"], "links_by_size.intra.by_cores_by_ranks.4.far");
  EXPECT_EQ(kept["carried"][0]["measured_unix"], first["calibrated_unix"]);
  EXPECT_EQ(plan_main({"collective", "--op", "allreduce", "-n", "4", "--size", "1M", "--calibration", path}), 0);
  // --fresh keeps nothing; a file of another machine gives nothing.
  with_far(first);
  ASSERT_EQ(bench_calibrate([&] {
              auto a = calibrate;
              a.push_back("--fresh");
              return a;
            }()),
            0);
  auto clean = read_json(path);
  EXPECT_FALSE(clean["links_by_size"]["intra"].contains("by_cores_by_ranks")) << clean.dump();
  EXPECT_FALSE(clean.contains("carried"));
  auto other = first;
  other["machine"]["cpus"] = first["machine"]["cpus"].get<int>() + 1;
  with_far(other);
  ASSERT_EQ(bench_calibrate(calibrate), 0);
  EXPECT_FALSE(read_json(path)["links_by_size"]["intra"].contains("by_cores_by_ranks"));
  EXPECT_THROW(bench_calibrate({"--fresh", "--slowdown-only", "--out", path}), InvalidArgument);
  std::remove(path.c_str());
}

TEST(PlanCli, CollectiveAndUsageErrors) {
  EXPECT_EQ(plan_main({"collective", "--op", "allreduce", "-n", "8", "--size", "64M", "--transport", "tcp"}), 0);
  EXPECT_EQ(plan_main({"collective", "--op", "broadcast", "-n", "3", "--size", "1K", "--json"}), 0);
  EXPECT_THROW(plan_main({"collective", "--op", "allreduce", "--bogus", "1"}), InvalidArgument);
  EXPECT_THROW(plan_main({"strategy"}), InvalidArgument);
}

}  // namespace
}  // namespace dtrain::cli

namespace dtrain::cli {
namespace {

// The calibration's tensor-parallel rows come from three rounds of the same jobs: each row is
// the median of its rounds, so one disturbed round (here the second, 3x slower) moves nothing;
// rows that differ in tp, ranks or items stay apart, in the order first seen.
TEST(BenchCalibrate, TensorParallelRowsAreTheMedianOfTheirRounds) {
  const std::string s = "gpt:layers=1,heads=8,width=128,context=64";
  nlohmann::json rows = nlohmann::json::array();
  for (double slow : {1.0, 3.0, 1.1}) {
    rows.push_back({{"spec", s}, {"tp", 4}, {"items", 2}, {"fwd_s", 1e-3 * slow}, {"bwd_s", 2e-3 * slow}});
    rows.push_back({{"spec", s}, {"tp", 2}, {"ranks", 4}, {"items", 2}, {"fwd_s", 5e-4 * slow}, {"bwd_s", 6e-4 * slow}});
    rows.push_back({{"spec", s}, {"tp", 2}, {"items", 2}, {"fwd_s", 4e-4 * slow}, {"bwd_s", 4e-4 * slow}});
  }
  const nlohmann::json m = median_tp_rows(rows);
  ASSERT_EQ(m.size(), 3u) << m.dump();
  EXPECT_EQ(m[0]["tp"], 4);
  EXPECT_DOUBLE_EQ(m[0]["fwd_s"].get<double>(), 1.1e-3);
  EXPECT_DOUBLE_EQ(m[0]["bwd_s"].get<double>(), 2.2e-3);
  EXPECT_EQ(m[1]["ranks"], 4);
  EXPECT_DOUBLE_EQ(m[1]["fwd_s"].get<double>(), 5.5e-4);
  EXPECT_FALSE(m[2].contains("ranks"));
  EXPECT_DOUBLE_EQ(m[2]["bwd_s"].get<double>(), 4.4e-4);
  // Two rounds: the mean of the two.
  const nlohmann::json two = median_tp_rows(nlohmann::json::array({rows[0], rows[3]}));
  ASSERT_EQ(two.size(), 1u);
  EXPECT_DOUBLE_EQ(two[0]["fwd_s"].get<double>(), 2e-3);
  EXPECT_TRUE(median_tp_rows(nlohmann::json::array()).empty());
}

// --window times ddp's in-place all-reduce in a shared-memory window: processes on shm, float32
// sums only; anything else is a usage error naming what it needs.
TEST(BenchCollectivesCli, WindowNeedsWhatDdpRuns) {
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--window", "--threads", "-n", "2"},
                                              std::vector<std::string>{"--window", "--type", "float64"},
                                              std::vector<std::string>{"--window", "--transport", "tcp"},
                                              std::vector<std::string>{"--window", "--inplace"}}) {
    try {
      bench_collectives(bad);
      ADD_FAILURE() << "accepted " << bad[1];
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--window"), std::string::npos) << e.what();
    }
  }
}

TEST(BenchCollectivesCli, TouchNeedsTheWindow) {
  try {
    bench_collectives({"--touch", "-n", "2"});
    ADD_FAILURE() << "accepted --touch without --window";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("add --window"), std::string::npos) << e.what();
  }
}

// dtrain bench cores: each sample is a round trip in ns and the verdict the shared-memory
// context would give it; the summary's counts add up; bad flags are usage errors.
TEST(BenchCoresCli, SamplesTheRoundTripAndItsVerdict) {
  const std::string json = temp_path("cores.json");
  ASSERT_EQ(bench_cores({"--seconds", "0.05", "--every-ms", "10", "--json", json}), 0);
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: nothing to measure (and no file)";
  const auto j = read_json(json);
  ASSERT_GE(j["samples"].size(), 2u);
  int far = 0;
  for (const auto& s : j["samples"]) {
    const double ns = s["ns"].get<double>();
    EXPECT_GT(ns, 0.0);
    EXPECT_LT(ns, 1e6) << "a round trip of a millisecond is not a cache line's";
    EXPECT_EQ(s["verdict"], ns < kCloseRoundTripNs ? "close" : "far");
    far += s["verdict"] == "far" ? 1 : 0;
  }
  EXPECT_EQ(j["far"].get<int>(), far);
  EXPECT_EQ(j["close"].get<int>() + far, static_cast<int>(j["samples"].size()));
  EXPECT_TRUE(j["verdict"] == "close" || j["verdict"] == "far");
  std::remove(json.c_str());
  EXPECT_THROW(bench_cores({"--every-ms", "0"}), InvalidArgument);
  EXPECT_THROW(bench_cores({"--bogus"}), InvalidArgument);
}

}  // namespace
}  // namespace dtrain::cli

// `dtrain train -n N` end to end through the launcher: the JSON keys of a ddp run, a killed
// rank stopping the job with an error naming it, and --resume continuing from the last
// checkpoint with exactly the losses of an uninterrupted run. Data: a small CSV written here.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/train_run.h"
#include "coll/config.h"
#include "data/rng.h"

namespace {

namespace fs = std::filesystem;
using Result = dtrain::testing::TrainResult;

Result run(const std::string& args, const std::string& env = "") { return dtrain::testing::run_train(args, env); }
nlohmann::json load(const std::string& path) { return dtrain::testing::load_json(path); }

class TrainMp : public dtrain::testing::TrainTest {
 protected:
  void SetUp() override {
    TrainTest::SetUp();
    if (IsSkipped()) return;
    // 600 examples, 8 features, 3 separable-ish classes; the label comes first.
    dtrain::data::Rng rng(5);
    std::ofstream train(file("train.csv")), test(file("test.csv"));
    for (int i = 0; i < 800; ++i) {
      const int y = static_cast<int>(rng.below(3));
      std::ofstream& o = i < 600 ? train : test;
      o << y;
      for (int j = 0; j < 8; ++j) o << "," << rng.normal() * 0.7 + (j % 3 == y ? 1.0 : 0.0);
      o << "\n";
    }
  }
  std::string data() { return "--data csv:" + file("train.csv") + "," + file("test.csv") + " --model mlp:8-16-3 "; }
};

TEST_F(TrainMp, DdpReportsPerRankTimeSplitAndTrace) {
  Result r = run("-n 2 " + data() + "--epochs 2 --batch 32 --json " + file("r.json") + " --trace " + file("t.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ddp: test_accuracy"), std::string::npos) << r.output;
  auto j = load(file("r.json"));
  EXPECT_EQ(j["strategy"], "ddp");
  EXPECT_EQ(j["world_size"], 2);
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (const auto& rk : j["ranks"]) {
    EXPECT_GT(rk["compute_seconds"].get<double>(), 0);
    EXPECT_GT(rk["comm_seconds"].get<double>(), 0);
    EXPECT_GE(rk["wait_seconds"].get<double>(), 0);
  }
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.8);
  EXPECT_EQ(j["epoch_rows"].size(), 2u);
  // The trace names both ranks and holds all-reduce spans with algorithm and bytes (by
  // default each bucket's all-reduce carries this rank's step of its slice: "allreduce+step").
  auto t = load(file("t.json"));
  bool rank1 = false, allreduce = false;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "rank 1") rank1 = true;
    if (e["ph"] == "X" && e["cat"] == "comm" && e["name"].get<std::string>().rfind("allreduce+step bucket", 0) == 0) {
      allreduce = true;
      EXPECT_TRUE(e["args"].contains("algorithm"));
      EXPECT_GT(e["args"]["bytes"].get<double>(), 0);
      EXPECT_EQ(e["tid"], 1);
    }
  }
  EXPECT_TRUE(rank1);
  EXPECT_TRUE(allreduce);
}

TEST_F(TrainMp, KilledRankStopsTheJobAndResumeLosesNoStep) {
  const std::string common = "-n 2 " + data() + "--epochs 4 --batch 32 --deterministic --optimizer momentum --seed 3 ";
  // Uninterrupted reference.
  Result full = run(common + "--json " + file("full.json"));
  ASSERT_EQ(full.code, 0) << full.output;
  // Rank 1 dies when epoch 3 (0-based 2) begins: two epochs are checkpointed.
  Result killed = run(common + "--checkpoint " + file("ck"), "DTRAIN_FAULT_KILL=1:2");
  EXPECT_NE(killed.code, 0) << killed.output;
  EXPECT_NE(killed.output.find("rank 1"), std::string::npos) << killed.output;
  EXPECT_TRUE(fs::exists(file("ck/checkpoint.rank-0.dtc")));
  EXPECT_TRUE(fs::exists(file("ck/checkpoint.rank-1.dtc")));
  Result resumed = run(common + "--checkpoint " + file("ck") + " --resume --json " + file("resumed.json"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  auto a = load(file("full.json")), b = load(file("resumed.json"));
  // Rank 0 may be stopped by the launcher before it saved epoch 2; then both agree on 1.
  EXPECT_GE(b["resumed_from_epoch"].get<int>(), 1);
  EXPECT_LE(b["resumed_from_epoch"].get<int>(), 2);
  ASSERT_EQ(a["epoch_rows"].size(), 4u);
  ASSERT_EQ(b["epoch_rows"].size(), 4u);
  for (size_t e = 0; e < 4; ++e) {
    EXPECT_EQ(a["epoch_rows"][e]["train_loss"].get<double>(), b["epoch_rows"][e]["train_loss"].get<double>()) << e;
    EXPECT_EQ(a["epoch_rows"][e]["test_loss"].get<double>(), b["epoch_rows"][e]["test_loss"].get<double>()) << e;
  }
  EXPECT_EQ(a["test_loss"].get<double>(), b["test_loss"].get<double>());
}

// A 2-rank run records which shared-memory path its context chose ("shm_cores", here stated by
// DTRAIN_SHM_CORES), and its prediction prices that path: the calibration's 2-rank tables of the
// same verdict (plan::with_core_distance), named in the prediction.
TEST_F(TrainMp, TwoRankRunRecordsItsPathAndItsPredictionPricesIt) {
  {
    std::ofstream cal(file("cal.json"));
    cal << R"({"version": 3, "shm": {"alpha_us": 2, "beta_gbps": 3, "gamma_gbps": 4},
               "tcp": {"alpha_us": 10, "beta_gbps": 1, "gamma_gbps": 4},
               "links_by_size": {"intra": {"p": 2, "allreduce": [[1024, 1e-5], [1048576, 1e-3]],
                 "two_rank_by_cores": {"far": {"allreduce": [[1024, 2e-5], [1048576, 2e-3]]}}}}})";
  }
  for (const char* cores : {"far", "close"}) {
    const std::string json = file(std::string("r-") + cores + ".json");
    Result r = run("-n 2 " + data() + "--epochs 1 --batch 32 --quiet --json " + json,
                   std::string("DTRAIN_SHM_CORES=") + cores + " DTRAIN_CALIBRATION=" + file("cal.json"));
    ASSERT_EQ(r.code, 0) << r.output;
    auto j = load(json);
    if (std::thread::hardware_concurrency() < 2) {  // 2 ranks on one core: no 2-rank verdict
      EXPECT_FALSE(j.contains("shm_cores")) << j.dump();
      continue;
    }
    EXPECT_EQ(j["shm_cores"], cores);
    // The calibration timed only the far verdict's tables: a close run keeps the mixed ones.
    EXPECT_EQ(j["prediction"].value("cores", std::string("mixed")), std::string(cores) == "far" ? "far" : "mixed")
        << j["prediction"].dump();
  }
}

// The launcher times the cores' round trip before starting the ranks; a run without a 2-rank
// verdict of its own (here 4 ranks) records it and is priced with the calibration's figures of
// that verdict.
TEST_F(TrainMp, ProbedRunRecordsItsCoresAndIsPricedByThem) {
  {
    std::ofstream cal(file("cal.json"));
    cal << R"({"version": 3, "shm": {"alpha_us": 2, "beta_gbps": 3, "gamma_gbps": 4},
               "tcp": {"alpha_us": 10, "beta_gbps": 1, "gamma_gbps": 4},
               "links_by_size": {"intra": {"p": 2, "allreduce": [[1024, 1e-5], [1048576, 1e-3]],
                 "two_rank_by_cores": {"far": {"allreduce": [[1024, 2e-5], [1048576, 2e-3]]},
                                       "close": {"allreduce": [[1024, 1e-5], [1048576, 5e-4]]}}}}})";
  }
  const std::string json = file("probed.json");
  Result r = run("-n 4 " + data() + "--epochs 1 --batch 32 --json " + json, "DTRAIN_CALIBRATION=" + file("cal.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = load(json);
  EXPECT_FALSE(j.contains("shm_cores")) << j.dump();  // 4 ranks: no 2-rank verdict
  if (std::thread::hardware_concurrency() < 2) {
    EXPECT_FALSE(j.contains("cores_probed")) << j.dump();  // no second CPU to time it against
    return;
  }
  ASSERT_TRUE(j.contains("cores_probed")) << j.dump();
  EXPECT_GT(j["cores_round_trip_ns"].get<double>(), 0.0);
  const std::string v = j["cores_probed"];
  EXPECT_TRUE(v == "close" || v == "far") << v;
  EXPECT_EQ(v, j["cores_round_trip_ns"].get<double>() < dtrain::kCloseRoundTripNs ? "close" : "far");
  // Probed again after the last step; the later verdict prices the run, half and half where
  // the two differ.
  ASSERT_TRUE(j.contains("cores_probed_end")) << j.dump();
  const std::string end = j["cores_probed_end"];
  EXPECT_EQ(end, j["cores_round_trip_end_ns"].get<double>() < dtrain::kCloseRoundTripNs ? "close" : "far");
  // The launcher sampled the cores while the ranks ran (once at least: at their start).
  ASSERT_TRUE(j.contains("cores_sampled")) << j.dump();
  const int64_t closes = j["cores_sampled"]["close"], fars = j["cores_sampled"]["far"];
  EXPECT_GE(closes + fars, 1) << j.dump();
  if (closes + fars >= 3) {  // enough to price it by: the samples' majority names it
    EXPECT_EQ(j["prediction"].value("cores", std::string("none")), fars * 2 > closes + fars ? "far" : "close");
    EXPECT_NEAR(j["prediction"]["cores_far_share"].get<double>(), static_cast<double>(fars) / (closes + fars), 1e-12);
    return;
  }
  EXPECT_EQ(j["prediction"].value("cores", std::string("none")), end) << j["prediction"].dump();
  if (end == v) {
    EXPECT_FALSE(j["prediction"].contains("cores_far_share")) << j["prediction"].dump();
    EXPECT_NE(r.output.find("priced for cores " + v), std::string::npos) << r.output;  // the report says so
  } else {
    EXPECT_EQ(j["prediction"]["cores_far_share"].get<double>(), 0.5) << j["prediction"].dump();
    EXPECT_NE(r.output.find("priced half for cores close and half far"), std::string::npos) << r.output;
  }
}

// Every run's report carries the planner's prediction beside the measurement (not only the
// JSON): the step and memory, measured and predicted, and the machine model they came from.
TEST_F(TrainMp, ReportPrintsThePredictionBesideTheMeasurement) {
  {
    std::ofstream cal(file("cal.json"));
    cal << R"({"version": 3, "shm": {"alpha_us": 2, "beta_gbps": 3, "gamma_gbps": 4},
               "tcp": {"alpha_us": 10, "beta_gbps": 1, "gamma_gbps": 4}})";
  }
  const std::string json = file("r.json");
  Result r = run("-n 2 " + data() + "--epochs 1 --batch 32 --json " + json, "DTRAIN_CALIBRATION=" + file("cal.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  auto p = load(json)["prediction"];
  ASSERT_TRUE(p.contains("measured_step_ms")) << p.dump();
  char step[64];
  std::snprintf(step, sizeof step, "step %.3f ms, measured %.3f", p["step_ms"].get<double>(),
                p["measured_step_ms"].get<double>());
  const size_t at = r.output.find("prediction: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  EXPECT_NE(line.find(step), std::string::npos) << line;
  EXPECT_NE(line.find("memory "), std::string::npos) << line;
  // The file has links but no compute: its source is named, and the defaults are said to be.
  EXPECT_NE(line.find("machine model " + p["cluster"].get<std::string>()), std::string::npos) << line;
  EXPECT_NE(line.find(file("cal.json")), std::string::npos) << line;
  EXPECT_NE(line.find("`dtrain bench calibrate` measures it"), std::string::npos) << line;
  // --quiet keeps the report to its one summary line.
  Result q = run("-n 2 " + data() + "--epochs 1 --batch 32 --quiet", "DTRAIN_CALIBRATION=" + file("cal.json"));
  ASSERT_EQ(q.code, 0) << q.output;
  EXPECT_EQ(q.output.find("prediction: "), std::string::npos) << q.output;
}

// --probe-speed: the launcher times the speed probe before starting the ranks, and the
// prediction prices compute at that pace over the calibration's own probe. A calibration
// whose probe read 1000 s a pass makes any machine "4x faster now" (the clamp): compute is
// priced at a quarter, the step at the calibration's pace is kept beside it, and the file's
// own re-probe (speed_probe_now_s) is replaced, not compounded.
TEST_F(TrainMp, ProbeSpeedPricesThePredictionAtThePaceBesideTheRun) {
  {
    std::ofstream cal(file("cal.json"));
    cal << R"({"version": 3, "shm": {"alpha_us": 2, "beta_gbps": 3, "gamma_gbps": 4},
               "tcp": {"alpha_us": 10, "beta_gbps": 1, "gamma_gbps": 4},
               "compute": {"gemm_gflops": 20, "elementwise_gbps": 5, "optimizer_ns_per_param": 3,
                           "speed_probe_s": 1000, "speed_probe_now_s": 2000}})";
  }
  const std::string json = file("r.json");
  Result r = run("-n 2 " + data() + "--epochs 1 --batch 32 --quiet --probe-speed --json " + json,
                 "DTRAIN_CALIBRATION=" + file("cal.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  auto p = load(json)["prediction"];
  ASSERT_TRUE(p.contains("speed_probe_ms")) << p.dump();
  EXPECT_GT(p["speed_probe_ms"].get<double>(), 0);
  EXPECT_LT(p["speed_probe_ms"].get<double>(), 1000);  // one warm pass, not a process start
  EXPECT_DOUBLE_EQ(p["compute_scale"].get<double>(), 0.25);
  ASSERT_TRUE(p.contains("step_ms_at_calibration_pace")) << p.dump();
  EXPECT_LT(p["step_ms"].get<double>(), p["step_ms_at_calibration_pace"].get<double>()) << p.dump();
  // Without the flag the file's re-probe (2000 against 1000: 2x slower) prices it.
  Result plain = run("-n 2 " + data() + "--epochs 1 --batch 32 --quiet --json " + json,
                     "DTRAIN_CALIBRATION=" + file("cal.json"));
  ASSERT_EQ(plain.code, 0) << plain.output;
  auto q = load(json)["prediction"];
  EXPECT_DOUBLE_EQ(q["compute_scale"].get<double>(), 2.0) << q.dump();
  EXPECT_FALSE(q.contains("speed_probe_ms")) << q.dump();
  EXPECT_NE(q["cluster"].get<std::string>().find("speed re-probed"), std::string::npos) << q.dump();
}

TEST_F(TrainMp, DeterministicDdpGivesTheSameModelForAnyRankCount) {
  const std::string common = data() + "--epochs 2 --batch 48 --deterministic --optimizer adam --seed 2 ";
  Result one = run("--strategy ddp -n 1 " + common + "--json " + file("one.json"));
  ASSERT_EQ(one.code, 0) << one.output;
  Result three = run("-n 3 " + common + "--json " + file("three.json"));
  ASSERT_EQ(three.code, 0) << three.output;
  auto a = load(file("one.json")), b = load(file("three.json"));
  EXPECT_EQ(b["world_size"], 3);
  // Same parameters: the same test predictions; the loss is summed in a different grouping
  // (the test set is scored in rank slices, each slice summed in float SIMD lanes), so it agrees
  // to float precision only.
  EXPECT_EQ(a["test_accuracy"].get<double>(), b["test_accuracy"].get<double>());
  EXPECT_NEAR(a["test_loss"].get<double>(), b["test_loss"].get<double>(), 1e-8 * a["test_loss"].get<double>());
}

// ddp's fused ZeRO on one host, with one shared copy of the parameters or one per rank
// (--shared-params): each owner computes its slice the same way, and the copy only moves it,
// so the losses agree bit for bit; the epoch rows say which was used, and auto keeps a copy
// per rank for a model this small (parallel/data_parallel.h, kSharedParamsMinBytes).
TEST_F(TrainMp, DdpSharedAndPrivateParametersTrainTheSameModel) {
  // An even cut: the measured one would differ from run to run in its float additions.
  const std::string common = "-n 2 " + data() + "--epochs 2 --batch 48 --optimizer momentum --seed 3 --batch-split even ";
  std::map<std::string, nlohmann::json> runs;
  for (const char* mode : {"on", "off", "auto"}) {
    const std::string json = file(std::string("sp-") + mode + ".json");
    Result r = run(common + "--shared-params " + mode + " --json " + json);
    ASSERT_EQ(r.code, 0) << mode << "\n" << r.output;
    runs[mode] = load(json);
    ASSERT_EQ(runs[mode]["epoch_rows"].size(), 2u) << runs[mode].dump();
  }
  EXPECT_EQ(runs["on"]["epoch_rows"][0]["shared_params"].get<double>(), 1.0);
  EXPECT_EQ(runs["off"]["epoch_rows"][0]["shared_params"].get<double>(), 0.0);
  EXPECT_EQ(runs["auto"]["epoch_rows"][0]["shared_params"].get<double>(), 0.0);
  for (size_t e = 0; e < 2; ++e)
    EXPECT_EQ(runs["on"]["epoch_rows"][e]["train_loss"].get<double>(), runs["off"]["epoch_rows"][e]["train_loss"].get<double>())
        << "epoch " << e + 1;
  EXPECT_EQ(runs["on"]["test_loss"].get<double>(), runs["off"]["test_loss"].get<double>());
  // 4 ranks (on 2 cores, or a core each on a larger host): shared parameters stepped in a
  // scratch copy where ranks share the cores (parallel/zero.cc), in place otherwise; either
  // way the same model as with a copy per rank.
  const std::string four = "-n 4 " + data() + "--epochs 1 --batch 48 --optimizer momentum --seed 3 --batch-split even ";
  std::map<std::string, nlohmann::json> at4;
  for (const char* mode : {"on", "off"}) {
    const std::string json = file(std::string("sp4-") + mode + ".json");
    Result r = run(four + "--shared-params " + mode + " --json " + json);
    ASSERT_EQ(r.code, 0) << mode << "\n" << r.output;
    at4[mode] = load(json);
  }
  EXPECT_EQ(at4["on"]["epoch_rows"][0]["shared_params"].get<double>(), 1.0);
  EXPECT_EQ(at4["on"]["epoch_rows"][0]["train_loss"].get<double>(), at4["off"]["epoch_rows"][0]["train_loss"].get<double>());
  EXPECT_EQ(at4["on"]["test_loss"].get<double>(), at4["off"]["test_loss"].get<double>());
  Result bad = run(common + "--shared-params maybe");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("--shared-params takes auto, on or off"), std::string::npos) << bad.output;
}

// --batch-split (parallel/batch_split.h): fixed weights cut the batch as asked and, in
// deterministic mode, train the very model of the even cut; auto measures without
// --deterministic; the epoch rows report the smallest and largest share; malformed weights
// fail before any rank starts.
TEST_F(TrainMp, DdpBatchSplitCutsAsAskedAndKeepsTheModel) {
  const std::string common = "-n 2 " + data() + "--epochs 2 --batch 48 --optimizer momentum --seed 3 ";
  std::map<std::string, nlohmann::json> runs;
  for (const char* how : {"even", "3,1", "auto"})
    for (const char* det : {"", "--deterministic "}) {
      const std::string name = std::string(how) + (*det ? "-det" : "");
      const std::string json = file("split-" + name + ".json");
      Result r = run(common + det + "--batch-split " + how + " --json " + json);
      ASSERT_EQ(r.code, 0) << name << "\n" << r.output;
      runs[name] = load(json);
      ASSERT_EQ(runs[name]["epoch_rows"].size(), 2u) << runs[name].dump();
      // Every 2-rank epoch row carries the straggler figures (parallel/stragglers.h): the mean
      // rank's wait behind the slowest compute, under the epoch's step; the most often slowest
      // rank, slowest in at least half the steps (one of two ranks is, in every step).
      for (const auto& row : runs[name]["epoch_rows"]) {
        const double wait_ms = row.at("straggler_wait_ms").get<double>();
        const double step_ms = 1e3 * 48 / row["examples_per_second"].get<double>();  // a batch of 48
        EXPECT_GE(wait_ms, 0) << name;
        EXPECT_LT(wait_ms, step_ms) << name;
        const double slowest = row.at("slowest_rank").get<double>();
        EXPECT_TRUE(slowest == 0 || slowest == 1) << name;
        EXPECT_GE(row.at("slowest_rank_share").get<double>(), 0.5) << name;
        EXPECT_LE(row.at("slowest_rank_share").get<double>(), 1.0) << name;
      }
      EXPECT_NE(r.output.find("stragglers: the ranks waited"), std::string::npos) << r.output;
    }
  EXPECT_FALSE(runs["even"]["epoch_rows"][0].contains("batch_share_min"));
  EXPECT_FALSE(runs["auto-det"]["epoch_rows"][0].contains("batch_share_min"));
  EXPECT_EQ(runs["3,1"]["epoch_rows"][0]["batch_share_min"].get<double>(), 0.25);
  EXPECT_EQ(runs["3,1"]["epoch_rows"][0]["batch_share_max"].get<double>(), 0.75);
  const auto& a = runs["auto"]["epoch_rows"][1];
  EXPECT_NEAR(a["batch_share_min"].get<double>() + a["batch_share_max"].get<double>(), 1.0, 1e-9);
  // Deterministic: the parameters, hence the test loss, are the even cut's bit for bit.
  EXPECT_EQ(runs["3,1-det"]["test_loss"].get<double>(), runs["even-det"]["test_loss"].get<double>());
  EXPECT_EQ(runs["auto-det"]["test_loss"].get<double>(), runs["even-det"]["test_loss"].get<double>());
  // Float: the same model to rounding.
  EXPECT_NEAR(runs["3,1"]["test_loss"].get<double>(), runs["even"]["test_loss"].get<double>(),
              1e-4 * runs["even"]["test_loss"].get<double>());
  // Over TCP (no shared-memory context, so nothing says the ranks share cores) auto measures.
  Result tcp = run(common + "--transport tcp --json " + file("split-tcp.json"));
  ASSERT_EQ(tcp.code, 0) << tcp.output;
  const nlohmann::json over_tcp = load(file("split-tcp.json"));
  EXPECT_TRUE(over_tcp["epoch_rows"][1].contains("batch_share_min"));
  // The run records its fabric, which its prediction prices (plan/fabric.cc); ddp's default
  // ZeRO stage over tcp is 0 (train/config.cc).
  EXPECT_EQ(over_tcp["transport"], "tcp");
  EXPECT_EQ(over_tcp["hosts"], 1);
  EXPECT_EQ(over_tcp["prediction"]["fabric"]["transport"], "tcp") << over_tcp["prediction"].dump();
  EXPECT_EQ(over_tcp["prediction"]["layout"].get<std::string>().find("zero"), std::string::npos)
      << over_tcp["prediction"].dump();
  EXPECT_EQ(runs["even"]["transport"], "shm");
  // --baseline's one-rank run takes no per-rank weights.
  Result base = run(common + "--batch-split 3,1 --baseline");
  ASSERT_EQ(base.code, 0) << base.output;
  EXPECT_NE(base.output.find("baseline 1 rank:"), std::string::npos) << base.output;
  Result bad = run(common + "--batch-split 1,2,3");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("gives 3 weights for 2 ranks"), std::string::npos) << bad.output;
  bad = run(common + "--batch-split fast");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("--batch-split takes auto, even, measured or one positive weight per rank"),
            std::string::npos)
      << bad.output;
  bad = run(common + "--batch-split 1,-1");
  EXPECT_EQ(bad.code, 2);
}

TEST_F(TrainMp, EveryStrategyResumesAfterAKilledRankWithIdenticalLosses) {
  const std::vector<std::string> strategies = {
      "--strategy ps --sync --deterministic", "--strategy localsgd --sync-every 3",
      "--strategy gossip --topology ring", "--strategy fedavg --clients 4 --client-fraction 0.5"};
  for (const std::string& s : strategies) {
    const std::string common = "-n 3 " + data() + "--epochs 3 --batch 24 --optimizer momentum --seed 5 " + s + " ";
    fs::remove_all(file("ck"));
    Result full = run(common + "--json " + file("full.json"));
    ASSERT_EQ(full.code, 0) << s << "\n" << full.output;
    Result killed = run(common + "--checkpoint " + file("ck"), "DTRAIN_FAULT_KILL=2:2");
    EXPECT_NE(killed.code, 0) << s;
    EXPECT_NE(killed.output.find("rank 2"), std::string::npos) << s << "\n" << killed.output;
    Result resumed = run(common + "--checkpoint " + file("ck") + " --resume --json " + file("resumed.json"));
    ASSERT_EQ(resumed.code, 0) << s << "\n" << resumed.output;
    auto a = load(file("full.json")), b = load(file("resumed.json"));
    // The launcher stops the survivors as soon as rank 2 dies, possibly before they saved
    // epoch 2: then every rank agrees on epoch 1.
    EXPECT_GE(b["resumed_from_epoch"].get<int>(), 1) << s;
    EXPECT_LE(b["resumed_from_epoch"].get<int>(), 2) << s;
    ASSERT_EQ(b["epoch_rows"].size(), 3u) << s;
    for (size_t e = 0; e < 3; ++e)
      EXPECT_EQ(a["epoch_rows"][e]["train_loss"].get<double>(), b["epoch_rows"][e]["train_loss"].get<double>())
          << s << " epoch " << e + 1;
    EXPECT_EQ(a["test_loss"].get<double>(), b["test_loss"].get<double>()) << s;
  }
}

TEST_F(TrainMp, ResumeAgreesOnTheEpochEveryRankHas) {
  const std::string common = "-n 2 " + data() + "--epochs 3 --batch 32 --deterministic --seed 4 ";
  Result full = run(common + "--json " + file("full.json"));
  ASSERT_EQ(full.code, 0) << full.output;
  ASSERT_EQ(run(common + "--checkpoint " + file("ck")).code, 0);
  // Simulate a crash while saving epoch 3: rank 0 saved it, rank 1 still has epoch 2 only.
  fs::remove(file("ck/checkpoint.rank-1.dtc"));
  fs::rename(file("ck/checkpoint.rank-1.prev.dtc"), file("ck/checkpoint.rank-1.dtc"));
  Result resumed = run(common + "--checkpoint " + file("ck") + " --resume --json " + file("resumed.json"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  auto a = load(file("full.json")), b = load(file("resumed.json"));
  EXPECT_EQ(b["resumed_from_epoch"], 2);
  EXPECT_EQ(a["test_loss"].get<double>(), b["test_loss"].get<double>());
}

TEST_F(TrainMp, EveryStrategyRunsThroughTheLauncherAndReportsItsMetrics) {
  struct Case {
    std::string flags, metric;
  };
  const std::vector<Case> cases = {
      {"--strategy localsgd --sync-every 2", "averages"},
      {"--strategy ps --sync", "pushes"},
      {"--strategy ps --staleness 1", "staleness_mean"},
      {"--strategy gossip --topology ring", "consensus_distance"},
      {"--strategy fedavg --clients 3 --client-fraction 1 --local-epochs 2", "client_examples"},
  };
  for (const Case& c : cases) {
    Result r = run("-n 3 " + data() + "--epochs 4 --batch 24 " + c.flags + " --json " + file("s.json"));
    ASSERT_EQ(r.code, 0) << c.flags << "\n" << r.output;
    auto j = load(file("s.json"));
    EXPECT_GT(j["test_accuracy"].get<double>(), 0.7) << c.flags;
    EXPECT_TRUE(j["epoch_rows"][3].contains(c.metric)) << c.flags << " " << j["epoch_rows"][3].dump();
    EXPECT_EQ(j["ranks"].size(), 3u) << c.flags;
  }
  Result s = run("-n 2 " + data() + "--epochs 2 --strategy search --search \"lr=0.1,0.01;batch=16,64\" --json " +
                 file("search.json"));
  ASSERT_EQ(s.code, 0) << s.output;
  auto j = load(file("search.json"));
  ASSERT_EQ(j["trials"].size(), 4u);
  EXPECT_GE(j["trials"][0]["test_accuracy"].get<double>(), j["trials"][3]["test_accuracy"].get<double>());
  Result e = run("-n 2 " + data() + "--epochs 2 --strategy ensemble --members 3 --json " + file("ens.json"));
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("ensemble of 3"), std::string::npos) << e.output;
  auto k = load(file("ens.json"));
  EXPECT_EQ(k["members"].size(), 3u);
  EXPECT_GT(k["test_accuracy"].get<double>(), 0.6);
}

// SIGTERM to `dtrain train -n 2` stops it through the launcher's own path (every rank
// stopped, "interrupted by SIGTERM", 128 + 15), not by the signal's default action on the
// launcher's cores-sampling thread; and the sampler leaves no file in TMPDIR. The test waits
// (bounded) until the launcher has started both ranks, then signals it.
TEST_F(TrainMp, SigtermStopsTheRunThroughTheLauncherAndLeavesNoFile) {
  fs::create_directories(file("tmp"));
  const std::string cmd = "TMPDIR=" + file("tmp") + " " + dtrain::testing::dtrain_bin() + " train -n 2 " + data() +
                          "--epochs 100000 --batch 32 > " + file("out.txt") + " 2>&1 & pid=$!; i=0; "
                          "while [ $(pgrep -P $pid | wc -l) -lt 2 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; "
                          "kill -TERM $pid; wait $pid; echo launcher=$?; cat " + file("out.txt") + "; echo left=$(ls " +
                          file("tmp") + " | wc -l)";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  EXPECT_NE(out.find("launcher=143"), std::string::npos) << out;
  EXPECT_NE(out.find("interrupted by SIGTERM"), std::string::npos) << out;
  EXPECT_NE(out.find("left=0"), std::string::npos) << out;
}

TEST_F(TrainMp, MalformedDistributedFlagsFailBeforeStartingRanks) {
  Result r = run("-n 2 --strategy ddp --threads 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("drop --threads 2"), std::string::npos) << r.output;
  r = run("-n 2 --sync-every 4");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--sync-every applies to --strategy localsgd"), std::string::npos) << r.output;
  r = run("--baseline");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--baseline is for multi-rank strategies"), std::string::npos) << r.output;
  r = run("-n 2 --algo warp");
  EXPECT_EQ(r.code, 2);
  r = run("-n 2 --strategy ps --servers 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("needs at least 3 ranks"), std::string::npos) << r.output;
  r = run("-n 2 --strategy ps --sync --staleness 2");
  EXPECT_EQ(r.code, 2);
  r = run("-n 2 --strategy search --search \"depth=3\"");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("unknown key 'depth'"), std::string::npos) << r.output;
  r = run("-n 2 --strategy gossip --topology star");
  EXPECT_EQ(r.code, 2);
  r = run("-n 2 --strategy gossip --deterministic");
  EXPECT_EQ(r.code, 2);
  r = run("-n 2 --transport carrier-pigeon");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--transport must be auto, shm or tcp"), std::string::npos) << r.output;
}

}  // namespace

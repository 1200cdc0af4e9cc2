// `dtrain bench p2p` end to end: two ranks, both transports, JSON rows with real numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "plan/cluster.h"
#include "support/subprocess.h"

namespace dtrain {
namespace {

TEST(BenchP2p, PrintsTableAndWritesJson) {
  std::string bin = testing::env_path("DTRAIN_BIN");
  std::string json = "/tmp/dtrain-p2p-" + std::to_string(::getpid()) + ".json";
  auto r = testing::run_command(bin + " bench p2p -n 2 --transport shm,tcp --sizes 8:4K --seconds 0.01 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("transport shm"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("transport tcp"), std::string::npos) << r.output;
  std::ifstream in(json);
  ASSERT_TRUE(in.good()) << "no JSON written: " << r.output;
  nlohmann::json rows = nlohmann::json::parse(in);
  std::remove(json.c_str());
  // Sizes 8 x4 up to 4K: 8, 32, 128, 512, 2048, then 4096 as the last point; per transport.
  ASSERT_EQ(rows.size(), 2u * 6u) << rows.dump();
  for (const auto& row : rows) {
    EXPECT_TRUE(row["transport"] == "shm" || row["transport"] == "tcp") << row;
    EXPECT_EQ(row["world_size"], 2);
    EXPECT_GT(row["latency_us"].get<double>(), 0.0) << row;
    EXPECT_GT(row["bandwidth_gbps"].get<double>(), 0.0) << row;
    EXPECT_GE(row["iters"].get<int64_t>(), 3) << row;
  }
  EXPECT_EQ(rows.back()["size_bytes"], 4096);
}

// Ranks started by the launcher read the collectives' settings as any job does: a forced
// algorithm runs, and the pred column comes from the calibration file (the ranks used to
// build their communicator with the defaults and ignore both).
TEST(BenchCollectivesProcesses, ReadTheCollectiveSettings) {
  std::string bin = testing::env_path("DTRAIN_BIN");
  const std::string base = "/tmp/dtrain-collset-" + std::to_string(::getpid());
  {
    std::ofstream cal(base + ".cal.json");
    cal << R"({"shm": {"alpha_us": 3, "beta_gbps": 2, "gamma_gbps": 4}})";
  }
  auto r = testing::run_command("DTRAIN_ALLREDUCE_ALGO=ring DTRAIN_CALIBRATION=" + base + ".cal.json " + bin +
                                " bench collectives -n 2 --op allreduce --sizes 64K --seconds 0.01 --json " + base + ".json");
  std::ifstream in(base + ".json");
  nlohmann::json rows = in.good() ? nlohmann::json::parse(in) : nlohmann::json();
  std::remove((base + ".json").c_str());
  std::remove((base + ".cal.json").c_str());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("calibrated(" + base + ".cal.json)"), std::string::npos) << r.output;
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["algo"], "ring") << rows.dump();
}

// The calibration's tensor-parallel blocks: the job's ranks are one group; rank 0 writes one
// row per item count, which the calibration file keeps as they are.
TEST(BenchTpBlocks, TimesTheBlockAcrossTheJobsRanks) {
  std::string bin = testing::env_path("DTRAIN_BIN");
  const std::string out = "/tmp/dtrain-tpblocks-" + std::to_string(::getpid()) + ".json";
  auto r = testing::run_command(bin + " bench tp-blocks -n 2 --spec gpt:layers=1,heads=2,width=16,context=8 --items 1,3 " +
                                "--seconds 0.01 --json " + out);
  std::ifstream in(out);
  nlohmann::json rows = in.good() ? nlohmann::json::parse(in) : nlohmann::json();
  std::remove(out.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  EXPECT_EQ(rows[1]["tp"], 2);
  EXPECT_EQ(rows[1]["items"], 3);
  EXPECT_GT(rows[1]["fwd_s"].get<double>(), 0.0);
  EXPECT_GT(rows[1]["bwd_s"].get<double>(), 0.0);
  EXPECT_EQ(plan::tp_blocks_from_json(rows, out).size(), 1u);  // what the calibration file accepts
  r = testing::run_command(bin + " bench tp-blocks -n 2 --items 2,x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--items: 'x'"), std::string::npos) << r.output;
  r = testing::run_command(bin + " bench tp-blocks -n 3 --spec gpt:layers=1,heads=2,width=16,context=8 --items 1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("heads must be a multiple of the ranks"), std::string::npos) << r.output;
}

// With --tp the job's ranks split into groups of that degree, timing at once; the rows say
// among how many ranks, and the calibration file keeps them as a figure of their own.
TEST(BenchTpBlocks, GroupsSideBySideSayAmongHowManyRanks) {
  std::string bin = testing::env_path("DTRAIN_BIN");
  const std::string out = "/tmp/dtrain-tpgroups-" + std::to_string(::getpid()) + ".json";
  auto r = testing::run_command(bin + " bench tp-blocks -n 4 --tp 2 --spec gpt:layers=1,heads=2,width=16,context=8 " +
                                "--items 2 --seconds 0.01 --json " + out);
  std::ifstream in(out);
  nlohmann::json rows = in.good() ? nlohmann::json::parse(in) : nlohmann::json();
  std::remove(out.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["tp"], 2);
  EXPECT_EQ(rows[0]["ranks"], 4);
  EXPECT_GT(rows[0]["fwd_s"].get<double>(), 0.0);
  auto figures = plan::tp_blocks_from_json(rows, out);
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_EQ(figures[0].ranks, 4);
  r = testing::run_command(bin + " bench tp-blocks -n 4 --tp 3 --items 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tp 3 must divide -n 4"), std::string::npos) << r.output;
}

TEST(BenchP2p, BadFlagsAreClearErrors) {
  std::string bin = testing::env_path("DTRAIN_BIN");
  auto r = testing::run_command(bin + " bench p2p -n 2 --sizes 4K:8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--sizes 4K:8"), std::string::npos) << r.output;
  r = testing::run_command(bin + " bench p2p -n 2 --transport udp");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown transport 'udp'"), std::string::npos) << r.output;
  r = testing::run_command(bin + " bench p2p -n 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("needs -n 2 or more"), std::string::npos) << r.output;
}

// `dtrain bench collectives --window` at 3 ranks (uneven blocks), sizes 4K and 1M, checked,
// with `flags` added: its exit code and output, and its JSON rows (null where none were written).
struct WindowBench {
  int exit_code;
  std::string output;
  nlohmann::json rows;
};
WindowBench window_bench(const std::string& flags) {
  const std::string json = "/tmp/dtrain-window-" + std::to_string(::getpid()) + ".json";
  auto r = testing::run_command(testing::env_path("DTRAIN_BIN") +
                                " bench collectives -n 3 --transport shm --op allreduce --window " + flags +
                                " --sizes 4K,1M --seconds 0.01 --check --json " + json);
  std::ifstream in(json);
  WindowBench out{r.exit_code, r.output, in.good() ? nlohmann::json::parse(in) : nlohmann::json()};
  std::remove(json.c_str());
  return out;
}

}  // namespace
// `dtrain bench collectives --window`: ddp's in-place all-reduce in a shared-memory window,
// checked element by element at 3 ranks (uneven blocks) and labelled as such.
TEST(BenchCollectivesWindow, ChecksAndLabelsTheWindowAllreduce) {
  const WindowBench r = window_bench("");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_FALSE(r.rows.is_null()) << "no JSON written: " << r.output;
  const nlohmann::json& rows = r.rows;
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  for (const auto& row : rows) {
    EXPECT_EQ(row["wrong"], 0) << row;
    EXPECT_EQ(row["algo"].get<std::string>().rfind("window/", 0), 0u) << row;
    EXPECT_GT(row["time_us"].get<double>(), 0.0) << row;
  }
}

// --touch adds, after each size's plain row, the same call as ddp's step makes it: the
// gradient written from the parameters before it, the sum applied after it. That row is
// labelled window+touch, carries the touches' own time and no prediction (the call is
// not alone in it), and the call still sums right.
TEST(BenchCollectivesWindow, TouchRowsFollowTheirPlainRows) {
  const WindowBench r = window_bench("--touch");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_FALSE(r.rows.is_null()) << "no JSON written: " << r.output;
  const nlohmann::json& rows = r.rows;
  ASSERT_EQ(rows.size(), 4u) << rows.dump();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const bool touch = i % 2 == 1;
    EXPECT_EQ(row["wrong"], 0) << row;
    EXPECT_EQ(row["size_bytes"], rows[i - i % 2]["size_bytes"]) << row;
    EXPECT_EQ(row["algo"].get<std::string>().rfind(touch ? "window+touch/" : "window/", 0), 0u) << row;
    if (touch) {
      EXPECT_GT(row["touch_us"].get<double>(), 0.0) << row;
      EXPECT_EQ(row["predicted_from"], "none") << row;
    } else {
      EXPECT_EQ(row["touch_us"].get<double>(), 0.0) << row;
    }
  }
}

}  // namespace dtrain

// dtrain bench calibrate end to end (ranks as threads, the shortest timings): the file it
// writes carries what the planner reads, `plan collective` prices from it, and the two
// refreshes (--slowdown-only, --probe-only) replace it whole and keep the rest. Labelled slow
// (the file name): the whole calibration takes about two minutes on 2 cores, over five under
// ASan, so the sanitizer runs leave it out and the README's test command runs it.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "cli/bench_files.h"

namespace dtrain::cli {
namespace {

using dtrain::testing::read_json;
using dtrain::testing::temp_path;

TEST(BenchCalibrateCli, WritesAFileThePlannerReads) {
  std::string path = temp_path("calib.json");
  EXPECT_EQ(bench_calibrate({"-n", "2", "--threads", "--transport", "shm", "--seconds", "0.02", "--out", path}), 0);
  auto j = read_json(path);
  for (const char* kind : {"shm", "tcp"}) {
    ASSERT_TRUE(j.contains(kind)) << j.dump();
    EXPECT_GT(j[kind]["beta_gbps"].get<double>(), 0);
    EXPECT_GT(j[kind]["gamma_gbps"].get<double>(), 0);
    EXPECT_GE(j[kind]["alpha_us"].get<double>(), 0);
  }
  EXPECT_EQ(plan_main({"collective", "--op", "allreduce", "-n", "8", "--size", "64M", "--calibration", path}), 0);
  // The planner's sized links: the 2-rank all-reduce and exchange by size, and 4 and 8 ranks.
  const auto& intra = j["links_by_size"]["intra"];
  EXPECT_EQ(intra["allreduce"].size(), intra["exchange"].size());
  EXPECT_GE(intra["allreduce"].size(), 4u) << intra.dump();
  EXPECT_TRUE(intra["allreduce_by_ranks"].contains("4")) << intra.dump();
  EXPECT_GT(j["compute"]["probe_pass_s"].get<double>(), 0);
  EXPECT_GT(j["compute"]["speed_probe_s"].get<double>(), 0);  // the pace the unit lines were taken at
  // --slowdown-only refreshes the curve and records the probes, nothing else.
  EXPECT_EQ(bench_calibrate({"--slowdown-only", "--out", path}), 0);
  auto k = read_json(path);
  EXPECT_GT(k["compute"]["probe_now_pass_s"].get<double>(), 0);
  EXPECT_GT(k["compute"]["speed_probe_now_s"].get<double>(), 0);
  EXPECT_TRUE(k["compute"].contains("handoff")) << k["compute"].dump();
  EXPECT_EQ(k["shm"], j["shm"]);
  EXPECT_EQ(k["links_by_size"], j["links_by_size"]);
  // --probe-only re-times the speed probe alone; the file is replaced whole (no temporary
  // left beside it) and keeps everything else.
  k["compute"].erase("speed_probe_now_s");
  {
    std::ofstream o(path);
    o << k.dump(2);
  }
  EXPECT_EQ(bench_calibrate({"--probe-only", "--out", path}), 0);
  auto q = read_json(path);
  EXPECT_GT(q["compute"]["speed_probe_now_s"].get<double>(), 0);
  EXPECT_EQ(q["compute"]["slowdown"], k["compute"]["slowdown"]);
  EXPECT_EQ(q["links_by_size"], j["links_by_size"]);
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string stem = path.substr(path.rfind('/') + 1) + ".tmp.";
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_NE(e.path().filename().string().rfind(stem, 0), 0u) << e.path();
  // The two refreshes are one or the other; a file without a compute section is refused.
  EXPECT_THROW(bench_calibrate({"--probe-only", "--slowdown-only", "--out", path}), InvalidArgument);
  {
    std::ofstream o(path);
    o << R"({"version": 3, "shm": {"alpha_us": 2, "beta_gbps": 3, "gamma_gbps": 4}})";
  }
  EXPECT_THROW(bench_calibrate({"--probe-only", "--out", path}), InvalidArgument);
  std::remove(path.c_str());
  EXPECT_THROW(bench_calibrate({"--probe-only", "--out", path}), IoError);  // no file at all
}

}  // namespace
}  // namespace dtrain::cli

// The launcher's sampler of the cores' distance: its file while it runs, none after, and the
// verdict a pass takes from its samples.
#include "cli/cores_sampler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace dtrain::cli {
namespace {

TEST(CoresSampler, KeepsItsCountsInAPrivateFileWhileItRuns) {
  std::string path;
  {
    CoresSampler s(::testing::TempDir());
    ASSERT_TRUE(s.running());
    path = s.path();
    EXPECT_EQ(::access(path.c_str(), R_OK), 0) << path;
    const auto [close, far] = s.counts();
    EXPECT_GE(close, 0);
    EXPECT_GE(far, 0);
    // Another process reads the same counts from the file (or none yet, before the first write).
    if (const auto read = read_sampler_file(path)) {
      EXPECT_LE(read->first + read->second, s.counts().first + s.counts().second);
    }
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << path << " left behind";
  EXPECT_FALSE(read_sampler_file(path).has_value());
}

// A launcher's job sees the sampler's file named in DTRAIN_CORES_SAMPLES for its length and
// not after, and learns the samples taken meanwhile.
TEST(CoresSampler, AJobRunsWithTheSamplersFileExportedAndThenWithout) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: nothing to sample against";
  std::string seen;
  std::pair<int64_t, int64_t> counts{-1, -1};
  const int rc = run_sampled_job(
      [&] {
        const char* path = std::getenv("DTRAIN_CORES_SAMPLES");
        seen = path ? path : "";
        return 7;
      },
      kSampleEvery, ::testing::TempDir(), &counts);
  EXPECT_EQ(rc, 7);
  EXPECT_FALSE(seen.empty());
  EXPECT_EQ(std::getenv("DTRAIN_CORES_SAMPLES"), nullptr);
  EXPECT_NE(::access(seen.c_str(), F_OK), 0) << seen << " left behind";
  EXPECT_GE(counts.first, 0);
  EXPECT_GE(counts.second, 0);
  // The launched side reads it through the settings; unset, there is nothing to read.
  EXPECT_FALSE(launcher_samples(Settings::from_map({})));
}

TEST(CoresSampler, APassTakesTheVerdictOfThreeQuartersOfItsSamples) {
  EXPECT_EQ(sampled_verdict({0, 0}, {9, 1}), "close");
  EXPECT_EQ(sampled_verdict({0, 0}, {1, 3}), "far");
  EXPECT_EQ(sampled_verdict({0, 0}, {5, 5}), "");  // mixed: no verdict
  EXPECT_EQ(sampled_verdict({0, 0}, {2, 0}), "");  // too few
  EXPECT_EQ(sampled_verdict({10, 4}, {10, 8}), "far");  // only the samples since `before`
  EXPECT_EQ(sampled_verdict({0, 0}, {6, 4}, 0.6), "close");
}

}  // namespace
}  // namespace dtrain::cli

// The launcher's sampler of the cores' distance: its file while it runs, none after, and the
// verdict a pass takes from its samples.
#include "cli/cores_sampler.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

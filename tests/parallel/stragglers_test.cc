// parallel/stragglers.h: the mean rank's wait behind each step's slowest compute, and which
// rank was slowest how often, from an all-gather's rank-by-rank layout.
#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "parallel/stragglers.h"

namespace dtrain {
namespace {

TEST(Stragglers, WaitIsTheSlowestComputeLessTheMeanStepByStep) {
  // Rank 0: 1, 1, 1, 1 s; rank 1: 3, 3, 1, 1 s. Steps 0-1 wait 3 - 2 = 1 s each, steps 2-3
  // none; each rank is slowest twice (the ties of steps 2-3 go to rank 0), so rank 0 (the
  // lower of the tie) with half the steps.
  const std::vector<float> all{1, 1, 1, 1, 3, 3, 1, 1};
  const StragglerStats s = straggler_stats(all, 2, 4);
  EXPECT_EQ(s.steps, 4);
  EXPECT_DOUBLE_EQ(s.wait_s, 2.0);
  EXPECT_DOUBLE_EQ(s.slowest_compute_s, 8.0);
  EXPECT_EQ(s.slowest, 0);
  EXPECT_DOUBLE_EQ(s.slowest_share, 0.5);
}

TEST(Stragglers, OneRankAlwaysSlowestIsPersistent) {
  // Three ranks, rank 2 slowest in every step: waits (4 - 3) + (6 - 4) = 3 s.
  const std::vector<float> all{2, 3, 3, 3, 4, 6};
  const StragglerStats s = straggler_stats(all, 3, 2);
  EXPECT_NEAR(s.wait_s, 3.0, 1e-12);
  EXPECT_EQ(s.slowest, 2);
  EXPECT_DOUBLE_EQ(s.slowest_share, 1.0);
}

TEST(Stragglers, EqualRanksWaitNothingAndBadSizesAreRefused) {
  const std::vector<float> same{2, 5, 2, 5};
  EXPECT_DOUBLE_EQ(straggler_stats(same, 2, 2).wait_s, 0.0);
  EXPECT_EQ(straggler_stats({}, 4, 0).steps, 0);
  EXPECT_EQ(straggler_stats({}, 4, 0).slowest_share, 0.0);
  const std::vector<float> five{1, 2, 3, 4, 5};
  EXPECT_THROW(straggler_stats(five, 2, 2), InvalidArgument);
  EXPECT_THROW(straggler_stats(same, 0, 2), InvalidArgument);
}

}  // namespace
}  // namespace dtrain

// BatchSplit (parallel/batch_split.h): the even split is data::batch_share's; weighted cuts
// tile the batch at granule boundaries with a granule for every rank; the measured weights
// move halfway to the ranks' rates within a band around the even share, ignore a period with
// nothing measured, and
// come out the same on every rank of a real communicator.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "base/error.h"
#include "data/sampler.h"
#include "parallel/batch_split.h"
#include "support/world.h"

namespace dtrain {
namespace {

TEST(BatchSplit, EvenIsTheSamplersBatchShare) {
  for (int world = 1; world <= 4; ++world)
    for (int64_t granule : {1, 3, 8})
      for (int64_t len = 0; len <= 50; ++len) {
        BatchSplit even(world, granule, /*measured=*/false);
        for (int r = 0; r < world; ++r) EXPECT_EQ(even.share(len, r), data::batch_share(len, r, world, granule));
      }
  // Equal weights are the even split too, and a world of one is never measured.
  BatchSplit equal(3, 1, false, 16, {2, 2, 2});
  EXPECT_TRUE(equal.even());
  EXPECT_FALSE(BatchSplit(1, 1, true).measured());
}

TEST(BatchSplit, WeightedCutsTileTheBatchAtGranules) {
  const std::vector<std::vector<double>> cases = {{3, 1}, {0.7, 0.1, 0.2}, {1, 100, 1, 1}, {5, 1, 1}};
  for (const auto& w : cases)
    for (int64_t granule : {1, 8})
      for (int64_t len = 1; len <= 300; len += 7) {
        const int world = static_cast<int>(w.size());
        BatchSplit split(world, granule, false, 16, w);
        SCOPED_TRACE("world " + std::to_string(world) + " granule " + std::to_string(granule) + " len " +
                     std::to_string(len));
        const int64_t granules = (len + granule - 1) / granule;
        int64_t at = 0;
        for (int r = 0; r < world; ++r) {
          auto [lo, hi] = split.share(len, r);
          EXPECT_EQ(lo, at);
          EXPECT_EQ(lo % granule, 0);
          if (granules >= world) {
            EXPECT_GT(hi, lo) << "rank " << r << " got nothing";
          }
          at = hi;
        }
        EXPECT_EQ(at, len);
      }
  // Large batches follow the weights to within a granule: 3:1 of 256 is 192 and 64.
  BatchSplit three_one(2, 1, false, 16, {3, 1});
  EXPECT_EQ(three_one.share(256, 0), std::make_pair(int64_t{0}, int64_t{192}));
  EXPECT_EQ(three_one.share(256, 1), std::make_pair(int64_t{192}, int64_t{256}));
}

TEST(BatchSplit, RefusesWeightsThatAreNotOnePositiveNumberPerRank) {
  EXPECT_THROW(BatchSplit(2, 1, false, 16, {1, 2, 3}), InvalidArgument);
  EXPECT_THROW(BatchSplit(2, 1, false, 16, {1, 0}), InvalidArgument);
  EXPECT_THROW(BatchSplit(2, 1, false, 16, {1, NAN}), InvalidArgument);
  EXPECT_THROW(BatchSplit(2, 0, false), InvalidArgument);
}

TEST(BatchSplit, NextWeightsMoveHalfwayToTheRatesWithinTheBand) {
  // Rank 1 took 1.2x as long for as many items: rates' shares 0.545 and 0.455, in the band.
  std::vector<double> w = BatchSplit::next_weights({0.5, 0.5}, {1.0, 100, 1.2, 100});
  EXPECT_NEAR(w[0], (0.5 + 1.2 / 2.2) / 2, 1e-12);
  EXPECT_NEAR(w[1], (0.5 + 1.0 / 2.2) / 2, 1e-12);
  // Equal times for the current shares is the fixed point.
  w = BatchSplit::next_weights({0.55, 0.45}, {1.0, 55, 1.0, 45});
  EXPECT_NEAR(w[0], 0.55, 1e-12);
  EXPECT_NEAR(w[1], 0.45, 1e-12);
  // Twice as slow, or stalled: the target stops at the band's edge, 1 -+ kMeasuredSpread
  // times the even share.
  w = BatchSplit::next_weights({0.5, 0.5}, {1.0, 100, 2.0, 100});
  EXPECT_NEAR(w[0], (0.5 + 0.5 * (1 + kMeasuredSpread)) / 2, 1e-12);
  w = BatchSplit::next_weights({0.5, 0.5}, {100.0, 1, 1.0, 100});
  EXPECT_NEAR(w[0], (0.5 + 0.5 * (1 - kMeasuredSpread)) / 2, 1e-12);
  // Many ranks, rates far apart: every weight ends in the band and they sum to 1, however
  // often the weights move.
  w = {0.25, 0.25, 0.25, 0.25};
  for (int period = 0; period < 20; ++period) w = BatchSplit::next_weights(w, {1.0, 1000, 1.0, 10, 1.0, 100, 1.0, 1});
  double sum = 0;
  for (double x : w) {
    EXPECT_GE(x, 0.25 * (1 - kMeasuredSpread) - 1e-12);
    EXPECT_LE(x, 0.25 * (1 + kMeasuredSpread) + 1e-12);
    sum += x;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(w[0], 0.25 * (1 + kMeasuredSpread), 1e-6);
  EXPECT_LT(w[3], w[1]);  // the order of the rates survives
  EXPECT_LT(w[1], w[2]);
  // Nothing measured on some rank: the weights stay.
  w = BatchSplit::next_weights({0.55, 0.45}, {0.0, 10, 1.0, 10});
  EXPECT_EQ(w, (std::vector<double>{0.55, 0.45}));
  EXPECT_THROW(BatchSplit::next_weights({0.5, 0.5}, {1.0, 1}), InvalidArgument);
}

TEST(BatchSplit, RebalanceGivesEveryRankTheSameWeights) {
  std::mutex mu;
  std::vector<std::vector<double>> got(3);
  testing::run_world(3, TransportKind::kShm, [&](Communicator& comm) {
    BatchSplit split(3, 1, /*measured=*/true, /*period=*/4);
    for (int step = 0; step < 4; ++step) {
      EXPECT_FALSE(split.due());
      // Rank r takes r + 1 seconds for 10 items each step.
      split.record(1.0 + comm.rank(), 10);
    }
    EXPECT_TRUE(split.due());
    split.rebalance(comm);
    EXPECT_FALSE(split.due());
    std::lock_guard<std::mutex> lock(mu);
    got[static_cast<size_t>(comm.rank())] = split.weights();
  });
  const std::vector<double> want =
      BatchSplit::next_weights({1.0 / 3, 1.0 / 3, 1.0 / 3}, {4.0, 40, 8.0, 40, 12.0, 40});
  for (const auto& w : got) EXPECT_EQ(w, want);
  EXPECT_GT(want[0], want[1]);
  EXPECT_GT(want[1], want[2]);
}

}  // namespace
}  // namespace dtrain

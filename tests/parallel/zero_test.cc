// ZeRO: stages 1, 2 and 3 give the losses and parameters of plain data parallelism (stage 0)
// and of one rank with the whole minibatch; bytes per rank follow the formulas (16P for
// stage 0 with float32 AdamW; stage 3 on 4 ranks at most 30% of that); the bus volume of
// stage 3 is about 1.5x plain all-reduce; the shard arithmetic covers every element once.
#include <gtest/gtest.h>

#include "base/error.h"
#include "parallel/mp_test_util.h"
#include "parallel/zero.h"

namespace dtrain {
namespace {

using testing::max_diff;
using testing::tiny_mp;
using testing::train_mesh;

TEST(ZeroShard, CoversEveryElementOnce) {
  for (int64_t n : {1, 7, 8, 100, 101})
    for (int r : {1, 2, 3, 4, 8}) {
      int64_t next = 0;
      for (int q = 0; q < r; ++q) {
        auto [off, len] = zero_shard(n, r, q);
        if (len > 0) {
          EXPECT_EQ(off, next);
        }
        next = off + len;
      }
      EXPECT_EQ(next, n) << "n=" << n << " ranks=" << r;
    }
}

class ZeroStages : public ::testing::TestWithParam<int> {};

TEST_P(ZeroStages, EqualPlainDataParallelAndOneRank) {
  const int ranks = GetParam();
  const int steps = 3;
  MpConfig one = tiny_mp({1, 1, 1}, 1);
  testing::MpRun base = train_mesh(one, steps);
  MpConfig dp = tiny_mp({ranks, 1, 1}, 1);
  testing::MpRun plain = train_mesh(dp, steps);
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(plain.losses[s], base.losses[s], 2e-5f);
  EXPECT_LT(max_diff(plain.dense, base.dense), 2e-5f);
  for (int stage = 1; stage <= 3; ++stage) {
    SCOPED_TRACE("zero " + std::to_string(stage));
    MpConfig z = dp;
    z.zero = stage;
    testing::MpRun run = train_mesh(z, steps);
    for (int s = 0; s < steps; ++s) EXPECT_NEAR(run.losses[s], plain.losses[s], 2e-5f) << "step " << s;
    EXPECT_NEAR(run.val, plain.val, 2e-5f);
    EXPECT_LT(max_diff(run.dense, plain.dense), 2e-5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ZeroStages, ::testing::Values(2, 4));

TEST(ZeroMemory, BytesPerRankFollowTheFormulas) {
  const int n = 4;
  std::vector<MpStats> by_stage;
  for (int stage = 0; stage <= 3; ++stage) {
    MpConfig z = tiny_mp({n, 1, 1}, 1);
    z.zero = stage;
    by_stage.push_back(train_mesh(z, 1).stats[1]);
  }
  const double p = static_cast<double>(by_stage[0].model_params);
  // Stage 0: params 4P + grads 4P + AdamW moments 8P (the saved state adds a small header).
  EXPECT_EQ(by_stage[0].bytes.params, 4 * p);
  EXPECT_EQ(by_stage[0].bytes.grads, 4 * p);
  EXPECT_NEAR(by_stage[0].bytes.optimizer, 8 * p, 256);
  EXPECT_NEAR(by_stage[1].bytes.optimizer, 8 * p / n, 256);
  EXPECT_EQ(by_stage[1].bytes.grads, 4 * p);
  EXPECT_NEAR(by_stage[2].bytes.grads, 4 * p / n, 16);
  // Stage 3: everything / N (shards padded per unit: a few floats more).
  EXPECT_NEAR(static_cast<double>(by_stage[3].bytes.total()), 16 * p / n, 16 * 4 * 8 + 256);
  EXPECT_LE(by_stage[3].bytes.total(), 0.30 * by_stage[0].bytes.total());
  // Communication per step: stages 1 and 2 move what plain all-reduce moves (reduce-scatter +
  // all-gather); stage 3 about 1.5x.
  const double ar = by_stage[0].zero_comm.bus_bytes;
  EXPECT_EQ(by_stage[0].zero_comm.allreduce, 1);
  for (int stage : {1, 2}) {
    EXPECT_EQ(by_stage[static_cast<size_t>(stage)].zero_comm.allreduce, 0);
    EXPECT_EQ(by_stage[static_cast<size_t>(stage)].zero_comm.reduce_scatter, 1);
    EXPECT_NEAR(by_stage[static_cast<size_t>(stage)].zero_comm.bus_bytes / ar, 1.0, 0.01);
  }
  const double r3 = by_stage[3].zero_comm.bus_bytes / ar;
  EXPECT_GT(r3, 1.3);
  EXPECT_LE(r3, 1.51);
}

TEST(ZeroOptimizer, RefusesBadInput) {
  OptimizerConfig oc;
  EXPECT_THROW(ZeroOptimizer(nullptr, 3, 10, oc), InvalidArgument);
  ZeroOptimizer z(nullptr, 1, 10, oc);
  std::vector<float> p(10), g(9);
  EXPECT_THROW(z.step(p, g, 0.1f), InvalidArgument);
}

}  // namespace
}  // namespace dtrain

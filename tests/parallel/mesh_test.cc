// The DP x TP x PP mesh: coordinates and groups for several factorisations of 8 ranks, a
// refused factorisation, tensor parallelism alone matching one rank, and a 2x2x2 mesh on 8
// thread-ranks that trains a few steps with the 1-rank losses (ZeRO-1 over its DP groups too).
#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "base/error.h"
#include "coll/collectives.h"
#include "parallel/mesh.h"
#include "parallel/mp_test_util.h"

namespace dtrain {
namespace {

using testing::max_diff;
using testing::run_world;
using testing::tiny_mp;
using testing::train_mesh;

TEST(Mesh, CoordinatesAndGroups) {
  for (MeshShape shape : {MeshShape{2, 2, 2}, MeshShape{1, 2, 4}, MeshShape{4, 1, 2}, MeshShape{8, 1, 1}, MeshShape{1, 8, 1}}) {
    std::mutex mu;
    std::set<std::tuple<int, int, int>> coords;
    run_world(8, TransportKind::kShm, [&](Communicator& world) {
      Mesh m(world, shape);
      EXPECT_EQ(m.tp().size(), shape.tp);
      EXPECT_EQ(m.pp().size(), shape.pp);
      EXPECT_EQ(m.dp().size(), shape.dp);
      EXPECT_EQ(m.world_rank_of(m.dp_rank(), m.pp_rank(), m.tp_rank()), world.rank());
      // TP groups are consecutive world ranks.
      EXPECT_EQ(m.tp().world_rank(0), world.rank() - m.tp_rank());
      // Each group's members differ only in that group's coordinate: sum ranks over the group.
      int sum = world.rank();
      allreduce(m.pp(), &sum, 1, DType::kInt32, ReduceOp::kSum);
      int expect = 0;
      for (int p = 0; p < shape.pp; ++p) expect += m.world_rank_of(m.dp_rank(), p, m.tp_rank());
      EXPECT_EQ(sum, expect);
      std::lock_guard<std::mutex> lock(mu);
      coords.insert({m.dp_rank(), m.pp_rank(), m.tp_rank()});
    });
    EXPECT_EQ(coords.size(), 8u);
  }
}

TEST(Mesh, RefusesAShapeThatDoesNotFit) {
  run_world(4, TransportKind::kShm, [&](Communicator& world) {
    try {
      Mesh m(world, {2, 2, 2});
      ADD_FAILURE() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("job has 4"), std::string::npos) << e.what();
    }
  });
}

TEST(MeshTraining, TensorParallelAloneEqualsOneRank) {
  testing::MpRun a = train_mesh(tiny_mp({1, 1, 1}), 3), b = train_mesh(tiny_mp({1, 4, 1}), 3);
  for (size_t s = 0; s < a.losses.size(); ++s) EXPECT_NEAR(a.losses[s], b.losses[s], 2e-5f);
  EXPECT_LT(max_diff(a.dense, b.dense), 2e-5f);
  // Two all-reduces per block per direction per micro-batch, per step (tiny_gpt: 4 blocks, M = 2).
  const TpCounts& c = b.stats[0].tp;
  EXPECT_EQ(c.allreduce_bwd, 3 * 2 * 4 * 2);
  EXPECT_EQ(c.allreduce_fwd, 3 * 2 * 4 * 2 + 2 * 2 * 4);  // + the evaluation forwards (2 batches)
}

TEST(MeshTraining, TwoByTwoByTwoMatchesOneRank) {
  const int steps = 3;
  testing::MpRun one = train_mesh(tiny_mp({1, 1, 1}, 2), steps);
  MpConfig cfg = tiny_mp({2, 2, 2}, 2);
  testing::MpRun mesh = train_mesh(cfg, steps);
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(mesh.losses[s], one.losses[s], 3e-5f) << "step " << s;
  EXPECT_LT(one.losses.back(), one.losses.front());
  EXPECT_NEAR(mesh.val, one.val, 3e-5f);
  EXPECT_LT(max_diff(mesh.dense, one.dense), 3e-5f);
  cfg.zero = 1;
  cfg.schedule = "gpipe";
  testing::MpRun z = train_mesh(cfg, steps);
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(z.losses[s], one.losses[s], 3e-5f) << "zero-1 step " << s;
  // ZeRO-2 (gradient buffer freed between steps) under a pipeline: dp 2 x pp 2.
  MpConfig z2 = tiny_mp({2, 1, 2}, 2);
  z2.zero = 2;
  testing::MpRun r2 = train_mesh(z2, steps);
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(r2.losses[s], one.losses[s], 3e-5f) << "zero-2 step " << s;
  EXPECT_LT(max_diff(r2.dense, one.dense), 3e-5f);
}

}  // namespace
}  // namespace dtrain

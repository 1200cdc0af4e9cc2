// Tensor-parallel blocks timed in place: the measurement across thread-ranks (agreed pass
// counts, the same answer everywhere, refused shapes) and the calibration rows' parsing.
#include "plan/calibrate_tp.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "base/error.h"
#include "plan/cluster.h"
#include "support/world.h"

namespace dtrain::plan {
namespace {

using testing::run_world;

TEST(CalibrateTp, EveryRankGetsTheSlowestRanksMedians) {
  std::mutex mu;
  std::vector<TpBlockPoint> got;
  run_world(2, TransportKind::kShm, [&](Communicator& c) {
    TpBlockPoint p = time_tp_block(c, "gpt:layers=1,heads=2,width=16,context=8", 3, 0.01);
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(p);
  });
  ASSERT_EQ(got.size(), 2u);
  for (const auto& p : got) {
    EXPECT_EQ(p.items, 3);
    EXPECT_GT(p.fwd_s, 0);
    EXPECT_GT(p.bwd_s, 0);
  }
  EXPECT_EQ(got[0].fwd_s, got[1].fwd_s);  // max over ranks: bit-identical everywhere
  EXPECT_EQ(got[0].bwd_s, got[1].bwd_s);
}

TEST(CalibrateTp, RefusesADegreeThatDoesNotDivideTheHeads) {
  run_world(2, TransportKind::kShm, [&](Communicator& c) {
    EXPECT_THROW(time_tp_block(c, "gpt:layers=1,heads=3,width=24,context=8", 2, 0.01), InvalidArgument);
    EXPECT_THROW(time_tp_block(c, "gpt:layers=1,heads=2,width=16,context=8", 0, 0.01), InvalidArgument);
  });
}

nlohmann::json row(const std::string& spec, int tp, int items, double f, double b) {
  return {{"spec", spec}, {"tp", tp}, {"items", items}, {"fwd_s", f}, {"bwd_s", b}};
}

TEST(CalibrateTp, RowsGroupByShapeAndDegreeAndRoundTrip) {
  const std::string s = "gpt:layers=1,heads=8,width=128,context=64";
  nlohmann::json rows = nlohmann::json::array(
      {row(s, 2, 12, 4e-3, 6e-3), row(s, 2, 2, 1e-3, 1e-3), row(s, 4, 2, 2e-3, 2e-3),
       row("gpt:layers=6,heads=4,width=64,context=64", 2, 6, 5e-4, 6e-4)});
  std::vector<TpBlockFigure> f = tp_blocks_from_json(rows, "t");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].tp, 2);
  ASSERT_EQ(f[0].points.size(), 2u);
  EXPECT_EQ(f[0].points[0].items, 2);  // sorted by items
  EXPECT_EQ(f[0].points[1].items, 12);
  EXPECT_EQ(f[2].width, 64);  // a model's layer count does not matter: one block's shape
  std::vector<TpBlockFigure> again = tp_blocks_from_json(tp_blocks_json(f), "again");
  ASSERT_EQ(again.size(), f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(again[i].heads, f[i].heads);
    EXPECT_EQ(again[i].width, f[i].width);
    EXPECT_EQ(again[i].context, f[i].context);
    EXPECT_EQ(again[i].tp, f[i].tp);
    ASSERT_EQ(again[i].points.size(), f[i].points.size());
    for (size_t k = 0; k < f[i].points.size(); ++k) {
      EXPECT_EQ(again[i].points[k].items, f[i].points[k].items);
      EXPECT_DOUBLE_EQ(again[i].points[k].fwd_s, f[i].points[k].fwd_s);
      EXPECT_DOUBLE_EQ(again[i].points[k].bwd_s, f[i].points[k].bwd_s);
    }
  }
}

// Rows timed with groups among more of the job's ranks (`bench tp-blocks -n 8 --tp 2`) are a
// figure of their own, found only by asking for that crowd, and keep their ranks through a
// round trip.
TEST(CalibrateTp, GroupsTimedAmongMoreRanksAreAFigureOfTheirOwn) {
  const std::string s = "gpt:layers=1,heads=8,width=128,context=64";
  nlohmann::json crowd = row(s, 2, 2, 3e-3, 3e-3);
  crowd["ranks"] = 8;
  Cluster c;
  c.tp_blocks = tp_blocks_from_json(nlohmann::json::array({row(s, 2, 2, 1e-3, 1e-3), crowd}), "t");
  ASSERT_EQ(c.tp_blocks.size(), 2u);
  ASSERT_NE(c.tp_block_for(8, 128, 64, 2), nullptr);
  EXPECT_DOUBLE_EQ(c.tp_block_for(8, 128, 64, 2)->points[0].fwd_s, 1e-3);
  ASSERT_NE(c.tp_block_for(8, 128, 64, 2, 8), nullptr);
  EXPECT_DOUBLE_EQ(c.tp_block_for(8, 128, 64, 2, 8)->points[0].fwd_s, 3e-3);
  EXPECT_EQ(c.tp_block_for(8, 128, 64, 2, 4), nullptr);  // not timed among 4
  std::vector<TpBlockFigure> again = tp_blocks_from_json(tp_blocks_json(c.tp_blocks), "again");
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].ranks + again[1].ranks, 2 + 8);
  // ranks must be a multiple of the degree.
  crowd["ranks"] = 5;
  EXPECT_THROW(tp_blocks_from_json(nlohmann::json::array({crowd}), "t"), InvalidArgument);
}

TEST(CalibrateTp, MalformedRowsAreRefusedNamingTheRow) {
  const std::string s = "gpt:layers=1,heads=8,width=128,context=64";
  auto refused = [](nlohmann::json rows, const std::string& says) {
    try {
      tp_blocks_from_json(rows, "cal.tp_blocks");
      ADD_FAILURE() << "accepted " << rows.dump();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(nlohmann::json::object(), "must be an array");
  refused(nlohmann::json::array({row(s, 3, 2, 1e-3, 1e-3)}), "cal.tp_blocks[0]");      // 3 does not divide 8 heads
  refused(nlohmann::json::array({row(s, 2, 2, -1e-3, 1e-3)}), "cal.tp_blocks[0]");     // negative time
  refused(nlohmann::json::array({row("mlp:4-2", 2, 2, 1e-3, 1e-3)}), "not a GPT");
  refused(nlohmann::json::array({row(s, 2, 2, 1e-3, 1e-3), row(s, 2, 2, 2e-3, 2e-3)}), "two rows for the same block");
}

TEST(CalibrateTp, TheNearestShapeWithinTwiceTheWidthIsUsed) {
  Cluster c;
  c.tp_blocks = tp_blocks_from_json(
      nlohmann::json::array({row("gpt:layers=1,heads=8,width=128,context=64", 2, 2, 1e-3, 1e-3),
                             row("gpt:layers=1,heads=4,width=64,context=64", 2, 2, 1e-3, 1e-3)}),
      "t");
  ASSERT_NE(c.tp_block_for(8, 128, 64, 2), nullptr);
  EXPECT_EQ(c.tp_block_for(8, 128, 64, 2)->width, 128);
  EXPECT_EQ(c.tp_block_for(4, 96, 64, 2)->width, 128);  // 96 is nearer 128 than 64 in ratio
  EXPECT_EQ(c.tp_block_for(8, 256, 64, 2)->width, 128);
  EXPECT_EQ(c.tp_block_for(8, 512, 64, 2), nullptr);   // 4x the widest: another regime
  EXPECT_EQ(c.tp_block_for(8, 128, 256, 2), nullptr);  // 4x the context
  EXPECT_EQ(c.tp_block_for(8, 128, 64, 4), nullptr);   // no figure of that degree
}

}  // namespace
}  // namespace dtrain::plan

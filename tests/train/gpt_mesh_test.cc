// The GPT's mesh from the flags: each strategy's missing factors are filled from -n, and a
// mesh that cannot fit -n is refused naming the factors.
#include <gtest/gtest.h>

#include "base/error.h"
#include "train/config.h"

namespace dtrain {
namespace {

TrainConfig gpt(const std::string& strategy, int n, int dp, int tp, int pp) {
  TrainConfig c;
  c.strategy = strategy;
  c.ranks = n;
  c.dp = dp;
  c.tp = tp;
  c.pp = pp;
  return c;
}

void expect_mesh(const TrainConfig& c, int dp, int tp, int pp) {
  MeshDims m = gpt_mesh(c);
  EXPECT_EQ(m.dp, dp) << c.strategy;
  EXPECT_EQ(m.tp, tp) << c.strategy;
  EXPECT_EQ(m.pp, pp) << c.strategy;
}

std::string refusal(const TrainConfig& c) {
  try {
    gpt_mesh(c);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(GptMesh, EachStrategyFillsItsOwnFactorFromTheRanks) {
  expect_mesh(gpt("tp", 4, 0, 0, 0), 1, 4, 1);
  expect_mesh(gpt("pp", 8, 2, 0, 0), 2, 1, 4);
  expect_mesh(gpt("zero", 4, 0, 0, 0), 4, 1, 1);
  expect_mesh(gpt("hybrid", 8, 2, 2, 2), 2, 2, 2);
}

TEST(GptMesh, HybridTakesTheThirdFactorFromTheOtherTwo) {
  expect_mesh(gpt("hybrid", 4, 2, 0, 2), 2, 1, 2);
  expect_mesh(gpt("hybrid", 8, 0, 2, 2), 2, 2, 2);
  expect_mesh(gpt("hybrid", 8, 2, 4, 0), 2, 4, 1);
}

TEST(GptMesh, HybridRefusesWhatCannotFitTheRanks) {
  EXPECT_NE(refusal(gpt("hybrid", 4, 2, 0, 0)).find("at least two of --dp"), std::string::npos);
  EXPECT_NE(refusal(gpt("hybrid", 6, 4, 0, 1)).find("-n 6 is not a multiple of 4"), std::string::npos);
  EXPECT_NE(refusal(gpt("hybrid", 2, 2, 2, 1)).find("must equal -n 2"), std::string::npos);
}

}  // namespace
}  // namespace dtrain

// The closed forms against the formulas written out by hand for small cases.
#include "plan/closed_forms.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "parallel/pipeline_schedule.h"

namespace dtrain::plan {
namespace {

CostParams params(double a, double b, double g) {
  CostParams c;
  c.alpha_s = a, c.beta_s_per_byte = b, c.gamma_s_per_byte = g;
  return c;
}

TEST(ClosedForms, RingAllreduceIsTwoPMinusOneStepsOfNOverP) {
  auto c = params(1, 0.5, 0.25);
  // p = 4, n = 8: 2*3*1 + 2*(3/4)*8*0.5 + (3/4)*8*0.25 = 6 + 6 + 1.5
  EXPECT_DOUBLE_EQ(ring_allreduce_s(4, 8, c), 13.5);
  EXPECT_DOUBLE_EQ(ring_allreduce_s(1, 8, c), 0);
  // Bandwidth term approaches 2 n beta as p grows.
  auto bw = params(0, 1, 0);
  EXPECT_NEAR(ring_allreduce_s(1024, 1e6, bw) / 2e6, 1.0, 1e-3);
}

TEST(ClosedForms, TreeAndRecursiveDoublingAreLogarithmic) {
  auto c = params(1, 0.5, 0.25);
  // p = 8: L = 3. tree: 2*3*(1 + 8*0.5) + 3*8*0.25 = 30 + 6
  EXPECT_DOUBLE_EQ(tree_allreduce_s(8, 8, c), 36);
  // p = 5 rounds up to L = 3.
  EXPECT_DOUBLE_EQ(tree_allreduce_s(5, 8, c), 36);
  // recursive doubling: 3*(1 + 4 + 2)
  EXPECT_DOUBLE_EQ(recursive_doubling_allreduce_s(8, 8, c), 21);
  // halving/doubling: 2*3*1 + 2*(7/8)*8*0.5 + (7/8)*8*0.25 = 6 + 7 + 1.75
  EXPECT_DOUBLE_EQ(halving_doubling_allreduce_s(8, 8, c), 14.75);
}

TEST(ClosedForms, BestAllreducePicksTreeForSmallAndRingForLargeBuffers) {
  auto c = params(10e-6, 1e-9, 0);
  EXPECT_DOUBLE_EQ(best_allreduce_s(64, 8, c), std::min(tree_allreduce_s(64, 8, c), halving_doubling_allreduce_s(64, 8, c)));
  EXPECT_LT(halving_doubling_allreduce_s(64, 8, c), ring_allreduce_s(64, 8, c));
  EXPECT_LT(ring_allreduce_s(6, 1e9, c), tree_allreduce_s(6, 1e9, c));
}

TEST(ClosedForms, ReduceScatterPlusAllgatherIsRingAllreduce) {
  auto c = params(2, 0.1, 0.05);
  EXPECT_DOUBLE_EQ(ring_reduce_scatter_s(6, 600, c) + ring_allgather_s(6, 600, c), ring_allreduce_s(6, 600, c));
}

TEST(ClosedForms, HierarchicalSendsOnlyNOverGAcrossNodes) {
  auto intra = params(0, 0, 0), inter = params(0, 1, 0);
  // 4 nodes x 8 ranks, 800 bytes: only the inter ring of 100 bytes costs: 2*(3/4)*100.
  EXPECT_DOUBLE_EQ(hierarchical_allreduce_s(4, 8, 800, intra, inter), 150);
  // One rank per node: the plain ring over the nodes.
  auto c = params(1, 0.5, 0.25);
  EXPECT_DOUBLE_EQ(hierarchical_allreduce_s(4, 1, 8, c, c), ring_allreduce_s(4, 8, c));
}

TEST(ClosedForms, ZeroStagesShardOneMoreStateEach) {
  const double P = 1e6;
  const int N = 8;
  // The paper's mixed-precision Adam: 2 + 2 + 12 bytes per parameter.
  EXPECT_DOUBLE_EQ(zero_bytes(0, P, N, 2, 2, 12).total(), 16 * P);
  EXPECT_DOUBLE_EQ(zero_bytes(1, P, N, 2, 2, 12).total(), 4 * P + 12 * P / N);
  EXPECT_DOUBLE_EQ(zero_bytes(2, P, N, 2, 2, 12).total(), 2 * P + 14 * P / N);
  EXPECT_DOUBLE_EQ(zero_bytes(3, P, N, 2, 2, 12).total(), 16 * P / N);
  EXPECT_THROW(zero_bytes(4, P, N, 2, 2, 12), InvalidArgument);
  EXPECT_DOUBLE_EQ(zero_traffic_elems(2, P, N), 2 * P * 7 / 8);
  EXPECT_DOUBLE_EQ(zero_traffic_elems(3, P, N), 3 * P * 7 / 8);
  EXPECT_DOUBLE_EQ(zero_traffic_elems(3, P, 1), 0);
}

TEST(ClosedForms, BlockActivationsSplitOverTensorParallelAndRecompute) {
  // s=64, b=2, h=128, a=4: sbh = 16384; 16 sbh + a s^2 b = 262144 + 32768.
  EXPECT_DOUBLE_EQ(block_activation_elems(64, 2, 128, 4, 1, false), 16 * 16384.0 + 4 * 64 * 64 * 2);
  EXPECT_DOUBLE_EQ(block_activation_elems(64, 2, 128, 4, 2, false), 4 * 16384.0 + (12 * 16384.0 + 32768) / 2);
  EXPECT_DOUBLE_EQ(block_activation_elems(64, 2, 128, 4, 1, true), 16384.0);
  // Korthikanti et al.: sbh(34 + 5as/h) bytes.
  EXPECT_DOUBLE_EQ(korthikanti_bytes(64, 2, 128, 4), 16384.0 * (34 + 5.0 * 4 * 64 / 128));
}

TEST(ClosedForms, BubbleMatchesTheFormulaAndTheScheduleSimulation) {
  EXPECT_DOUBLE_EQ(bubble_fraction("gpipe", 4, 8, 1), 3.0 / 11);
  EXPECT_DOUBLE_EQ(bubble_fraction("1f1b", 4, 8, 1), 3.0 / 11);
  EXPECT_DOUBLE_EQ(bubble_fraction("interleaved", 4, 8, 2), (3.0 / 16) / (1 + 3.0 / 16));
  EXPECT_THROW(bubble_fraction("zigzag", 4, 8, 1), InvalidArgument);
  // The executor's schedules, simulated with forward 1 and backward 2, show the same bubble.
  for (auto [kind, p, m, v] : {std::tuple{"gpipe", 4, 8, 1}, {"1f1b", 4, 8, 1}, {"1f1b", 2, 4, 1}, {"interleaved", 4, 8, 2}}) {
    SimResult r = simulate(make_schedule(kind, p, m, v));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_NEAR(r.bubble(), bubble_fraction(kind, p, m, v), 1e-9) << kind << " p" << p << " m" << m << " v" << v;
  }
}

TEST(ClosedForms, AmdahlAndGustafson) {
  EXPECT_DOUBLE_EQ(amdahl_speedup(0, 16), 16);
  EXPECT_DOUBLE_EQ(amdahl_speedup(1, 16), 1);
  EXPECT_DOUBLE_EQ(amdahl_speedup(0.1, 10), 1 / (0.1 + 0.09));
  EXPECT_DOUBLE_EQ(gustafson_speedup(0.1, 10), 10 - 0.9);
  // The fits recover the serial fraction from exact points.
  std::vector<std::pair<double, double>> a, g;
  for (double n : {1, 2, 4, 8, 64}) a.push_back({n, amdahl_speedup(0.05, n)}), g.push_back({n, gustafson_speedup(0.2, n)});
  EXPECT_NEAR(fit_amdahl(a), 0.05, 1e-12);
  EXPECT_NEAR(fit_gustafson(g), 0.2, 1e-12);
  EXPECT_THROW(fit_amdahl({{1, 1}}), InvalidArgument);
  EXPECT_THROW(fit_gustafson({{4, -1}}), InvalidArgument);
}

}  // namespace
}  // namespace dtrain::plan

// The cost model and planner: the published formulas' shape (latency-bound vs bandwidth-
// bound choices), the calibration file round trip, and auto resolution rules.
#include <gtest/gtest.h>

#include "base/error.h"
#include "coll/cost_model.h"
#include "plan/collective_plan.h"

namespace dtrain {
namespace {

TEST(CostModel, RingFormulaIsThePublishedOne) {
  CostParams cp;
  cp.alpha_s = 1e-5;
  cp.beta_s_per_byte = 1e-9;
  cp.gamma_s_per_byte = 5e-10;
  const int p = 8;
  const double n = 1 << 20;
  double want = 2 * (p - 1) * 1e-5 + 2.0 * (p - 1) / p * n * 1e-9 + (p - 1.0) / p * n * 5e-10;
  EXPECT_NEAR(predict_seconds(CollOp::kAllreduce, Algorithm::kRing, p, n, cp, 1 << 20), want, 1e-12);
  double rd = 3 * (1e-5 + n * 1e-9 + n * 5e-10);
  EXPECT_NEAR(predict_seconds(CollOp::kAllreduce, Algorithm::kRecursiveDoubling, p, n, cp, 1 << 20), rd, 1e-12);
  double rab = 2 * 3 * 1e-5 + 2.0 * 7 / 8 * n * 1e-9 + 7.0 / 8 * n * 5e-10;
  EXPECT_NEAR(predict_seconds(CollOp::kAllreduce, Algorithm::kHalvingDoubling, p, n, cp, 1 << 20), rab, 1e-12);
}

TEST(CostModel, SmallMessagesPickLatencyOptimalLargePickBandwidthOptimal) {
  CostParams tcp = default_cost_params("tcp");
  Algorithm small = choose(CollOp::kAllreduce, 8, 8, tcp, false, 1 << 20);
  EXPECT_TRUE(small == Algorithm::kRecursiveDoubling || small == Algorithm::kNaive) << algorithm_name(small);
  Algorithm large = choose(CollOp::kAllreduce, 8, 256u << 20, tcp, false, 1 << 20);
  EXPECT_TRUE(large == Algorithm::kRing || large == Algorithm::kHalvingDoubling) << algorithm_name(large);
  // Without shared memory, shm-direct is never a candidate.
  for (Algorithm a : candidates(CollOp::kAllreduce, 4, false)) EXPECT_NE(a, Algorithm::kShmDirect);
  // Predictions grow with the size.
  for (Algorithm a : candidates(CollOp::kAllreduce, 5, true))
    EXPECT_LT(predict_seconds(CollOp::kAllreduce, a, 5, 1000, tcp, 4096),
              predict_seconds(CollOp::kAllreduce, a, 5, 1000000, tcp, 4096))
        << algorithm_name(a);
}

TEST(CostModel, CalibrationRoundTrip) {
  CostParams shm = default_cost_params("shm"), tcp = default_cost_params("tcp");
  shm.alpha_s = 2.5e-6;
  tcp.beta_s_per_byte = 1.0 / 2.5e9;
  std::string text = format_calibration(shm, tcp);
  CostParams a, b;
  ASSERT_TRUE(parse_calibration(text, "shm", &a));
  ASSERT_TRUE(parse_calibration(text, "tcp", &b));
  EXPECT_NEAR(a.alpha_s, 2.5e-6, 1e-12);
  EXPECT_NEAR(1 / b.beta_s_per_byte, 2.5e9, 1e3);
  EXPECT_FALSE(parse_calibration("{\"shm\": {\"alpha_us\": 1}}", "shm", &a));
  EXPECT_FALSE(parse_calibration("{}", "tcp", &a));
}

TEST(CostModel, NormalizationAndSupportedSets) {
  EXPECT_EQ(normalize_algorithm(CollOp::kBroadcast, Algorithm::kTree), Algorithm::kBinomial);
  EXPECT_EQ(normalize_algorithm(CollOp::kBroadcast, Algorithm::kRing), Algorithm::kChain);
  EXPECT_EQ(normalize_algorithm(CollOp::kAllgather, Algorithm::kButterfly), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(normalize_algorithm(CollOp::kReduceScatter, Algorithm::kButterfly), Algorithm::kHalvingDoubling);
  EXPECT_EQ(parse_algorithm("rabenseifner"), Algorithm::kHalvingDoubling);
  EXPECT_EQ(parse_coll_op("reduce_scatter"), CollOp::kReduceScatter);
  EXPECT_THROW(parse_coll_op("allsum"), InvalidArgument);
}

TEST(Planner, RowsMatchTheRuntimeChoice) {
  for (bool shm : {false, true}) {
    for (int p : {2, 3, 8}) {
      for (size_t bytes : {size_t{8}, size_t{65536}, size_t{64} << 20}) {
        CostParams cp = default_cost_params(shm ? "shm" : "tcp");
        auto rows = plan_collective(CollOp::kAllreduce, p, bytes, cp, 1 << 20, shm);
        int chosen = 0;
        for (const auto& r : rows) {
          chosen += r.chosen;
          if (r.chosen) {
            EXPECT_EQ(r.algorithm, choose(CollOp::kAllreduce, p, bytes, cp, shm, 1 << 20));
          }
        }
        EXPECT_EQ(chosen, 1);
        std::string table = format_plan(CollOp::kAllreduce, p, bytes, shm ? "shm" : "tcp", cp, rows);
        EXPECT_NE(table.find("<- auto"), std::string::npos);
        EXPECT_NE(table.find("ring"), std::string::npos);
      }
    }
  }
}

}  // namespace
}  // namespace dtrain

// Repeated measurements of planned layouts: each layout's median and spread, and whether the
// runs tell the chosen layout apart from the measured fastest (plan/plan_measure.h).
#include "plan/plan_measure.h"

#include <gtest/gtest.h>

#include <initializer_list>

#include "base/error.h"

namespace dtrain::plan {
namespace {

LayoutRuns runs_of(std::initializer_list<double> steps_ms) {
  LayoutRuns r;
  for (double ms : steps_ms) {
    Measured m;
    m.step_s = ms * 1e-3;
    r.runs.push_back(m);
  }
  summarise(r);
  return r;
}

TEST(PlanMeasure, ALayoutsFigureIsTheMedianOfItsRunsWithTheFastestAndSlowest) {
  const LayoutRuns odd = runs_of({12, 10, 30});
  EXPECT_DOUBLE_EQ(odd.median_s, 12e-3);
  EXPECT_DOUBLE_EQ(odd.min_s, 10e-3);
  EXPECT_DOUBLE_EQ(odd.max_s, 30e-3);
  EXPECT_DOUBLE_EQ(runs_of({10, 14, 11, 30}).median_s, 12.5e-3);  // the middle two's mean
  LayoutRuns none;
  EXPECT_THROW(summarise(none), InvalidArgument);
}

TEST(PlanMeasure, TheChosenLayoutMeasuredFastestIsNoMiss) {
  const MeasuredVerdict v = judge_measured({runs_of({10, 11, 12}), runs_of({10.5, 13, 14})});
  EXPECT_EQ(v.fastest, 0u);
  EXPECT_DOUBLE_EQ(v.chosen_excess, 0);
  EXPECT_FALSE(v.apart);
  EXPECT_FALSE(v.judged);
}

// The third layout's median is lowest, 10% under the chosen's; whether that is a difference
// depends on the runs: overlapping ranges are a draw, separate ones are apart.
TEST(PlanMeasure, ALeadInsideTheRunsSpreadIsADrawAndOneOutsideItIsApart) {
  MeasuredVerdict v = judge_measured({runs_of({11, 9.5, 12}), runs_of({13, 14, 15}), runs_of({9, 10, 10.5})});
  EXPECT_EQ(v.fastest, 2u);
  EXPECT_NEAR(v.chosen_excess, 0.10, 1e-12);
  EXPECT_TRUE(v.judged);
  EXPECT_FALSE(v.apart);  // the chosen's 9.5 ms run beats the other's 10.5
  v = judge_measured({runs_of({11, 11.5, 12}), runs_of({13, 14, 15}), runs_of({9, 10, 10.5})});
  EXPECT_EQ(v.fastest, 2u);
  EXPECT_TRUE(v.judged);
  EXPECT_TRUE(v.apart);
}

TEST(PlanMeasure, OneRunEachCannotBeJudged) {
  const MeasuredVerdict v = judge_measured({runs_of({12}), runs_of({9})});
  EXPECT_EQ(v.fastest, 1u);
  EXPECT_NEAR(v.chosen_excess, 12.0 / 9 - 1, 1e-12);
  EXPECT_FALSE(v.judged);
  EXPECT_FALSE(v.apart);
  EXPECT_THROW(judge_measured({}), InvalidArgument);
}

}  // namespace
}  // namespace dtrain::plan

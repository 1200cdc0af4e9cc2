// Pipeline schedules as data: the checker passes GPipe, 1F1B and interleaved 1F1B for every
// P <= 8, M <= 16, V <= 4 it accepts, and rejects deliberately broken schedules (a deadlock,
// a missing send, a backward before its forward) with a message saying what is wrong. The
// simulator's bubble equals the textbook formulas, and the in-flight micro-batches (the
// activation memory) are M for GPipe and at most P - s for 1F1B.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "parallel/pipeline_schedule.h"

namespace dtrain {
namespace {

TEST(PipelineSchedule, GPipeAndOneFOneBLookLikeTheLectures) {
  EXPECT_EQ(make_gpipe(2, 3).describe(), "s0: F0 F1 F2 B0 B1 B2 STEP\ns1: F0 F1 F2 B0 B1 B2 STEP\n");
  EXPECT_EQ(make_1f1b(3, 4).describe(),
            "s0: F0 F1 F2 B0 F3 B1 B2 B3 STEP\n"
            "s1: F0 F1 B0 F2 B1 F3 B2 B3 STEP\n"
            "s2: F0 B0 F1 B1 F2 B2 F3 B3 STEP\n");
  EXPECT_EQ(make_1f1b(2, 1).describe(true),
            "s0: F0 SendAct0 RecvGrad0 B0 STEP\n"
            "s1: RecvAct0 F0 B0 SendGrad0 STEP\n");
}

TEST(PipelineSchedule, CheckerPassesEverySchedule) {
  int checked = 0, refused = 0;
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) {
      for (const char* kind : {"gpipe", "1f1b"}) {
        PipeSchedule s = make_schedule(kind, p, m);
        ASSERT_EQ(check_schedule(s), "") << kind << " P=" << p << " M=" << m;
        ++checked;
      }
      for (int v = 1; v <= 4; ++v) {
        if (v > 1 && m % p != 0) {
          EXPECT_THROW(make_interleaved(p, m, v), InvalidArgument);
          ++refused;
          continue;
        }
        PipeSchedule s = make_interleaved(p, m, v);
        ASSERT_EQ(check_schedule(s), "") << "interleaved P=" << p << " M=" << m << " V=" << v;
        ++checked;
      }
    }
  EXPECT_EQ(checked + refused, 8 * 16 * 6);
}

TEST(PipelineSchedule, RejectsADeadlock) {
  // Stage 0 waits for the gradient of micro-batch 0 before sending that micro-batch's
  // activation, which stage 1 needs first. Every instruction is present, paired and in data
  // order on its own stage (SendAct after Forward, RecvGrad before Backward); only the
  // interleaving across stages is wrong, and the simulation finds the cycle.
  PipeSchedule s = make_gpipe(2, 2);
  auto& s0 = s.per_stage[0];
  std::iter_swap(std::find(s0.begin(), s0.end(), PipeInstr{PipeOp::kSendAct, 0, 0}),
                 std::find(s0.begin(), s0.end(), PipeInstr{PipeOp::kRecvGrad, 0, 0}));
  ASSERT_EQ(s.describe(true), "s0: F0 RecvGrad0 F1 SendAct1 SendAct0 B0 RecvGrad1 B1 STEP\n"
                              "s1: RecvAct0 F0 RecvAct1 F1 B0 SendGrad0 B1 SendGrad1 STEP\n");
  const std::string err = check_schedule(s);
  EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
  EXPECT_NE(err.find("stage 0 instruction 1 (RecvGrad"), std::string::npos) << err;
  EXPECT_NE(err.find("stage 1 instruction 0 (RecvAct"), std::string::npos) << err;
  // The unbroken schedule passes.
  EXPECT_EQ(check_schedule(make_gpipe(2, 2)), "");
}

TEST(PipelineSchedule, RejectsMissingAndMisplacedWork) {
  PipeSchedule s = make_1f1b(3, 3);
  auto& s1 = s.per_stage[1];
  s1.erase(std::find(s1.begin(), s1.end(), PipeInstr{PipeOp::kSendGrad, 2, 0}));
  EXPECT_NE(check_schedule(s).find("SendGrad"), std::string::npos) << check_schedule(s);

  PipeSchedule b = make_gpipe(2, 2);
  auto& b1 = b.per_stage[1];
  std::iter_swap(std::find(b1.begin(), b1.end(), PipeInstr{PipeOp::kForward, 1, 0}),
                 std::find(b1.begin(), b1.end(), PipeInstr{PipeOp::kBackward, 1, 0}));
  EXPECT_NE(check_schedule(b).find("Backward before Forward"), std::string::npos) << check_schedule(b);

  PipeSchedule n = make_gpipe(2, 2);
  n.per_stage[0].pop_back();
  EXPECT_NE(check_schedule(n).find("optimizer step"), std::string::npos) << check_schedule(n);
}

TEST(PipelineSchedule, SimulatedBubbleEqualsTheFormula) {
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 2, 4, 8, 16}) {
      for (const char* kind : {"gpipe", "1f1b"}) {
        SimResult r = simulate(make_schedule(kind, p, m));
        ASSERT_TRUE(r.ok) << r.error;
        EXPECT_NEAR(r.bubble(), bubble_formula(kind, p, m, 1), 1e-12) << kind << " P=" << p << " M=" << m;
        EXPECT_DOUBLE_EQ(r.makespan, 3.0 * (m + p - 1));
      }
    }
  // Interleaved: the bubble shrinks by about V (the formula is exact for this cost model
  // when every stage has equal pieces; we allow the warm-up edge 1 percentage point).
  for (int p : {2, 4})
    for (int m : {4, 8, 16})
      for (int v : {2, 4}) {
        SimResult r = simulate(make_interleaved(p, m, v), [&](int, const PipeInstr& i) { return unit_cost(0, i) / v; });
        ASSERT_TRUE(r.ok) << r.error;
        EXPECT_NEAR(r.bubble(), bubble_formula("interleaved", p, m, v), 0.01) << "P=" << p << " M=" << m << " V=" << v;
        EXPECT_LT(r.bubble(), bubble_formula("1f1b", p, m, 1));
      }
}

// On shared cores: cores enough for every stage give simulate()'s timing; fewer
// cores make the step at least the work over the cores (forward 1, backward 2 per stage and
// micro-batch), never more than all of it in a row, and the waits for a core count as busy.
TEST(PipelineSchedule, StagesQueueForTheCores) {
  for (const char* kind : {"gpipe", "1f1b"})
    for (int m : {1, 4, 8}) {
      const PipeSchedule s = make_schedule(kind, 4, m);
      const SimResult free = simulate(s), wide = simulate_on_cores(s, unit_cost, 1, 4);
      ASSERT_TRUE(wide.ok) << wide.error;
      EXPECT_DOUBLE_EQ(wide.makespan, free.makespan) << kind << " m=" << m;
      EXPECT_EQ(wide.max_in_flight, free.max_in_flight);
      const SimResult two = simulate_on_cores(s, unit_cost, 1, 2);
      ASSERT_TRUE(two.ok) << two.error;
      const double work = 3.0 * 4 * m;
      EXPECT_GE(two.makespan, std::max(free.makespan, work / 2) - 1e-12) << kind << " m=" << m;
      EXPECT_LE(two.makespan, work + 1e-12);
      double busy = 0;
      for (double b : two.busy) busy += b;
      EXPECT_GE(busy, work - 1e-12);
      // A stage's two ranks on one core: everything in a row.
      EXPECT_DOUBLE_EQ(simulate_on_cores(s, unit_cost, 2, 1).makespan, work);
    }
}

// The cores go to the stage that has computed least in the step, as the kernel's fair
// scheduler gives the CPU to the task owed most: GPipe over 2 stages on 1 core, forward 1.
// At t = 1 stage 0 has computed 1 and wants its second forward; stage 1 has computed nothing
// and has its first input. Stage 1 runs first ([1, 2]), then stage 0 ([2, 3]); first come,
// first served (ties to the lower stage) would have run them the other way round.
TEST(PipelineSchedule, TheStageThatComputedLeastTakesTheCore) {
  const PipeSchedule s = make_schedule("gpipe", 2, 4);
  auto forward = [&](int stage, int micro) {
    const auto& prog = s.per_stage[static_cast<size_t>(stage)];
    for (size_t i = 0; i < prog.size(); ++i)
      if (prog[i].op == PipeOp::kForward && prog[i].micro == micro) return i;
    ADD_FAILURE() << "no forward of micro-batch " << micro << " on stage " << stage;
    return size_t{0};
  };
  const SimResult r = simulate_on_cores(s, unit_cost, 1, 1);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NEAR(r.start[1][forward(1, 0)], 1.0, 1e-9);
  EXPECT_NEAR(r.end[1][forward(1, 0)], 2.0, 1e-9);
  EXPECT_NEAR(r.end[0][forward(0, 1)], 3.0, 1e-9);
  // One core never idles while a stage can compute: the step is all the work in a row.
  EXPECT_NEAR(r.makespan, 3.0 * 2 * 4, 1e-9);
  // The kernel's slice: 0.75 ms x (1 + log2 CPUs), CPUs counted up to 8.
  EXPECT_DOUBLE_EQ(scheduler_slice_s(1), 0.75e-3);
  EXPECT_DOUBLE_EQ(scheduler_slice_s(2), 1.5e-3);
  EXPECT_DOUBLE_EQ(scheduler_slice_s(8), 3e-3);
  EXPECT_DOUBLE_EQ(scheduler_slice_s(64), 3e-3);
  // Two stages that both want the core share it by slices: a longer slice only coarsens it.
  EXPECT_NEAR(simulate_on_cores(s, unit_cost, 1, 1, 0.25).makespan, 3.0 * 2 * 4, 1e-9);
}

TEST(PipelineSchedule, InFlightMicroBatches) {
  for (int p : {2, 4, 8})
    for (int m : {1, 3, 8, 16}) {
      SimResult g = simulate(make_gpipe(p, m)), f = simulate(make_1f1b(p, m));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(g.max_in_flight[static_cast<size_t>(s)], m);
        EXPECT_EQ(f.max_in_flight[static_cast<size_t>(s)], std::min(m, p - s));
      }
    }
}

TEST(PipelineSchedule, RefusesBadArguments) {
  EXPECT_THROW(make_schedule("zigzag", 2, 2), InvalidArgument);
  EXPECT_THROW(make_schedule("gpipe", 2, 2, 2), InvalidArgument);
  EXPECT_THROW(make_gpipe(0, 2), InvalidArgument);
  EXPECT_THROW(make_interleaved(4, 6, 2), InvalidArgument);
}

}  // namespace
}  // namespace dtrain

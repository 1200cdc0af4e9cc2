// PathTuner (coll/path_tuner.h): size classes, folding only after kMinCalls calls, the first
// call after a switch not timed, the faster path chosen, an untimed or stale path tried while
// its entry has calls, verdicts kept apart, and the mask both ranks read. A path's first call
// is not timed, so each new path below gets kMinCalls + 1 calls to be estimated.
#include "coll/path_tuner.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace dtrain {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

// n calls of entry e on one path, each taking ns_per_byte x bytes.
constexpr int kFirst = static_cast<int>(PathTuner::kMinCalls) + 1;  // enough calls on a path just taken
// Enough calls of a few MiB on one path for the other to be tried.
constexpr int kPaid = static_cast<int>(PathTuner::kExploreEvery * PathTuner::kMinCalls);
void calls(PathTuner& t, bool far, int e, bool slots, int n, size_t bytes, double ns_per_byte) {
  for (int i = 0; i < n; ++i) t.record(far, e, slots, static_cast<int64_t>(ns_per_byte * static_cast<double>(bytes)), bytes);
}

// A try's worth of calls on path `slots` (kPaid at `paid_ns`), the tuner's try of the other
// path, that path timed (kFirst calls at `tried_ns`); returns the mask decided after them.
uint64_t pay_try_and_time(PathTuner& t, bool far, int e, bool slots, size_t bytes, double paid_ns, double tried_ns,
                          uint64_t* explore) {
  calls(t, far, e, slots, kPaid, bytes, paid_ns);
  t.decide(far, explore);  // tries the other path
  calls(t, far, e, !slots, kFirst, bytes, tried_ns);
  return t.decide(far, explore);
}

TEST(PathTuner, SizeClassesGoByFactorsOfFour) {
  EXPECT_EQ(PathTuner::entry(CollOp::kAllreduce, 1), 0);
  EXPECT_EQ(PathTuner::entry(CollOp::kAllreduce, 64 * kKiB), 0);
  EXPECT_EQ(PathTuner::entry(CollOp::kAllreduce, 64 * kKiB + 1), 1);
  EXPECT_EQ(PathTuner::entry(CollOp::kAllreduce, 256 * kKiB), 1);
  EXPECT_EQ(PathTuner::entry(CollOp::kAllreduce, kMiB), 2);
  EXPECT_EQ(PathTuner::entry(CollOp::kAllreduce, kMiB + 4), 3);
  EXPECT_EQ(PathTuner::entry(CollOp::kAllreduce, 256 * kMiB), 6);
  EXPECT_EQ(PathTuner::entry(CollOp::kAllreduce, size_t{1} << 40), 7);
  EXPECT_EQ(PathTuner::entry(CollOp::kAllgather, kMiB), PathTuner::kSizeClasses + 2);
  EXPECT_EQ(PathTuner::entry(CollOp::kReduceScatter, kMiB), 2 * PathTuner::kSizeClasses + 2);
  EXPECT_EQ(PathTuner::entry(CollOp::kBroadcast, kMiB), 3 * PathTuner::kSizeClasses + 2);
  EXPECT_EQ(PathTuner::entry(CollOp::kReduce, kMiB), -1);
  EXPECT_EQ(PathTuner::entry(CollOp::kAlltoall, kMiB), -1);
}

TEST(PathTuner, NothingTimedDecidesNothing) {
  PathTuner t;
  uint64_t explore = 1;
  EXPECT_EQ(t.decide(false, &explore), 0u);
  EXPECT_EQ(explore, 0u);
  const int e = PathTuner::entry(CollOp::kAllreduce, kMiB);
  calls(t, false, e, true, 1, kMiB, 50.0);  // the first call: not timed
  calls(t, false, e, true, static_cast<int>(PathTuner::kMinCalls) - 1, kMiB, 0.2);
  EXPECT_EQ(t.decide(false, &explore), 0u) << "fewer than kMinCalls timed calls are not an estimate";
  EXPECT_LT(t.estimate(false, e, true), 0);
  calls(t, false, e, true, 1, kMiB, 0.2);  // the earlier calls still count
  const uint64_t mask = t.decide(false, &explore);
  EXPECT_NEAR(t.estimate(false, e, true), 0.2, 1e-3) << "the first call's 50 ns a byte left out";
  EXPECT_TRUE(PathTuner::decided(mask, e));
}

TEST(PathTuner, TriesTheUntimedPathThenKeepsTheFaster) {
  PathTuner t;
  uint64_t explore = 0;
  const int e = PathTuner::entry(CollOp::kAllreduce, 4 * kMiB);
  // The fixed rule sent the calls through the slots: the reads are tried next, and the next
  // probe is due after kMinCalls calls of the class's largest size.
  calls(t, false, e, true, kPaid - 1, 4 * kMiB, 0.5);
  uint64_t mask = t.decide(false, &explore);
  EXPECT_TRUE(PathTuner::takes_slots(mask, e)) << "a try waits for kExploreEvery tries' worth of calls";
  EXPECT_EQ(explore, 0u) << "the first choice is the path the fixed rule took: no trial";
  calls(t, false, e, true, 1, 4 * kMiB, 0.5);
  mask = t.decide(false, &explore);
  ASSERT_TRUE(PathTuner::decided(mask, e));
  EXPECT_FALSE(PathTuner::takes_slots(mask, e)) << "the reads have no estimate: tried";
  EXPECT_EQ(explore, static_cast<uint64_t>(kFirst) * 4 * kMiB);
  // The reads were faster: they stay, and nothing is being tried.
  calls(t, false, e, false, kFirst, 4 * kMiB, 0.1);
  mask = t.decide(false, &explore);
  EXPECT_TRUE(PathTuner::decided(mask, e));
  EXPECT_FALSE(PathTuner::takes_slots(mask, e));
  EXPECT_EQ(explore, 0u);
  // Other entries stay undecided; the other verdict has its own table.
  EXPECT_FALSE(PathTuner::decided(mask, PathTuner::entry(CollOp::kAllreduce, kMiB)));
  EXPECT_EQ(t.decide(true, &explore), 0u);
}

TEST(PathTuner, TakingOverTheOtherPathPutsItOnTrial) {
  PathTuner t;
  uint64_t explore = 0;
  const int e = PathTuner::entry(CollOp::kAllgather, 4 * kMiB);
  uint64_t mask = pay_try_and_time(t, false, e, true, 4 * kMiB, 0.5, 0.1, &explore);  // the reads, as tried: no new trial
  ASSERT_FALSE(PathTuner::takes_slots(mask, e));
  EXPECT_EQ(explore, 0u);
  // The reads slow down (0.5 x 0.1 + 0.5 x 2.0 = 1.05 > 0.5): the slots take over, on trial.
  calls(t, false, e, false, 4, 4 * kMiB, 2.0);
  mask = t.decide(false, &explore);
  EXPECT_TRUE(PathTuner::takes_slots(mask, e));
  EXPECT_EQ(explore, static_cast<uint64_t>(kFirst) * 4 * kMiB);
  calls(t, false, e, true, kFirst, 4 * kMiB, 0.5);
  mask = t.decide(false, &explore);  // confirmed: no trial
  EXPECT_TRUE(PathTuner::takes_slots(mask, e));
  EXPECT_EQ(explore, 0u);
}

TEST(PathTuner, LargeCallsAreTimedFromTheFirstAndFoldedByBytes) {
  PathTuner t;
  uint64_t explore = 0;
  const size_t big = 256 * kMiB;
  const int e = PathTuner::entry(CollOp::kAllreduce, big);
  calls(t, true, e, false, 1, big, 0.3);  // one call of 256 MiB: past kMinBytes, and timed
  uint64_t mask = t.decide(true, &explore);
  EXPECT_NEAR(t.estimate(true, e, false), 0.3, 1e-3);
  EXPECT_FALSE(PathTuner::takes_slots(mask, e)) << "one call is not kExploreEvery tries' worth (16 x 64 MiB)";
  calls(t, true, e, false, 3, big, 0.3);
  mask = t.decide(true, &explore);
  EXPECT_TRUE(PathTuner::takes_slots(mask, e)) << "the slots are tried after 1 GiB of calls";
  EXPECT_EQ(explore, PathTuner::kMinBytes + big) << "a try of one such call, not five";
}

TEST(PathTuner, SlowerPathIsTriedAgainWhenItsEstimateIsStale) {
  PathTuner t;
  uint64_t explore = 0;
  const int e = PathTuner::entry(CollOp::kBroadcast, 256 * kKiB);
  uint64_t mask = pay_try_and_time(t, true, e, false, 256 * kKiB, 0.1, 0.3, &explore);  // the reads won
  ASSERT_FALSE(PathTuner::takes_slots(mask, e));
  int decisions_until_tried = 0;
  for (int i = 1; i <= 2 * PathTuner::kExploreEvery; ++i) {
    calls(t, true, e, false, kFirst, 256 * kKiB, 0.1);
    mask = t.decide(true, &explore);
    if (PathTuner::takes_slots(mask, e)) {
      decisions_until_tried = i;
      break;
    }
    EXPECT_EQ(explore, 0u);
  }
  EXPECT_EQ(decisions_until_tried, PathTuner::kExploreEvery)
      << "tried again kExploreEvery decisions after the one that timed them";
  EXPECT_GT(explore, 0u);
  // The slots have become the faster (the VM's mode changed): they are kept.
  calls(t, true, e, true, kFirst, 256 * kKiB, 0.01);
  mask = t.decide(true, &explore);
  EXPECT_TRUE(PathTuner::takes_slots(mask, e));
}

TEST(PathTuner, AnEntryWithoutCallsIsNotTried) {
  PathTuner t;
  uint64_t explore = 0;
  const int e = PathTuner::entry(CollOp::kReduceScatter, 16 * kMiB);
  calls(t, false, e, true, kPaid, 16 * kMiB, 0.2);
  t.decide(false, &explore);  // calls came: the reads are tried ...
  EXPECT_GT(explore, 0u);
  uint64_t mask = 0;
  for (int i = 1; i < PathTuner::kExploreEvery; ++i) {
    mask = t.decide(false, &explore);  // ... and still while calls of it may come between others'
    EXPECT_FALSE(PathTuner::takes_slots(mask, e));
  }
  mask = t.decide(false, &explore);  // none came for kExploreEvery: the slots, the one estimate
  EXPECT_TRUE(PathTuner::decided(mask, e));
  EXPECT_TRUE(PathTuner::takes_slots(mask, e));
  EXPECT_EQ(explore, 0u);
}

}  // namespace
}  // namespace dtrain

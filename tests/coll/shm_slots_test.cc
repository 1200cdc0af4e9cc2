// Broadcast, all-gather, reduce-scatter and all-reduce through the shared-memory context's slots
// (coll/shm_slots.cc): sizes that span many chunks and pieces, slots of several sizes, uneven
// blocks, every root; a rank in another call and a dead root are named, as on every path.
#include <gtest/gtest.h>

#include <limits>
#include <mutex>
#include <string>

#include "base/error.h"
#include "coll/collectives.h"
#include "coll/path_tuner.h"
#include "coll/shm_context.h"
#include "coll_test_util.h"
#include "support/world.h"

namespace dtrain {
namespace {

testing::WorldOptions slots_always() {
  testing::WorldOptions o;
  o.coll.shm_slots_bytes = size_t{1} << 30;  // every size through the slots
  o.coll.shm_cores = CoreDistance::kClose;    // ... also at 2 ranks, whatever the machine's cores
  return o;
}

TEST(ShmSlots, BroadcastEveryRootAcrossManyChunks) {
  for (int p : {2, 3, 6}) {
    testing::run_world(p, slots_always(), [&](Communicator& c) {
      for (size_t slot : {size_t{256}, size_t{4096}, size_t{64} << 10}) {
        ShmContext ctx(c, slot);
        // 1 element, a chunk's worth +1, and many times the slot (the ring wraps; the root
        // waits for the readers before reusing a region).
        for (size_t n : {size_t{1}, slot / 4 + 1, 9 * slot / 4 + 3, size_t{100003}}) {
          for (int root = 0; root < p; ++root) {
            const DType t = DType::kFloat32;
            auto buf = c.rank() == root ? testing::input(t, root, n) : std::vector<char>(n * 4, 0);
            BroadcastOptions o;
            o.algorithm = Algorithm::kShmDirect;
            o.shm = &ctx;
            broadcast(c, buf.data(), n, t, root, o);
            ASSERT_EQ(testing::compare(buf, testing::input(t, root, n), t), "")
                << "p=" << p << " slot=" << slot << " n=" << n << " root=" << root;
          }
        }
      }
    });
  }
}

// With a core per rank and the cores close the all-reduce takes the slots (coll/shm_direct.cc):
// sizes of many slots, out of place and in place, float32 and int32 (exact sums).
TEST(ShmSlots, AllreduceOfManySlotsWithACorePerRank) {
  testing::run_world(2, slots_always(), [&](Communicator& c) {
    ShmContext ctx(c, 64 << 10);
    for (DType t : {DType::kFloat32, DType::kInt32}) {
      for (size_t n : {(size_t{8} << 20) / 4 - 1, (size_t{8} << 20) / 4 + 12345}) {
        AllreduceOptions o;
        o.algorithm = Algorithm::kShmDirect;
        o.shm = &ctx;
        auto in = testing::input(t, c.rank(), n);
        std::vector<char> out(in.size());
        allreduce(c, in.data(), out.data(), n, t, ReduceOp::kSum, o);
        ASSERT_EQ(testing::compare(out, testing::expected_reduce(t, 2, n, ReduceOp::kSum), t), "") << "n=" << n;
        allreduce(c, in.data(), n, t, ReduceOp::kSum, o);  // in place
        ASSERT_EQ(testing::compare(in, testing::expected_reduce(t, 2, n, ReduceOp::kSum), t), "") << "in place n=" << n;
      }
    }
  });
}

// Two ranks with a core each probe how close their cores are when the context is built and
// agree on where the all-reduce takes the slots (kSlotsAllreduceCloseMinBytes or
// kSlotsAllreduceFarMinBytes, the machine decides which); other rank counts do not probe. Sums
// around the close threshold are exact on whichever path the probe chose.
TEST(ShmSlots, RoundTripProbeIsAgreedByBothRanks) {
  std::mutex mu;
  std::vector<size_t> seen;
  testing::WorldOptions probe = slots_always();
  probe.coll.shm_cores = CoreDistance::kProbe;
  testing::run_world(2, probe, [&](Communicator& c) {
    ShmContext ctx(c, 64 << 10);
    const size_t from = ctx.slots_allreduce_min_bytes();
    EXPECT_TRUE(from == kSlotsAllreduceCloseMinBytes || from == kSlotsAllreduceFarMinBytes) << from;
    EXPECT_EQ(ctx.cores_far(), from == kSlotsAllreduceFarMinBytes);
    EXPECT_STREQ(ctx.core_distance_from(), "probe");
    if (c.rank() == 0) {
      EXPECT_GT(ctx.round_trip_ns(), 0);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(from);
    }
    for (size_t n : {kSlotsAllreduceCloseMinBytes / 4 - 1, kSlotsAllreduceCloseMinBytes / 4 + 77}) {
      AllreduceOptions o;
      o.algorithm = Algorithm::kShmDirect;
      o.shm = &ctx;
      auto in = testing::input(DType::kInt32, c.rank(), n);
      std::vector<char> out(in.size());
      allreduce(c, in.data(), out.data(), n, DType::kInt32, ReduceOp::kSum, o);
      ASSERT_EQ(testing::compare(out, testing::expected_reduce(DType::kInt32, 2, n, ReduceOp::kSum), DType::kInt32), "")
          << "n=" << n;
    }
  });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], seen[1]);
  testing::run_world(3, slots_always(), [&](Communicator& c) {
    ShmContext ctx(c, 64 << 10);
    EXPECT_EQ(ctx.slots_allreduce_min_bytes(), kSlotsAllreduceFarMinBytes);
    EXPECT_EQ(ctx.round_trip_ns(), 0);
    EXPECT_FALSE(ctx.cores_far());
    EXPECT_STREQ(ctx.core_distance_from(), "");  // no verdict needed
  });
}

// The VM moves its vCPUs within seconds, so two ranks re-probe their distance as calls go
// (ShmContext::after_call): every rank makes the same probes at the same call, and whatever
// each probe says (the path of the next calls can change between slots and reads), every
// result is exact. Calls of 16 KiB or less count for nothing; with DTRAIN_SHM_REPROBE_MS=0
// only the construction probes.
// An out-of-place shm_direct all-reduce through `ctx` of n elements of each rank's input:
// the sums are exact.
void allreduce_is_exact(Communicator& c, ShmContext& ctx, DType t, size_t n, const std::string& what) {
  AllreduceOptions o;
  o.algorithm = Algorithm::kShmDirect;
  o.shm = &ctx;
  const auto in = testing::input(t, c.rank(), n);
  std::vector<char> out(in.size());
  allreduce(c, in.data(), out.data(), n, t, ReduceOp::kSum, o);
  EXPECT_EQ(testing::compare(out, testing::expected_reduce(t, c.size(), n, ReduceOp::kSum), t), "") << what;
}

TEST(ShmSlots, DistanceIsReprobedAsCallsGoAndBothRanksAgree) {
  struct Seen {
    int64_t probes, flips, close, far;
    bool far_now;
  };
  for (int64_t every_ms : {int64_t{1}, int64_t{0}}) {
    std::mutex mu;
    std::vector<Seen> seen;
    testing::WorldOptions w;
    w.coll.shm_cores = CoreDistance::kProbe;
    w.coll.shm_reprobe_ms = every_ms;
    constexpr int kCalls = 300;
    testing::run_world(2, w, [&](Communicator& c) {
      ShmContext ctx(c, 64 << 10);
      if (ctx.oversubscribed()) GTEST_SKIP() << "one core: two ranks share it, and no distance is probed";
      const DType t = DType::kInt32;
      for (int k = 0; k < kCalls; ++k) {
        const size_t n = 5000 + 1000 * static_cast<size_t>(k % 7);  // 20-44 KiB a rank
        const int root = k % 2;
        switch (k % 4) {
          case 0:
            allreduce_is_exact(c, ctx, t, n, "call " + std::to_string(k));
            break;
          case 1: {
            AllgatherOptions o;
            o.algorithm = Algorithm::kShmDirect;
            o.shm = &ctx;
            auto mine = testing::input(t, c.rank(), n);
            std::vector<char> all(2 * mine.size()), want = testing::input(t, 0, n), second = testing::input(t, 1, n);
            want.insert(want.end(), second.begin(), second.end());
            allgather(c, mine.data(), all.data(), n, t, o);
            ASSERT_EQ(testing::compare(all, want, t), "") << "call " << k;
            break;
          }
          case 2: {
            BroadcastOptions o;
            o.algorithm = Algorithm::kShmDirect;
            o.shm = &ctx;
            auto buf = c.rank() == root ? testing::input(t, root, n) : std::vector<char>(n * 4, 0);
            broadcast(c, buf.data(), n, t, root, o);
            ASSERT_EQ(testing::compare(buf, testing::input(t, root, n), t), "") << "call " << k;
            break;
          }
          default: {
            // An 8-byte all-reduce between them: not counted, and no probe after it.
            AllreduceOptions o;
            o.shm = &ctx;
            int64_t one = c.rank() + 1;
            allreduce(c, &one, 1, DType::kInt64, ReduceOp::kSum, o);
            ASSERT_EQ(one, 3) << "call " << k;
          }
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back({ctx.probes(), ctx.flips(), ctx.close_calls(), ctx.far_calls(), ctx.cores_far()});
    });
    if (seen.empty()) continue;  // skipped
    ASSERT_EQ(seen.size(), 2u);
    const Seen& a = seen[0];
    const Seen& b = seen[1];
    EXPECT_EQ(a.probes, b.probes);
    EXPECT_EQ(a.flips, b.flips);
    EXPECT_EQ(a.close, b.close);
    EXPECT_EQ(a.far, b.far);
    EXPECT_EQ(a.far_now, b.far_now);
    if (every_ms > 0) {
      // 225 counted calls, each charged at least 64 KiB: 14 MiB, past ShmContext::kFirstProbeBytes.
      EXPECT_EQ(a.close + a.far, 3 * kCalls / 4) << "every call past 16 KiB is counted";
      EXPECT_GE(a.probes, 2) << "the construction's probe and at least one re-probe";
      EXPECT_LE(a.flips, a.probes - 1);
    } else {
      EXPECT_EQ(a.probes, 1) << "DTRAIN_SHM_REPROBE_MS=0: the construction's probe only";
      EXPECT_EQ(a.close + a.far, 0);
    }
  }
}

// Two ranks that re-probe also time both paths (coll/path_tuner.h): once an op and size
// class has had kExploreEvery tries' worth of calls it tries the path the fixed rule did not
// take, so both paths carry calls; both ranks take the same path at every call (the counts
// agree), and every result is exact whichever path it took. DTRAIN_SHM_TIMED_PATHS=0 times
// nothing.
// `calls` shm_direct calls through ctx, alternately a 1.2 MB all-reduce and a 280 KB
// broadcast (past the one phase and the slots' 256 KiB broadcast threshold) from each rank
// in turn: every result exact.
void mixed_calls_are_exact(Communicator& c, ShmContext& ctx, int calls) {
  const DType t = DType::kFloat32;
  for (int k = 0; k < calls; ++k) {
    if (k % 2 == 0) {
      allreduce_is_exact(c, ctx, t, 300000, "call " + std::to_string(k));
      continue;
    }
    const size_t n = 70000;
    BroadcastOptions o;
    o.algorithm = Algorithm::kShmDirect;
    o.shm = &ctx;
    const int root = (k / 2) % c.size();
    auto buf = c.rank() == root ? testing::input(t, root, n) : std::vector<char>(n * 4, 0);
    broadcast(c, buf.data(), n, t, root, o);
    ASSERT_EQ(testing::compare(buf, testing::input(t, root, n), t), "") << "call " << k;
  }
}

TEST(ShmSlots, TimedPathsAreTriedAgreedAndExact) {
  struct Seen {
    int64_t slots, reads;
  };
  for (bool timed : {true, false}) {
    std::mutex mu;
    std::vector<Seen> seen;
    testing::WorldOptions w;
    w.coll.shm_cores = CoreDistance::kProbe;
    w.coll.shm_reprobe_ms = 1;
    w.coll.shm_timed_paths = timed;
    constexpr int kCalls = 2 * (PathTuner::kExploreEvery * PathTuner::kMinCalls + 40);
    testing::run_world(2, w, [&](Communicator& c) {
      ShmContext ctx(c, 64 << 10);
      if (ctx.oversubscribed()) GTEST_SKIP() << "one core: two ranks share it, and no distance is probed";
      mixed_calls_are_exact(c, ctx, kCalls);
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back({ctx.slots_calls(), ctx.reads_calls()});
    });
    if (seen.empty()) continue;  // skipped
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].slots, seen[1].slots);
    EXPECT_EQ(seen[0].reads, seen[1].reads);
    if (timed) {
      EXPECT_EQ(seen[0].slots + seen[0].reads, kCalls) << "every call past the one phase is counted";
      EXPECT_GT(seen[0].slots, 0) << "each path is tried";
      EXPECT_GT(seen[0].reads, 0) << "each path is tried";
    } else {
      EXPECT_EQ(seen[0].slots + seen[0].reads, 0);
    }
  }
}

// Ranks beyond the cores time both paths too, without a verdict (ShmContext::count_decision):
// every rank takes the same path for every call, each path is tried, and every call is exact.
TEST(ShmSlots, TimedPathsBeyondTheCoresAreTriedAgreedAndExact) {
  struct Seen {
    int64_t slots, reads, decisions;
  };
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (bool timed : {true, false}) {
    std::mutex mu;
    std::vector<Seen> seen;
    testing::WorldOptions w;
    w.ranks_on_host = 2 * cores;  // two ranks a core
    w.coll.shm_timed_paths = timed;
    constexpr int kCalls = 2 * (PathTuner::kExploreEvery * PathTuner::kMinCalls + 40);
    testing::run_world(4, w, [&](Communicator& c) {
      ShmContext ctx(c, 64 << 10);
      ASSERT_TRUE(ctx.oversubscribed());
      mixed_calls_are_exact(c, ctx, kCalls);
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back({ctx.slots_calls(), ctx.reads_calls(), ctx.decisions()});
    });
    ASSERT_EQ(seen.size(), 4u);
    for (const Seen& s : seen) {
      EXPECT_EQ(s.slots, seen[0].slots);
      EXPECT_EQ(s.reads, seen[0].reads);
      EXPECT_EQ(s.decisions, seen[0].decisions);
    }
    if (timed) {
      EXPECT_EQ(seen[0].slots + seen[0].reads, kCalls) << "every call past the one phase is counted";
      EXPECT_GT(seen[0].decisions, 0);
      EXPECT_GT(seen[0].slots, 0) << "each path is tried";
      EXPECT_GT(seen[0].reads, 0) << "each path is tried";
    } else {
      EXPECT_EQ(seen[0].slots + seen[0].reads, 0);
      EXPECT_EQ(seen[0].decisions, 0);
    }
  }
}

// Calls of ShmContext::kDecideBytes or more bring a decision after every call, and each must
// still take effect two calls later (one waiting decision replaced by the next never did, so
// every such call stayed on the fixed rule): after a try's worth of broadcasts of that size
// the other path is tried, every rank on the same path at every call, every result exact.
TEST(ShmSlots, DecisionsAfterEveryCallBeyondTheCoresTakeEffect) {
  struct Seen {
    int64_t slots, reads;
  };
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::mutex mu;
  std::vector<Seen> seen;
  testing::WorldOptions w;
  w.ranks_on_host = 2 * cores;  // two ranks a core
  w.coll.shm_timed_paths = true;
  // The first try comes after kExploreEvery x kMinBytes of calls on the first path; then a
  // few calls of the tried one.
  constexpr int kCalls = static_cast<int>(PathTuner::kExploreEvery * PathTuner::kMinBytes / ShmContext::kDecideBytes) + 12;
  testing::run_world(4, w, [&](Communicator& c) {
    ShmContext ctx(c, 256 << 10);
    ASSERT_TRUE(ctx.oversubscribed());
    const DType t = DType::kFloat32;
    const size_t n = ShmContext::kDecideBytes / 4;
    const auto want = testing::input(t, 0, n);
    BroadcastOptions o;
    o.algorithm = Algorithm::kShmDirect;
    o.shm = &ctx;
    std::vector<char> buf(n * 4);
    for (int k = 0; k < kCalls; ++k) {
      if (c.rank() == 0) buf = want;
      else std::fill(buf.begin(), buf.end(), 0);
      broadcast(c, buf.data(), n, t, 0, o);
      ASSERT_EQ(testing::compare(buf, want, t), "") << "call " << k;
    }
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back({ctx.slots_calls(), ctx.reads_calls()});
  });
  ASSERT_EQ(seen.size(), 4u);
  for (const Seen& s : seen) {
    EXPECT_EQ(s.slots, seen[0].slots);
    EXPECT_EQ(s.reads, seen[0].reads);
  }
  EXPECT_EQ(seen[0].slots + seen[0].reads, kCalls);
  EXPECT_GT(seen[0].slots, 0) << "each path is tried";
  EXPECT_GT(seen[0].reads, 0) << "each path is tried";
}

// With a core per rank, an all-gather whose output outgrows the host's last-level cache
// reads the peers' buffers even where the verdict allows the slots (they copy each block
// twice, and past the cache both copies go to memory); ranks that outnumber the cores keep
// the slots at every size. Reduce-scatter and all-reduce are not capped.
TEST(ShmSlots, AllgatherPastTheLastLevelCacheTakesTheReads) {
  testing::WorldOptions w = slots_always();
  testing::run_world(2, w, [&](Communicator& c) {
    ShmContext ctx(c, 64 << 10);
    if (ctx.oversubscribed()) {
      EXPECT_EQ(ctx.slots_allgather_max_bytes(), std::numeric_limits<size_t>::max());
      GTEST_SKIP() << "one core: the two ranks share it, and the slots carry every size";
    }
    const size_t cap = ctx.slots_allgather_max_bytes();
    ASSERT_GE(cap, size_t{256} << 10) << "a last-level cache smaller than an L2?";
    ASSERT_LT(cap, size_t{1} << 30) << "the cap must come from the cache, not stay unlimited";
    EXPECT_TRUE(shm_direct_takes_slots(CollOp::kAllgather, c, &ctx, cap));
    EXPECT_FALSE(shm_direct_takes_slots(CollOp::kAllgather, c, &ctx, cap + 1));
    EXPECT_TRUE(shm_direct_takes_slots(CollOp::kReduceScatter, c, &ctx, cap + 1));
    EXPECT_TRUE(shm_direct_takes_slots(CollOp::kAllreduce, c, &ctx, cap + 1));
  });
}

// A stated distance (DTRAIN_SHM_CORES) replaces the probe: far apart, the 2-rank all-gather,
// reduce-scatter and broadcast read each other's buffers instead of taking the slots, at sizes
// of one element, past one slot and many slots, and every root; close, the all-reduce takes
// the slots from the close threshold. Results are exact either way.
TEST(ShmSlots, StatedCoreDistanceSkipsTheProbeAndEveryPathIsExact) {
  for (CoreDistance d : {CoreDistance::kFar, CoreDistance::kClose}) {
    testing::WorldOptions w = slots_always();
    w.coll.shm_cores = d;
    testing::run_world(2, w, [&](Communicator& c) {
      ShmContext ctx(c, 1024);
      EXPECT_EQ(ctx.round_trip_ns(), 0);
      EXPECT_EQ(ctx.cores_far(), d == CoreDistance::kFar);
      EXPECT_STREQ(ctx.core_distance_from(), "DTRAIN_SHM_CORES");
      EXPECT_EQ(ctx.slots_allreduce_min_bytes(),
                d == CoreDistance::kFar ? kSlotsAllreduceFarMinBytes : kSlotsAllreduceCloseMinBytes);
      EXPECT_EQ(ctx.small_allreduce_bytes(), 1024u);  // never more than the slot
      {
        ShmContext big(c, 64 << 10);
        EXPECT_EQ(big.small_allreduce_bytes(), ShmContext::kSmallAllreduceBytes);
        EXPECT_EQ(big.one_phase_allreduce_bytes(), d == CoreDistance::kFar ? ShmContext::kSmallAllreduceFarBytes
                                                                            : ShmContext::kSmallAllreduceBytes);
        // Far apart the one phase streams its writes past the caches, from 4 KiB.
        EXPECT_EQ(big.streams_to_peers(ShmContext::kStreamToPeersMinBytes), d == CoreDistance::kFar);
        EXPECT_FALSE(big.streams_to_peers(ShmContext::kStreamToPeersMinBytes - 1));
        // A broadcast's root streams from 16 KiB either way at two ranks with a core each.
        EXPECT_TRUE(big.broadcast_streams(ShmContext::kBroadcastStreamsBytes));
        EXPECT_EQ(big.broadcast_streams(ShmContext::kBroadcastStreamsBytes - 4), d == CoreDistance::kFar);
        for (int root : {0, 1}) {
          const size_t n = (32u << 10) / 4;
          BroadcastOptions bo;
          bo.shm = &big;
          auto buf = c.rank() == root ? testing::input(DType::kInt32, root, n) : std::vector<char>(n * 4, 0);
          EXPECT_EQ(broadcast(c, buf.data(), n, DType::kInt32, root, bo), Algorithm::kShmDirect);
          ASSERT_EQ(testing::compare(buf, testing::input(DType::kInt32, root, n), DType::kInt32), "") << "root " << root;
        }
        // Either side of the far threshold, through the communicator's default choice.
        for (size_t n : {ShmContext::kSmallAllreduceFarBytes / 4, ShmContext::kSmallAllreduceFarBytes / 4 + 1000}) {
          AllreduceOptions o;
          o.shm = &big;
          auto in = testing::input(DType::kInt32, c.rank(), n);
          std::vector<char> out(in.size());
          allreduce(c, in.data(), out.data(), n, DType::kInt32, ReduceOp::kSum, o);
          ASSERT_EQ(testing::compare(out, testing::expected_reduce(DType::kInt32, 2, n, ReduceOp::kSum), DType::kInt32), "")
              << "n=" << n;
        }
        // One phase, streamed or not, up to 64 KiB for the all-gather and reduce-scatter (32
        // KiB at 2 ranks, results exact); the all-reduce past its far one phase still takes
        // shm_direct (its reads), not the cost model's message algorithms.
        const size_t half = (32u << 10) / 2 / 4;  // elements per rank
        AllgatherOptions ag;
        ag.shm = &big;
        auto mine = testing::input(DType::kInt32, c.rank(), half);
        std::vector<char> all(2 * half * 4), want;
        for (int r = 0; r < 2; ++r) {
          auto part = testing::input(DType::kInt32, r, half);
          want.insert(want.end(), part.begin(), part.end());
        }
        EXPECT_TRUE(shm_direct_one_phase(CollOp::kAllgather, c, &big, 2 * half * 4));
        EXPECT_EQ(allgather(c, mine.data(), all.data(), half, DType::kInt32, ag), Algorithm::kShmDirect);
        ASSERT_EQ(testing::compare(all, want, DType::kInt32), "");
        ReduceScatterOptions rs;
        rs.shm = &big;
        auto whole = testing::input(DType::kInt32, c.rank(), 2 * half);
        std::vector<char> mine_sum(half * 4);
        EXPECT_EQ(reduce_scatter(c, whole.data(), mine_sum.data(), half, DType::kInt32, ReduceOp::kSum, rs),
                  Algorithm::kShmDirect);
        auto sums = testing::expected_reduce(DType::kInt32, 2, 2 * half, ReduceOp::kSum);
        std::vector<char> my_sums(sums.begin() + c.rank() * half * 4, sums.begin() + (c.rank() + 1) * half * 4);
        ASSERT_EQ(testing::compare(mine_sum, my_sums, DType::kInt32), "");
        const size_t past = (48u << 10) / 4;  // past the far all-reduce's one phase
        EXPECT_EQ(shm_direct_one_phase(CollOp::kAllreduce, c, &big, past * 4), d != CoreDistance::kFar);
        AllreduceOptions ar;
        ar.shm = &big;
        auto in = testing::input(DType::kInt32, c.rank(), past);
        std::vector<char> out(in.size());
        EXPECT_EQ(allreduce(c, in.data(), out.data(), past, DType::kInt32, ReduceOp::kSum, ar), Algorithm::kShmDirect);
        ASSERT_EQ(testing::compare(out, testing::expected_reduce(DType::kInt32, 2, past, ReduceOp::kSum), DType::kInt32), "");
      }
      const DType t = DType::kFloat32;
      for (size_t n : {size_t{1}, size_t{300}, size_t{20000}}) {
        auto mine = testing::input(t, c.rank(), n);
        std::vector<char> all(2 * n * 4, 0), want;
        for (int r = 0; r < 2; ++r) {
          auto part = testing::input(t, r, n);
          want.insert(want.end(), part.begin(), part.end());
        }
        AllgatherOptions ag;
        ag.algorithm = Algorithm::kShmDirect;
        ag.shm = &ctx;
        allgather(c, mine.data(), all.data(), n, t, ag);
        ASSERT_EQ(testing::compare(all, want, t), "") << "all-gather n=" << n;

        auto in = testing::input(t, c.rank(), 2 * n);
        std::vector<char> out(n * 4);
        ReduceScatterOptions rs;
        rs.algorithm = Algorithm::kShmDirect;
        rs.shm = &ctx;
        reduce_scatter(c, in.data(), out.data(), n, t, ReduceOp::kSum, rs);
        ASSERT_EQ(testing::compare(out, testing::expected_reduce(t, 2, n, ReduceOp::kSum, c.rank() * n), t), "")
            << "reduce-scatter n=" << n;

        for (int root = 0; root < 2; ++root) {
          auto buf = c.rank() == root ? testing::input(t, root, n) : std::vector<char>(n * 4, 0);
          BroadcastOptions b;
          b.algorithm = Algorithm::kShmDirect;
          b.shm = &ctx;
          broadcast(c, buf.data(), n, t, root, b);
          ASSERT_EQ(testing::compare(buf, testing::input(t, root, n), t), "") << "broadcast n=" << n << " root " << root;
        }
      }
    });
  }
}

TEST(ShmSlots, AllgathervUnevenBlocksLargerThanTheSlot) {
  for (int p : {2, 3, 5}) {
    testing::run_world(p, slots_always(), [&](Communicator& c) {
      ShmContext ctx(c, 512);
      const DType t = DType::kInt32;
      std::vector<size_t> counts;
      // rank 0: 7 elements, rank 1: none (its send pointer is an empty vector's), then more
      for (int r = 0; r < p; ++r) counts.push_back(r == 1 ? 0 : static_cast<size_t>(r * 300 + 7));
      size_t total = 0;
      std::vector<char> want;
      for (int r = 0; r < p; ++r) {
        auto part = testing::input(t, r, counts[r]);
        want.insert(want.end(), part.begin(), part.end());
        total += counts[r];
      }
      std::vector<char> all(total * 4, 0);
      auto mine = testing::input(t, c.rank(), counts[c.rank()]);
      AllgatherOptions o;
      o.algorithm = Algorithm::kShmDirect;
      o.shm = &ctx;
      allgatherv(c, mine.data(), all.data(), counts, t, o);
      ASSERT_EQ(testing::compare(all, want, t), "") << "p=" << p;
    });
  }
}

TEST(ShmSlots, ReduceScatterInPiecesIsRankOrdered) {
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kProd};
  for (int p : {2, 4, 7}) {
    testing::run_world(p, slots_always(), [&](Communicator& c) {
      ShmContext ctx(c, 1024);
      for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
        for (ReduceOp op : ops) {
          for (size_t n : {size_t{1}, size_t{33}, size_t{5000}}) {
            auto in = testing::input(t, c.rank(), n * p, op);
            std::vector<char> out(n * dtype_size(t));
            ReduceScatterOptions o;
            o.algorithm = Algorithm::kShmDirect;
            o.shm = &ctx;
            reduce_scatter(c, in.data(), out.data(), n, t, op, o);
            ASSERT_EQ(testing::compare(out, testing::expected_reduce(t, p, n, op, c.rank() * n), t), "")
                << "p=" << p << " n=" << n << " " << dtype_name(t) << " " << reduce_op_name(op);
          }
        }
      }
    });
  }
}

// Beyond the slots (shm_slots_bytes 0): the cross-memory path reduces straight into recv when
// it lies apart from the input or is the rank's own block of it, and through a working buffer
// when recv overlaps the input elsewhere (here: shifted by one element, so it overlaps a block
// the next rank reads). Repeated, so later calls get the pool's used buffers (Call::scratch,
// Call::temp) with the previous call's contents in them.
TEST(ShmDirect, ReduceScatterInPlaceAndApartReusesWarmScratch) {
  testing::WorldOptions w;
  w.coll.shm_slots_bytes = 0;
  for (int p : {2, 3}) {
    testing::run_world(p, w, [&](Communicator& c) {
      const DType t = DType::kFloat32;
      const size_t n = (size_t{300} << 10) + 7;  // > one 256 KiB piece per block
      for (int round = 0; round < 3; ++round) {
        for (int where : {0, 1, 2}) {  // apart, own block, overlapping the next block
          const ReduceOp op = round == 1 ? ReduceOp::kMax : ReduceOp::kSum;
          auto in = testing::input(t, c.rank(), n * p, op);
          in.resize(in.size() + 4);  // room for the shifted recv of the last rank
          std::vector<char> out(n * 4, 0x5a);
          char* recv = where == 0 ? out.data() : in.data() + (c.rank() * n + (where == 2)) * 4;
          ReduceScatterOptions o;
          o.algorithm = Algorithm::kShmDirect;
          reduce_scatter(c, in.data(), recv, n, t, op, o);
          std::vector<char> got(recv, recv + n * 4);
          ASSERT_EQ(testing::compare(got, testing::expected_reduce(t, p, n, op, c.rank() * n), t), "")
              << "p=" << p << " round=" << round << " recv=" << where;
        }
      }
    });
  }
}

// A reader whose count differs runs a different number of chunks: the closing phase finds it,
// and every rank names the call each side made.
TEST(ShmSlots, BroadcastOfAnotherSizeIsADesyncNamingBothCalls) {
  const int p = 3;
  std::mutex mu;
  std::vector<std::string> errors(p);
  testing::WorldOptions o = slots_always();
  o.timeout_s = 20;
  testing::run_world(p, o, [&](Communicator& c) {
    std::vector<float> buf(c.rank() == 2 ? 3000 : 1000, 1.0f);
    try {
      BroadcastOptions bo;
      bo.algorithm = Algorithm::kShmDirect;  // with the communicator's own context
      broadcast(c, buf.data(), buf.size(), DType::kFloat32, 0, bo);
    } catch (const Desync& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
    }
  });
  for (int r = 0; r < p; ++r) {
    EXPECT_NE(errors[r].find("float32 x 3000"), std::string::npos) << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("float32 x 1000"), std::string::npos) << r << ": " << errors[r];
  }
}

// Readers wait for the root alone between chunks: a root that is gone is named by that wait.
TEST(ShmSlots, GoneRootIsNamedByTheReaders) {
  const int p = 3, root = 1;
  std::mutex mu;
  std::vector<int> peers(p, -1);
  std::vector<std::string> errors(p);
  testing::run_world(p, slots_always(), [&](Communicator& c) {
    std::vector<float> buf(50000, 1.0f);
    BroadcastOptions bo;
    bo.algorithm = Algorithm::kShmDirect;
    try {
      broadcast(c, buf.data(), buf.size(), DType::kFloat32, root, bo);
      if (c.rank() == root) {
        c.transport().close();
        return;
      }
      broadcast(c, buf.data(), buf.size(), DType::kFloat32, root, bo);
    } catch (const PeerFailure& e) {
      std::lock_guard<std::mutex> lock(mu);
      peers[c.rank()] = e.peer();
      errors[c.rank()] = e.what();
    }
  });
  for (int r = 0; r < p; ++r) {
    if (r == root) continue;
    EXPECT_EQ(peers[r], root) << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("rank 1 is gone"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("broadcast"), std::string::npos) << errors[r];
  }
}

}  // namespace
}  // namespace dtrain

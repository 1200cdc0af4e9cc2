// The shared-memory fast paths behind CollOptions::shm: the one-phase small all-reduce and
// the flag-synchronised shm_direct, checked like the other algorithms; mismatched calls and
// absent ranks are still named.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/huge_pages.h"
#include "coll/collectives.h"
#include "coll/cost_model.h"
#include "coll/shm_context.h"
#include "coll_test_util.h"
#include "support/smaps.h"
#include "support/world.h"

namespace dtrain {
namespace {

TEST(ShmContextTest, AllreduceThroughTheContext) {
  const DType types[] = {DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kUInt8, DType::kFloat64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kProd, ReduceOp::kMin};
  for (int p : {1, 2, 3, 5, 8}) {
    testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
      ShmContext ctx(c, 4096);
      int k = 0;
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{100003}}) {
        for (Algorithm a : {Algorithm::kAuto, Algorithm::kShmDirect, Algorithm::kRing}) {
          ++k;
          DType t = types[k % 5];
          ReduceOp op = ops[(k / 5) % 5];
          auto buf = testing::input(t, c.rank(), n, op);
          AllreduceOptions o;
          o.algorithm = a;
          o.shm = &ctx;
          o.segment_bytes = 1024;
          allreduce(c, buf.data(), n, t, op, o);
          ASSERT_EQ(testing::compare(buf, testing::expected_reduce(t, p, n, op), t), "")
              << "p=" << p << " n=" << n << " " << algorithm_name(a) << " " << dtype_name(t) << " "
              << reduce_op_name(op);
        }
      }
    });
  }
}

// A group of 2 inside a job with more ranks on the host than cores (a hybrid job's dp or
// pipeline group) shares the cores with the job's other ranks: its context yields rather
// than spins, leaves no helper cores to spare, and does not run the 2-rank round-trip probe
// (which spun ~0.1 s of CPU per rank in an 8-rank job on 2 cores, for a verdict about cores
// the ranks did not have to themselves).
TEST(ShmContextTest, AGroupOfTwoInAnOversubscribedJobIsOversubscribed) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  testing::WorldOptions o;
  o.ranks_on_host = 4 * cores;
  testing::run_world(4, o, [&](Communicator& c) {
    std::shared_ptr<Communicator> pair = c.split(c.rank() / 2, c.rank());
    ASSERT_EQ(pair->size(), 2);
    EXPECT_EQ(pair->transport().ranks_on_host(), 4 * cores);
    ShmContext ctx(*pair, 4096);
    EXPECT_TRUE(ctx.oversubscribed());
    EXPECT_FALSE(ctx.spare_cores());
    EXPECT_EQ(ctx.round_trip_ns(), 0);
    std::vector<float> v(1000, static_cast<float>(c.rank()));
    AllreduceOptions ao;
    ao.shm = &ctx;
    allreduce(*pair, v.data(), v.size(), DType::kFloat32, ReduceOp::kSum, ao);
    const float want = c.rank() < 2 ? 1.0f : 5.0f;
    EXPECT_EQ(v.front(), want);
    EXPECT_EQ(v.back(), want);
  });
  // Without the job's count a group is judged by its own size, as before.
  if (cores >= 2)
    testing::run_world(2, TransportKind::kShm, [&](Communicator& c) {
      ShmContext ctx(c, 4096);
      EXPECT_FALSE(ctx.oversubscribed());
    });
}

// With more ranks than cores an all-reduce is one phase only up to a few KiB
// (kOnePhaseOversubscribedBytes / ranks per core): every rank reducing every input costs p
// times the CPU the ranks share. Past that, up to small_allreduce_bytes(), auto still takes
// shm_direct without the cost model, through the slots. Exact on either side.
// Runs fn on 4 ranks that count four to a core of this host, each with its context.
void run_four_a_core(const std::function<void(Communicator&, ShmContext&)>& fn) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  testing::WorldOptions o;
  o.ranks_on_host = 4 * cores;
  testing::run_world(4, o, [&](Communicator& c) {
    ShmContext ctx(c, 64 << 10);
    ASSERT_TRUE(ctx.oversubscribed());
    fn(c, ctx);
  });
}

TEST(ShmContextTest, OversubscribedAllreduceIsOnePhaseOnlyUpToAFewKiB) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  run_four_a_core([&](Communicator& c, ShmContext& ctx) {
    const size_t one = ShmContext::kOnePhaseOversubscribedBytes / 4;
    EXPECT_EQ(ctx.one_phase_allreduce_bytes(), one);
    EXPECT_TRUE(shm_direct_one_phase(CollOp::kAllreduce, c, &ctx, one));
    EXPECT_FALSE(shm_direct_one_phase(CollOp::kAllreduce, c, &ctx, one + 4));
    EXPECT_TRUE(shm_direct_one_phase(CollOp::kAllgather, c, &ctx, one + 4));  // other ops keep the window
    EXPECT_TRUE(shm_direct_preferred(CollOp::kAllreduce, c, &ctx, one + 4));
    EXPECT_FALSE(ctx.broadcast_streams(ShmContext::kBroadcastStreamsBytes));  // measured at a core each only
    EXPECT_TRUE(shm_direct_takes_slots(CollOp::kAllreduce, c, &ctx, one + 4));
    EXPECT_FALSE(shm_direct_preferred(CollOp::kAllreduce, c, &ctx, ctx.small_allreduce_bytes() + 4));
    for (size_t n : {one / 4, one / 4 + 1, size_t{10000}}) {
      AllreduceOptions ao;
      ao.shm = &ctx;
      auto in = testing::input(DType::kInt32, c.rank(), n);
      std::vector<char> out(in.size());
      EXPECT_EQ(allreduce(c, in.data(), out.data(), n, DType::kInt32, ReduceOp::kSum, ao), Algorithm::kShmDirect);
      ASSERT_EQ(testing::compare(out, testing::expected_reduce(DType::kInt32, 4, n, ReduceOp::kSum), DType::kInt32), "")
          << "n=" << n;
    }
  });
  if (cores >= 2)
    testing::run_world(2, TransportKind::kShm, [&](Communicator& c) {
      ShmContext ctx(c, 64 << 10);
      // A core each: unchanged, but for the far verdict's own limit.
      EXPECT_EQ(ctx.one_phase_allreduce_bytes(),
                ctx.cores_far() ? ShmContext::kSmallAllreduceFarBytes : ctx.small_allreduce_bytes());
    });
}

// With more ranks than cores a broadcast goes through the slots below 4 MiB and by the
// binomial tree of cross-memory copies from there (coll/shm_direct.cc says why); with a core
// per rank the slots stop at 256 KiB. Exact on either side of the boundary, from any root.
TEST(ShmContextTest, OversubscribedBroadcastTakesTheTreeFromFourMiB) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  run_four_a_core([&](Communicator& c, ShmContext& ctx) {
    const size_t boundary = size_t{4} << 20;
    EXPECT_TRUE(shm_direct_takes_slots(CollOp::kBroadcast, c, &ctx, boundary - 4));
    EXPECT_FALSE(shm_direct_takes_slots(CollOp::kBroadcast, c, &ctx, boundary));
    for (size_t n : {boundary / 4 - 1, boundary / 4 + 3}) {
      for (int root : {0, 3}) {
        auto buf = c.rank() == root ? testing::input(DType::kFloat32, root, n) : std::vector<char>(n * 4, 0);
        BroadcastOptions bo;
        bo.algorithm = Algorithm::kShmDirect;
        bo.shm = &ctx;
        broadcast(c, buf.data(), n, DType::kFloat32, root, bo);
        ASSERT_EQ(testing::compare(buf, testing::input(DType::kFloat32, root, n), DType::kFloat32), "")
            << "n=" << n << " root=" << root;
      }
    }
  });
  if (cores >= 2)
    testing::run_world(2, TransportKind::kShm, [&](Communicator& c) {
      ShmContext ctx(c, 64 << 10);
      EXPECT_FALSE(shm_direct_takes_slots(CollOp::kBroadcast, c, &ctx, size_t{1} << 20));  // a core each
    });
}

// Up to ShmContext::kInlineBytes the one-phase all-reduce carries its data on the arrival
// counter's line, above it in the slot: back-to-back calls that cross the boundary either way
// (so each parity holds data of both kinds in turn) stay exact.
TEST(ShmContextTest, SmallAllreduceAcrossTheInlineBoundary) {
  for (int p : {2, 3, 5}) {
    testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
      ShmContext ctx(c, 4096);
      for (int round = 0; round < 60; ++round) {
        const DType t = round % 3 == 0 ? DType::kUInt8 : round % 3 == 1 ? DType::kFloat32 : DType::kInt64;
        const ReduceOp op = round % 2 ? ReduceOp::kMax : ReduceOp::kSum;
        const size_t limit = ShmContext::kInlineBytes / dtype_size(t);
        const size_t n = round % 4 == 0 ? limit : round % 4 == 1 ? limit + 1 : round % 4 == 2 ? 1 : limit + 5;
        auto buf = testing::input(t, c.rank(), n, op);
        AllreduceOptions o;
        o.algorithm = Algorithm::kShmDirect;
        o.shm = &ctx;
        allreduce(c, buf.data(), n, t, op, o);
        ASSERT_EQ(testing::compare(buf, testing::expected_reduce(t, p, n, op), t), "")
            << "p=" << p << " round=" << round << " n=" << n << " " << dtype_name(t);
      }
    });
  }
}

TEST(ShmContextTest, BroadcastAllgatherReduceScatterThroughTheContext) {
  for (int p : {2, 3, 5}) {
    testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
      ShmContext ctx(c, 1024);
      const DType t = DType::kFloat32;
      for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{70001}}) {
        for (int root : {0, p - 1}) {
          auto buf = c.rank() == root ? testing::input(t, root, n) : std::vector<char>(n * 4, 0);
          BroadcastOptions bo;
          bo.algorithm = Algorithm::kShmDirect;
          bo.shm = &ctx;
          broadcast(c, buf.data(), n, t, root, bo);
          ASSERT_EQ(testing::compare(buf, testing::input(t, root, n), t), "") << "broadcast n=" << n;
        }
        std::vector<char> all(n * p * 4), want;
        for (int r = 0; r < p; ++r) {
          auto part = testing::input(t, r, n);
          want.insert(want.end(), part.begin(), part.end());
        }
        AllgatherOptions go;
        go.algorithm = Algorithm::kShmDirect;
        go.shm = &ctx;
        auto mine = testing::input(t, c.rank(), n);
        allgather(c, mine.data(), all.data(), n, t, go);
        ASSERT_EQ(testing::compare(all, want, t), "") << "allgather n=" << n;
        ReduceScatterOptions so;
        so.algorithm = Algorithm::kShmDirect;
        so.shm = &ctx;
        auto in = testing::input(t, c.rank(), n * p, ReduceOp::kAvg);
        std::vector<char> out(n * 4);
        reduce_scatter(c, in.data(), out.data(), n, t, ReduceOp::kAvg, so);
        ASSERT_EQ(testing::compare(out, testing::expected_reduce(t, p, n, ReduceOp::kAvg, c.rank() * n), t), "")
            << "reduce_scatter n=" << n;
      }
    });
  }
}

TEST(ShmContextTest, MismatchIsDesyncOnEveryRank) {
  const int p = 3;
  std::mutex mu;
  std::vector<std::string> errors(p);
  testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
    ShmContext ctx(c);
    size_t n = c.rank() == 1 ? 5 : 4;
    std::vector<int32_t> buf(n, 1);
    AllreduceOptions o;
    o.shm = &ctx;
    o.timeout_s = 10;
    try {
      allreduce(c, buf.data(), n, DType::kInt32, ReduceOp::kSum, o);
    } catch (const Desync& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
    }
  });
  for (int r = 0; r < p; ++r) EXPECT_NE(errors[r].find("int32 x 5"), std::string::npos) << r << ": " << errors[r];
}

TEST(ShmContextTest, TimeoutNamesTheAbsentRank) {
  const int p = 3;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::string> errors(p);
  testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
    ShmContext ctx(c);
    if (c.rank() == 2) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done == p - 1; });
      return;
    }
    float x = 1;
    AllreduceOptions o;
    o.shm = &ctx;
    o.timeout_s = 0.3;
    try {
      allreduce(c, &x, 1, DType::kFloat32, ReduceOp::kSum, o);
    } catch (const Timeout& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
    }
    std::lock_guard<std::mutex> lock(mu);
    ++done;
    cv.notify_all();
  });
  for (int r = 0; r < 2; ++r) EXPECT_NE(errors[r].find("never reached by rank 2"), std::string::npos) << errors[r];
}

// The context is on by default (CollConfig::shm_context): a small all-reduce takes the
// one-phase path without the caller passing one, and its errors read as the message path's.
TEST(ShmContextDefault, SmallAllreduceTakesTheOnePhasePathByDefault) {
  testing::run_world(3, TransportKind::kShm, [&](Communicator& c) {
    float x = static_cast<float>(c.rank() + 1);
    EXPECT_EQ(allreduce(c, &x, 1, DType::kFloat32, ReduceOp::kSum), Algorithm::kShmDirect);
    EXPECT_EQ(x, 6.0f);
  });
  testing::WorldOptions off;
  off.coll.shm_context = false;  // DTRAIN_SHM_CONTEXT=0: messages only
  testing::run_world(3, off, [&](Communicator& c) {
    float x = static_cast<float>(c.rank() + 1);
    EXPECT_NE(allreduce(c, &x, 1, DType::kFloat32, ReduceOp::kSum), Algorithm::kShmDirect);
    EXPECT_EQ(x, 6.0f);
  });
}

// A rank that is gone, before the context exists or between two calls through it, is a
// PeerFailure naming it on every survivor, not a Timeout after the whole wait.
TEST(ShmContextDefault, DeadRankIsNamedBeforeAndAfterTheContextExists) {
  const int p = 4, dead = 2;
  for (bool warm : {false, true}) {
    std::mutex mu;
    std::vector<std::string> errors(p);
    std::vector<int> peers(p, -1);
    testing::WorldOptions o;
    o.timeout_s = 30;
    testing::run_world(p, o, [&](Communicator& c) {
      float x = 1;
      try {
        if (warm) allreduce(c, &x, 1, DType::kFloat32, ReduceOp::kSum);  // builds the context
        if (c.rank() == dead) {
          c.transport().close();
          return;
        }
        allreduce(c, &x, 1, DType::kFloat32, ReduceOp::kSum);
      } catch (const PeerFailure& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors[c.rank()] = e.what();
        peers[c.rank()] = e.peer();
      }
    });
    for (int r = 0; r < p; ++r) {
      if (r == dead) continue;
      EXPECT_EQ(peers[r], dead) << "warm=" << warm << " rank " << r << ": " << errors[r];
      EXPECT_NE(errors[r].find("rank 2 is gone"), std::string::npos) << errors[r];
      EXPECT_NE(errors[r].find("closed its transport"), std::string::npos) << errors[r];
      if (warm) {
        EXPECT_NE(errors[r].find("allreduce #"), std::string::npos) << errors[r];
      }
    }
  }
}

// Every rank sees every rank's fingerprint: all of them name the rank whose call differs from
// the majority's, with both calls.
TEST(ShmContextDefault, DesyncNamesTheRankThatDiffersFromTheMajority) {
  const int p = 4;
  std::mutex mu;
  std::vector<std::string> errors(p);
  testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
    std::vector<float> buf(c.rank() == 2 ? 20 : 10, 1.0f);
    try {
      allreduce(c, buf.data(), buf.size(), DType::kFloat32, ReduceOp::kSum);
    } catch (const Desync& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
    }
  });
  for (int r = 0; r < p; ++r) {
    EXPECT_NE(errors[r].find("collective desync: rank 2 called allreduce(float32 x 20"), std::string::npos)
        << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("ranks 0, 1, 3 called allreduce(float32 x 10"), std::string::npos)
        << r << ": " << errors[r];
  }
}

// The shared-memory algorithms compare the calls in the context's phases, so their calls send
// no fingerprint message (Call's FingerprintRoute::kShmPhases): not a byte leaves through the
// transport, and the results are right.
TEST(ShmContextDefault, ShmDirectCallsSendNoMessage) {
  const int p = 3;
  const size_t n = 16384;  // 64 KiB of float32
  testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
    std::vector<float> mine(n, static_cast<float>(c.rank() + 1)), all(n * p), sum(n);
    const uint64_t before = c.transport().bytes_sent();
    AllgatherOptions ag;
    ag.algorithm = Algorithm::kShmDirect;
    allgather(c, mine.data(), all.data(), n, DType::kFloat32, ag);
    BroadcastOptions bo;
    bo.algorithm = Algorithm::kShmDirect;
    std::vector<float> root_buf(n, static_cast<float>(c.rank() == 1 ? 7 : 0));
    broadcast(c, root_buf.data(), n, DType::kFloat32, 1, bo);
    AllreduceOptions ao;
    ao.algorithm = Algorithm::kShmDirect;
    allreduce(c, mine.data(), sum.data(), n, DType::kFloat32, ReduceOp::kSum, ao);
    EXPECT_EQ(c.transport().bytes_sent(), before) << "rank " << c.rank();
    for (int q = 0; q < p; ++q) EXPECT_EQ(all[q * n + n - 1], static_cast<float>(q + 1)) << "block " << q;
    EXPECT_EQ(root_buf[n - 1], 7.0f);
    EXPECT_EQ(sum[0], 6.0f);
  });
}

// A rank on another algorithm for the same call is a Desync on every rank, found while the
// shared-memory ranks wait (the peer's published call names its algorithm), not a timeout.
TEST(ShmContextDefault, AnotherAlgorithmOnOneRankIsADesyncNamingBoth) {
  const int p = 3;
  std::mutex mu;
  std::vector<std::string> errors(p);
  testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
    std::vector<float> mine(1000, 1.0f), all(1000 * p);
    AllgatherOptions ag;
    ag.algorithm = c.rank() == 2 ? Algorithm::kRing : Algorithm::kShmDirect;
    ag.timeout_s = 30;
    try {
      allgather(c, mine.data(), all.data(), mine.size(), DType::kFloat32, ag);
    } catch (const Desync& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = std::string("not a Desync: ") + e.what();
    }
  });
  for (int r = 0; r < p; ++r) {
    EXPECT_NE(errors[r].find("allgather(float32 x 1000, ring)"), std::string::npos) << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("allgather(float32 x 1000, shm_direct)"), std::string::npos) << r << ": " << errors[r];
    EXPECT_EQ(errors[r].find("timed out"), std::string::npos) << r << ": " << errors[r];
  }
}

// Broadcast, all-gather and reduce-scatter of a few KiB take one shared-memory phase that
// carries the data (coll/collectives.cc), like the small all-reduce: right for every root,
// type and reduction, in place too, sending nothing through the transport.
TEST(ShmContextDefault, SmallBroadcastAllgatherReduceScatterInOnePhase) {
  for (int p : {2, 3, 5}) {
    testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
      const uint64_t before = c.transport().bytes_sent();
      for (DType t : {DType::kFloat32, DType::kInt32, DType::kFloat64}) {
        const size_t es = dtype_size(t);
        for (size_t n : {size_t{1}, size_t{3}, size_t{37}, size_t{300}}) {  // up to 12 KB: under 16 KiB
          for (int root = 0; root < p; ++root) {
            auto buf = c.rank() == root ? testing::input(t, root, n) : std::vector<char>(n * es, 0);
            EXPECT_EQ(broadcast(c, buf.data(), n, t, root), Algorithm::kShmDirect);
            ASSERT_EQ(testing::compare(buf, testing::input(t, root, n), t), "") << "broadcast n=" << n << " root " << root;
          }
          std::vector<char> all(n * es * p), want;
          auto mine = testing::input(t, c.rank(), n);
          EXPECT_EQ(allgather(c, mine.data(), all.data(), n, t), Algorithm::kShmDirect);
          for (int q = 0; q < p; ++q) {
            auto block = testing::input(t, q, n);
            want.insert(want.end(), block.begin(), block.end());
          }
          ASSERT_EQ(testing::compare(all, want, t), "") << "allgather n=" << n;
          std::vector<char> inplace(n * es * p);  // this rank's block already in place
          std::copy(mine.begin(), mine.end(), inplace.begin() + c.rank() * n * es);
          allgather(c, inplace.data() + c.rank() * n * es, inplace.data(), n, t);
          ASSERT_EQ(testing::compare(inplace, want, t), "") << "in-place allgather n=" << n;
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
            auto in = testing::input(t, c.rank(), n * p, op);
            std::vector<char> out(n * es);
            EXPECT_EQ(reduce_scatter(c, in.data(), out.data(), n, t, op), Algorithm::kShmDirect);
            ASSERT_EQ(testing::compare(out, testing::expected_reduce(t, p, n, op, c.rank() * n), t), "")
                << "reduce_scatter n=" << n << " op " << static_cast<int>(op);
          }
        }
      }
      EXPECT_EQ(c.transport().bytes_sent(), before) << "rank " << c.rank();
    });
  }
}

// A small broadcast of another size on one rank is a Desync naming both calls on every rank.
TEST(ShmContextDefault, SmallBroadcastOfAnotherSizeIsADesync) {
  const int p = 3;
  std::mutex mu;
  std::vector<std::string> errors(p);
  testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
    std::vector<float> buf(c.rank() == 1 ? 6 : 5, 1.0f);
    try {
      broadcast(c, buf.data(), buf.size(), DType::kFloat32, 0);
    } catch (const Desync& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
    }
  });
  for (int r = 0; r < p; ++r) {
    EXPECT_NE(errors[r].find("broadcast(float32 x 6"), std::string::npos) << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("broadcast(float32 x 5"), std::string::npos) << r << ": " << errors[r];
  }
}

// Windows of 2 MiB and more (ddp's gradient and parameters) are advised huge pages, every
// rank's mapping of every segment, and smaller ones are not; whether the kernel then gives
// shared memory huge pages is its shmem_enabled setting (base/huge_pages.h).
TEST(ShmContextTest, LargeWindowsAreAdvisedHugePages) {
  if (!huge_pages_wanted()) GTEST_SKIP() << "DTRAIN_HUGE_PAGES=0";
  const std::string mode = transparent_huge_pages_mode();
  if (mode == "absent") GTEST_SKIP() << "this kernel has no transparent huge pages";
  testing::run_world(2, TransportKind::kShm, [&](Communicator& c) {
    ShmWindow large(c, (size_t{4} << 20) + 4096), small(c, size_t{64} << 10);
    for (int r = 0; r < 2; ++r) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(large.of(r));
      const auto whole = reinterpret_cast<const char*>((a + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
      EXPECT_TRUE(testing::advised_huge(whole)) << "rank " << c.rank() << ": rank " << r << "'s large window";
      EXPECT_FALSE(testing::advised_huge(small.of(r))) << "rank " << c.rank() << ": rank " << r << "'s small window";
    }
  });
}

}  // namespace
}  // namespace dtrain

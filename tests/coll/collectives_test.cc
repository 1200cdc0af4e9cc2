// Every collective x every forced algorithm x world sizes {1,2,3,4,5,7,8} x counts
// {0, 1, p-1, p+1, 1000, 100003} x in-place/out-of-place, over shm and tcp, with closed-form
// expected values (tests/coll/coll_test_util.h). The type and reduce op rotate through the
// combinations so every one of them is covered without the full product (see
// collectives_slow_test.cc for that); 64-byte segments force the multi-segment paths.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/heap_stats.h"
#include "coll/collectives.h"
#include "coll/cost_model.h"
#include "coll_test_util.h"
#include "support/world.h"

namespace dtrain {
namespace {

using testing::compare;
using testing::expected_reduce;
using testing::input;

const DType kTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kInt32, DType::kFloat16,
                        DType::kFloat64, DType::kInt64,    DType::kUInt8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kProd};

std::vector<size_t> counts_for(int p) {
  return {0, 1, static_cast<size_t>(std::max(p - 1, 0)), static_cast<size_t>(p + 1), 1000, 100003};
}

template <class O>
O small_segments(Algorithm a, size_t count) {
  O o;
  o.algorithm = a;
  o.segment_bytes = count > 10000 ? 16384 : 64;
  o.timeout_s = 60;
  return o;
}

std::string where(const char* op, Algorithm a, int p, size_t n, DType t, ReduceOp r, bool in_place, int rank) {
  std::ostringstream os;
  os << op << " algo=" << algorithm_name(a) << " p=" << p << " n=" << n << " type=" << dtype_name(t)
     << " op=" << reduce_op_name(r) << (in_place ? " in-place" : " out-of-place") << " rank=" << rank;
  return os.str();
}

class CollectivesTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(CollectivesTest, AllreduceEveryAlgorithm) {
  for (int p : {1, 2, 3, 4, 5, 7, 8}) {
    testing::run_world(p, GetParam(), [&](Communicator& c) {
      int k = 0;
      for (Algorithm a : supported_algorithms(CollOp::kAllreduce)) {
        for (size_t n : counts_for(p)) {
          if (a == Algorithm::kHierarchical && (n > 1000 || p > 5)) continue;  // splits per call: slow
          if ((a == Algorithm::kNaive || a == Algorithm::kParamServer) && n > 1000 && p > 4) continue;
          for (bool in_place : {true, false}) {
            ++k;
            DType t = kTypes[k % 7];
            ReduceOp op = kOps[(k / 7) % 5];
            if (n > 1000 && (k % 2)) continue;  // the big count once per algorithm, not twice
            auto mine = input(t, c.rank(), n, op);
            std::vector<char> out(mine.size());
            auto opts = small_segments<AllreduceOptions>(a, n);
            if (in_place) {
              allreduce(c, mine.data(), n, t, op, opts);
              out = mine;
            } else {
              allreduce(c, mine.data(), out.data(), n, t, op, opts);
              ASSERT_EQ(compare(mine, input(t, c.rank(), n, op), t), "") << "input clobbered";
            }
            ASSERT_EQ(compare(out, expected_reduce(t, p, n, op), t), "")
                << where("allreduce", a, p, n, t, op, in_place, c.rank());
          }
        }
      }
    });
  }
}

TEST_P(CollectivesTest, BroadcastReduceEveryAlgorithmAndRoot) {
  for (int p : {1, 2, 3, 5, 8}) {
    testing::run_world(p, GetParam(), [&](Communicator& c) {
      int k = 0;
      for (size_t n : counts_for(p)) {
        for (int root : {0, p - 1, p / 2}) {
          ++k;
          DType t = kTypes[k % 7];
          ReduceOp op = kOps[k % 5];
          for (Algorithm a : supported_algorithms(CollOp::kBroadcast)) {
            auto buf = c.rank() == root ? input(t, root, n) : std::vector<char>(n * dtype_size(t), 0x5a);
            broadcast(c, buf.data(), n, t, root, small_segments<BroadcastOptions>(a, n));
            ASSERT_EQ(compare(buf, input(t, root, n), t), "") << where("broadcast", a, p, n, t, op, true, c.rank());
          }
          for (Algorithm a : supported_algorithms(CollOp::kReduce)) {
            for (bool in_place : {true, false}) {
              auto mine = input(t, c.rank(), n, op);
              std::vector<char> out(mine.size());
              auto opts = small_segments<ReduceOptions>(a, n);
              reduce(c, mine.data(), in_place ? mine.data() : out.data(), n, t, op, root, opts);
              if (c.rank() == root) {
                ASSERT_EQ(compare(in_place ? mine : out, expected_reduce(t, p, n, op), t), "")
                    << where("reduce", a, p, n, t, op, in_place, c.rank()) << " root=" << root;
              }
            }
          }
        }
      }
    });
  }
}

TEST_P(CollectivesTest, AllgatherReduceScatterEveryAlgorithm) {
  for (int p : {1, 2, 3, 4, 5, 7, 8}) {
    testing::run_world(p, GetParam(), [&](Communicator& c) {
      int k = 0;
      for (size_t n : counts_for(p)) {
        if (n > 1000 && p > 5) n = 20011;  // per-rank count: keep the total moderate
        for (bool in_place : {true, false}) {
          ++k;
          DType t = kTypes[k % 7];
          ReduceOp op = kOps[k % 5];
          const size_t es = dtype_size(t);
          for (Algorithm a : supported_algorithms(CollOp::kAllgather)) {
            std::vector<char> want;
            for (int r = 0; r < p; ++r) {
              auto part = input(t, r, n);
              want.insert(want.end(), part.begin(), part.end());
            }
            std::vector<char> out(n * p * es, 0x33);
            auto mine = input(t, c.rank(), n);
            if (in_place) std::copy(mine.begin(), mine.end(), out.begin() + c.rank() * n * es);
            const void* send = in_place ? out.data() + c.rank() * n * es : mine.data();
            allgather(c, send, out.data(), n, t, small_segments<AllgatherOptions>(a, n));
            ASSERT_EQ(compare(out, want, t), "") << where("allgather", a, p, n, t, op, in_place, c.rank());
          }
          for (Algorithm a : supported_algorithms(CollOp::kReduceScatter)) {
            // Rank r's input is the concatenation of p blocks; element j of block b is value(r, b*n + j).
            auto mine = input(t, c.rank(), n * p, op);
            std::vector<char> out(n * es);
            void* recv = in_place ? mine.data() + c.rank() * n * es : out.data();
            auto o = small_segments<ReduceScatterOptions>(a, n);
            o.scratch_send = k % 2 == 1;  // the send buffer given up: reduced in, no copy
            reduce_scatter(c, mine.data(), recv, n, t, op, o);
            std::vector<char> got(static_cast<char*>(recv), static_cast<char*>(recv) + n * es);
            ASSERT_EQ(compare(got, expected_reduce(t, p, n, op, c.rank() * n), t), "")
                << where("reduce_scatter", a, p, n, t, op, in_place, c.rank());
          }
        }
      }
    });
  }
}

TEST_P(CollectivesTest, AllgathervVariableCounts) {
  for (int p : {1, 3, 4, 7}) {
    testing::run_world(p, GetParam(), [&](Communicator& c) {
      std::vector<size_t> counts(p);
      for (int r = 0; r < p; ++r) counts[r] = (r * 37) % 11;  // includes zeros
      size_t total = 0;
      for (size_t x : counts) total += x;
      DType t = DType::kInt32;
      std::vector<char> want;
      for (int r = 0; r < p; ++r) {
        auto part = input(t, r, counts[r]);
        want.insert(want.end(), part.begin(), part.end());
      }
      for (Algorithm a : supported_algorithms(CollOp::kAllgather)) {
        std::vector<char> out(total * 4);
        auto mine = input(t, c.rank(), counts[c.rank()]);
        allgatherv(c, mine.data(), out.data(), counts, t, small_segments<AllgatherOptions>(a, 1));
        ASSERT_EQ(compare(out, want, t), "") << "allgatherv " << algorithm_name(a) << " p=" << p;
      }
    });
  }
}

TEST_P(CollectivesTest, GatherScatterAlltoallBarrier) {
  for (int p : {1, 2, 3, 5, 8}) {
    testing::run_world(p, GetParam(), [&](Communicator& c) {
      const DType t = DType::kFloat32;
      for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
        for (int root : {0, p - 1}) {
          std::vector<char> all;
          for (int r = 0; r < p; ++r) {
            auto part = input(t, r, n);
            all.insert(all.end(), part.begin(), part.end());
          }
          for (Algorithm a : supported_algorithms(CollOp::kGather)) {
            std::vector<char> out(all.size(), 0x11);
            auto mine = input(t, c.rank(), n);
            gather(c, mine.data(), out.data(), n, t, root, small_segments<GatherOptions>(a, n));
            if (c.rank() == root) {
              ASSERT_EQ(compare(out, all, t), "") << "gather " << algorithm_name(a) << " p=" << p;
            }
          }
          for (Algorithm a : supported_algorithms(CollOp::kScatter)) {
            std::vector<char> out(n * 4, 0x11);
            scatter(c, c.rank() == root ? all.data() : nullptr, out.data(), n, t, root, small_segments<ScatterOptions>(a, n));
            ASSERT_EQ(compare(out, input(t, c.rank(), n), t), "") << "scatter " << algorithm_name(a) << " p=" << p;
          }
        }
        for (Algorithm a : supported_algorithms(CollOp::kAlltoall)) {
          // Block q of rank r's input: value(r, q*n + j); rank r receives block r of everyone.
          auto in = input(t, c.rank(), n * p);
          std::vector<char> out(in.size());
          alltoall(c, in.data(), out.data(), n, t, small_segments<AlltoallOptions>(a, n));
          std::vector<char> want;
          for (int q = 0; q < p; ++q) {
            auto part = input(t, q, n, ReduceOp::kSum, c.rank() * n);
            want.insert(want.end(), part.begin(), part.end());
          }
          ASSERT_EQ(compare(out, want, t), "") << "alltoall " << algorithm_name(a) << " p=" << p;
        }
      }
      for (Algorithm a : supported_algorithms(CollOp::kBarrier)) {
        BarrierOptions o;
        o.algorithm = a;
        barrier(c, o);
      }
    });
  }
}

// An in-place reduction receives into a window of scratch segments that its communicator's
// pool keeps warm; the window is never larger than the message. (A 4-byte all-reduce had
// leased a whole 1 MiB segment, kept by the pool: 2 MiB a rank of a GPT pipeline over tcp.)
TEST_P(CollectivesTest, ASmallReductionKeepsNoLargeScratch) {
  std::vector<int64_t> grew(2, 0);
  testing::run_world(2, GetParam(), [&](Communicator& c) {
    barrier(c);
    const int64_t before = heap_stats().live;
    barrier(c);
    // The algorithms that reduce through windows (Call::flow), and the parameter server's
    // push slots (two 1 MiB segments a worker before 2026-12-03).
    for (Algorithm a : {Algorithm::kAuto, Algorithm::kNaive, Algorithm::kRing, Algorithm::kTree, Algorithm::kButterfly,
                        Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling, Algorithm::kParamServer}) {
      float y = 1.0f + static_cast<float>(c.rank());
      AllreduceOptions o;
      o.algorithm = a;
      allreduce(c, &y, 1, DType::kFloat32, ReduceOp::kSum, o);
      EXPECT_EQ(y, 3.0f) << algorithm_name(a);
    }
    barrier(c);
    grew[static_cast<size_t>(c.rank())] = heap_stats().live - before;
  });
  // Both ranks share this process's heap: what both kept, measured from either.
  EXPECT_LT(std::max(grew[0], grew[1]), int64_t{256} << 10) << grew[0] << " " << grew[1];
}

// A reduce-scatter given its send buffer (ReduceScatterOptions::scratch_send) reduces in it:
// the message path leases no copy of the whole input, only its exchange windows. (Both ranks
// share this process's heap: with a copy each, the two grew 25.2 MB here, 8.4 without.)
TEST_P(CollectivesTest, AReduceScatterGivenItsSendBufferCopiesNothing) {
  constexpr size_t kCount = size_t{1} << 20;  // 4 MiB a rank's block, 8 MiB its input
  constexpr int64_t kInputBytes = 2 * kCount * sizeof(float);
  for (Algorithm a : {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kNaive}) {
    std::vector<int64_t> grew(2, 0);
    testing::run_world(2, GetParam(), [&](Communicator& c) {
      std::vector<float> in(2 * kCount, 1.0f + static_cast<float>(c.rank())), out(kCount);
      in[kCount + 7] = 10.0f * static_cast<float>(c.rank());  // rank 1's block, one element apart
      barrier(c);
      const int64_t before = heap_stats().live;
      if (c.rank() == 0) heap_reset_peak();
      barrier(c);
      ReduceScatterOptions o;
      o.algorithm = a;
      o.scratch_send = true;
      reduce_scatter(c, in.data(), out.data(), kCount, DType::kFloat32, ReduceOp::kSum, o);
      EXPECT_EQ(out[0], 3.0f) << algorithm_name(a);
      EXPECT_EQ(out[7], c.rank() == 1 ? 10.0f : 3.0f) << algorithm_name(a);
      EXPECT_EQ(out[kCount - 1], 3.0f) << algorithm_name(a);
      barrier(c);
      grew[static_cast<size_t>(c.rank())] = heap_stats().peak - before;
    });
    EXPECT_LT(grew[0], 2 * kInputBytes) << algorithm_name(a) << ": the two ranks' calls leased a copy of their input";
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CollectivesTest, ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return std::string(transport_kind_name(info.param)); });

}  // namespace
}  // namespace dtrain

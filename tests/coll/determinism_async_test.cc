// Deterministic mode gives the same bits whatever the algorithm and segment size; every
// mode gives the same bits on every rank; all-reduce equals reduce-scatter + all-gather;
// the hierarchical all-reduce over fake hosts; async Work on the progress thread.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "base/error.h"
#include "coll/collectives.h"
#include "coll/cost_model.h"
#include "coll/hierarchical.h"
#include "coll/work.h"
#include "coll_test_util.h"
#include "support/world.h"

namespace dtrain {
namespace {

// Non-integer values of mixed magnitude: float sums then depend on the order.
std::vector<float> noisy(int rank, size_t n) {
  std::mt19937 gen(1234 + rank);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen) * (1 + 1000 * (gen() % 3 == 0));
  return v;
}

TEST(DeterminismTest, SameBitsAcrossAlgorithmsAndSegmentSizes) {
  const int p = 5;
  const size_t n = 10007;
  // The reference: rank-ordered float32 sum, computed locally.
  std::vector<float> want(n, 0.0f);
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < p; ++r) inputs.push_back(noisy(r, n));
  for (size_t i = 0; i < n; ++i) {
    float acc = inputs[0][i];
    for (int r = 1; r < p; ++r) acc += inputs[r][i];
    want[i] = acc;
  }
  testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
    for (Algorithm a : supported_algorithms(CollOp::kAllreduce)) {
      if (a == Algorithm::kHierarchical) continue;  // ordered per host, documented
      for (size_t seg : {size_t{64}, size_t{4096}, size_t{1} << 20}) {
        auto buf = inputs[c.rank()];
        AllreduceOptions o;
        o.algorithm = a;
        o.segment_bytes = seg;
        o.deterministic = true;
        allreduce(c, buf.data(), n, DType::kFloat32, ReduceOp::kSum, o);
        ASSERT_EQ(std::memcmp(buf.data(), want.data(), n * 4), 0)
            << algorithm_name(a) << " seg " << seg << " rank " << c.rank();
      }
    }
    // bfloat16 accumulates in float32 in deterministic mode: one rounding at the end.
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = float_to_bf16(inputs[c.rank()][i]);
    AllreduceOptions o;
    o.deterministic = true;
    o.algorithm = Algorithm::kRing;
    allreduce(c, h.data(), n, DType::kBFloat16, ReduceOp::kSum, o);
    for (size_t i = 0; i < n; i += 97) {
      float acc = 0;
      for (int r = 0; r < p; ++r) acc = r ? acc + bf16_to_float(float_to_bf16(inputs[r][i])) : bf16_to_float(float_to_bf16(inputs[r][i]));
      ASSERT_EQ(h[i], float_to_bf16(acc)) << i;
    }
  });
}

TEST(DeterminismTest, EveryRankHoldsTheSameBitsInEveryMode) {
  for (int p : {3, 4, 6}) {
    std::mutex mu;
    std::map<std::string, std::vector<std::vector<float>>> results;
    testing::run_world(p, TransportKind::kShm, [&](Communicator& c) {
      for (Algorithm a : supported_algorithms(CollOp::kAllreduce)) {
        auto buf = noisy(c.rank(), 3001);
        AllreduceOptions o;
        o.algorithm = a;
        o.segment_bytes = 256;
        allreduce(c, buf.data(), buf.size(), DType::kFloat32, ReduceOp::kSum, o);
        std::lock_guard<std::mutex> lock(mu);
        auto& v = results[algorithm_name(a)];
        v.resize(p);
        v[c.rank()] = buf;
      }
    });
    for (auto& [name, per_rank] : results)
      for (int r = 1; r < p; ++r)
        EXPECT_EQ(std::memcmp(per_rank[r].data(), per_rank[0].data(), per_rank[0].size() * 4), 0)
            << name << " p=" << p << " rank " << r << " differs from rank 0";
  }
}

TEST(DeterminismTest, AllreduceEqualsReduceScatterThenAllgather) {
  testing::run_world(4, TransportKind::kShm, [&](Communicator& c) {
    const size_t per = 2500, n = per * 4;
    auto a = noisy(c.rank(), n), b = a;
    AllreduceOptions ro;
    ro.algorithm = Algorithm::kRing;
    allreduce(c, a.data(), n, DType::kFloat32, ReduceOp::kSum, ro);
    std::vector<float> mine(per);
    ReduceScatterOptions so;
    so.algorithm = Algorithm::kRing;
    reduce_scatter(c, b.data(), mine.data(), per, DType::kFloat32, ReduceOp::kSum, so);
    AllgatherOptions go;
    go.algorithm = Algorithm::kRing;
    allgather(c, mine.data(), b.data(), per, DType::kFloat32, go);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), n * 4), 0);
  });
}

TEST(HierarchicalTest, FakeHostsOfTwoRanks) {
  for (TransportKind kind : {TransportKind::kShm, TransportKind::kTcp}) {
    testing::run_world(6, kind, [&](Communicator& c) {
      Hierarchy h(c, "host" + std::to_string(c.rank() / 2));
      EXPECT_EQ(h.hosts(), 3);
      EXPECT_EQ(h.local().size(), 2);
      EXPECT_EQ(h.leaders() != nullptr, c.rank() % 2 == 0);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{12345}}) {
          auto buf = testing::input(DType::kFloat32, c.rank(), n, op);
          h.allreduce(buf.data(), n, DType::kFloat32, op);
          ASSERT_EQ(testing::compare(buf, testing::expected_reduce(DType::kFloat32, 6, n, op), DType::kFloat32), "")
              << reduce_op_name(op) << " n=" << n;
        }
      }
    });
  }
}

// Over tcp, ranks that say they are on several hosts, some of several ranks: auto takes the
// hosts' hierarchy (peers when the hosts are even, leaders when not) and sums right; one
// host, a rank a host, a deterministic call and an explicit algorithm stay flat.
TEST(HierarchicalTest, AutoTakesTheHostsOverTcp) {
  struct Case {
    int n;
    std::function<std::string(int)> host_of;
    bool hierarchical, even;  // the all-reduce's choice; the reduce-scatter's and all-gather's
  };
  const std::vector<Case> cases{
      {4, [](int r) { return "h" + std::to_string(r / 2); }, true, true},     // 2 hosts of 2: peers
      {6, [](int r) { return "h" + std::to_string(r % 3); }, true, true},     // 3 hosts of 2, interleaved
      {4, [](int r) { return r < 3 ? std::string("a") : "b"; }, true, false}, // 3 + 1: leaders
      {4, [](int) { return std::string("one"); }, false, false},              // one host
      {3, [](int r) { return "h" + std::to_string(r); }, false, false},       // a rank a host
  };
  for (const Case& k : cases) {
    testing::WorldOptions o;
    o.kind = TransportKind::kTcp;
    o.host_of = k.host_of;
    testing::run_world(k.n, o, [&](Communicator& c) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        for (size_t n : {size_t{1}, size_t{7}, size_t{40001}}) {
          auto buf = testing::input(DType::kFloat32, c.rank(), n, op);
          const Algorithm a = allreduce(c, buf.data(), n, DType::kFloat32, op);
          EXPECT_EQ(a == Algorithm::kHierarchical, k.hierarchical) << algorithm_name(a) << " n=" << n;
          ASSERT_EQ(testing::compare(buf, testing::expected_reduce(DType::kFloat32, k.n, n, op), DType::kFloat32), "")
              << reduce_op_name(op) << " n=" << n << " on " << k.n << " ranks";
        }
      }
      // Reduce-scatter and all-gather take the hierarchy where the hosts are even (not 3 + 1).
      const bool even = k.even;
      for (size_t per : {size_t{1}, size_t{333}}) {
        std::vector<float> in(per * k.n), mine(per), all(per * k.n);
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((c.rank() + 1) * 1000 + i);
        const Algorithm rs = reduce_scatter(c, in.data(), mine.data(), per, DType::kFloat32, ReduceOp::kSum);
        EXPECT_EQ(rs == Algorithm::kHierarchical, even) << algorithm_name(rs);
        const float ranks_sum = static_cast<float>(k.n * (k.n + 1) / 2);
        for (size_t i = 0; i < per; ++i)
          ASSERT_EQ(mine[i], ranks_sum * 1000 + k.n * static_cast<float>(c.rank() * per + i)) << "rs per=" << per;
        const Algorithm ag = allgather(c, mine.data(), all.data(), per, DType::kFloat32);
        EXPECT_EQ(ag == Algorithm::kHierarchical, even) << algorithm_name(ag);
        for (size_t i = 0; i < all.size(); ++i)
          ASSERT_EQ(all[i], ranks_sum * 1000 + k.n * static_cast<float>(i)) << "ag per=" << per;
      }
      std::vector<float> x(1000, 1.0f);
      AllreduceOptions det;
      det.deterministic = true;
      EXPECT_NE(allreduce(c, x.data(), x.size(), DType::kFloat32, ReduceOp::kSum, det), Algorithm::kHierarchical);
      AllreduceOptions ring;
      ring.algorithm = Algorithm::kRing;
      EXPECT_EQ(allreduce(c, x.data(), x.size(), DType::kFloat32, ReduceOp::kSum, ring), Algorithm::kRing);
      EXPECT_EQ(x[0], static_cast<float>(k.n * k.n));
    });
  }
}

// A rank that dies between hierarchical all-reduces: the ranks that shared a sub-group with it
// (its host's other rank, its peer on the other host) name it in the world's numbering, not
// in their sub-group's, and say which call it was part of.
TEST(HierarchicalTest, ADeadRankIsNamedInTheWorldsNumbers) {
  const int p = 4, dead = 3;
  std::mutex mu;
  std::vector<std::string> errors(p);
  std::vector<int> peers(p, -1);
  testing::WorldOptions o;
  o.kind = TransportKind::kTcp;
  o.timeout_s = 20;
  o.host_of = [](int r) { return "h" + std::to_string(r / 2); };
  testing::run_world(p, o, [&](Communicator& c) {
    std::vector<float> buf(10000, 1.0f);
    try {
      EXPECT_EQ(allreduce(c, buf.data(), buf.size(), DType::kFloat32, ReduceOp::kSum), Algorithm::kHierarchical);
      if (c.rank() == dead) return;  // its communicator, sub-groups and all, goes with it
      allreduce(c, buf.data(), buf.size(), DType::kFloat32, ReduceOp::kSum);
    } catch (const PeerFailure& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = e.what();
      peers[c.rank()] = e.peer();
    }
  });
  for (int r : {1, 2}) {
    EXPECT_EQ(peers[r], dead) << "rank " << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("(hierarchical, float32 x 10000) failed in a sub-group's step"), std::string::npos)
        << errors[r];
    EXPECT_TRUE(errors[r].find("(world rank 3) is gone") != std::string::npos ||
                errors[r].find("is world rank 3)") != std::string::npos)
        << errors[r];
  }
  EXPECT_NE(peers[0], -1) << "rank 0 learned of no failure";
}

TEST(AsyncTest, WorkRunsInOrderAndOverlapsTheCaller) {
  testing::run_world(4, TransportKind::kShm, [&](Communicator& c) {
    ProgressQueue q(c);
    std::vector<std::vector<char>> bufs;
    std::vector<Work> works;
    for (int i = 0; i < 6; ++i) bufs.push_back(testing::input(DType::kInt64, c.rank(), 1000 + i));
    for (int i = 0; i < 6; ++i) works.push_back(allreduce_async(q, bufs[i].data(), 1000 + i, DType::kInt64, ReduceOp::kSum));
    int64_t root_value = c.rank() == 0 ? 77 : 0;
    Work b = broadcast_async(q, &root_value, 1, DType::kInt64, 0);
    for (int i = 0; i < 6; ++i) {
      works[i].wait(30);
      EXPECT_TRUE(works[i].done());
      EXPECT_EQ(works[i].error(), nullptr);
      EXPECT_EQ(testing::compare(bufs[i], testing::expected_reduce(DType::kInt64, 4, 1000 + i, ReduceOp::kSum), DType::kInt64), "");
    }
    b.wait();
    EXPECT_EQ(root_value, 77);
  });
}

// Steal on wait (coll/work.h): a wait on the next item while the thread is idle runs it on the
// waiter. Whoever runs each item, they run one at a time in submission order, on every rank
// alike; items nobody waits for still run (on the thread), and errors reach the waiter.
TEST(AsyncTest, StealOnWaitKeepsTheOrder) {
  testing::run_world(3, TransportKind::kShm, [&](Communicator& c) {
    constexpr int kItems = 120;
    std::mutex mu;
    std::vector<int> order;
    std::vector<int64_t> sums(kItems, 0);
    int running = 0, overlaps = 0;
    {
      ProgressQueue q(c);
      std::vector<Work> works;
      for (int i = 0; i < kItems; ++i) {
        works.push_back(q.submit("item", [&, i](Communicator& comm) {
          {
            std::lock_guard<std::mutex> lock(mu);
            overlaps += running++ > 0;
            order.push_back(i);
          }
          int64_t v = comm.rank() + i;
          allreduce(comm, &v, 1, DType::kInt64, ReduceOp::kSum);
          sums[i] = v;
          std::lock_guard<std::mutex> lock(mu);
          --running;
        }, /*bounded=*/true));
        if (i % 3 == 0) works.back().wait(30);  // right after submitting: the steal case
        if (i % 7 == 0 && i >= 2) works[i - 2].wait(30);  // an earlier one, maybe still queued
      }
      Work failing = q.submit("failing", [](Communicator&) { DT_THROW(InvalidArgument, "from the item"); }, true);
      EXPECT_THROW(failing.wait(30), InvalidArgument);
      // The rest are never waited for: the destructor runs them before it returns.
    }
    ASSERT_EQ(order.size(), static_cast<size_t>(kItems));
    for (int i = 0; i < kItems; ++i) {
      EXPECT_EQ(order[i], i);
      EXPECT_EQ(sums[i], 3 * i + 0 + 1 + 2) << i;
    }
    EXPECT_EQ(overlaps, 0);
  });
}

TEST(AsyncTest, ErrorsSurfaceThroughWork) {
  testing::run_world(3, TransportKind::kShm, [&](Communicator& c) {
    if (c.rank() == 1) {
      c.transport().close();
      return;
    }
    ProgressQueue q(c);
    std::vector<float> buf(100, 1.0f);
    AllreduceOptions o;
    o.timeout_s = 20;
    o.algorithm = Algorithm::kRing;
    Work w = allreduce_async(q, buf.data(), buf.size(), DType::kFloat32, ReduceOp::kSum, o);
    EXPECT_THROW(w.wait(30), PeerFailure);
    EXPECT_TRUE(w.done());
    EXPECT_NE(w.error(), nullptr);
  });
}

}  // namespace
}  // namespace dtrain

// Fault injection by decorating the real fabric (tests/support/faulty_fabric.h): a stalled
// link recovers, a lossy link is a Timeout, a closed or killed rank is a PeerFailure naming it,
// and a rank killed inside a collective makes every rank fail instead of hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "coll/collectives.h"
#include "support/world.h"

namespace dtrain {
namespace {

using testing::Fault;
using testing::run_world;
using testing::WorldOptions;

class FaultInjectionTest : public ::testing::TestWithParam<TransportKind> {
 protected:
  WorldOptions faulty(Fault::Kind kind, uint64_t at_message, std::atomic<int>* fired) {
    WorldOptions o;
    o.kind = GetParam();
    o.timeout_s = 10;
    o.fault_rank = 0;
    o.fault.kind = kind;
    o.fault.peer = 1;
    o.fault.at_message = at_message;
    o.fault.fired = fired;
    return o;
  }
};

constexpr int kMessages = 4;

TEST_P(FaultInjectionTest, DelayedMessagesArriveIntactAndInOrder) {
  std::atomic<int> fired{0};
  WorldOptions o = faulty(Fault::kDelay, 2, &fired);
  o.fault.delay_s = 0.05;
  run_world(2, o, [&](Communicator& c) {
    for (int i = 0; i < kMessages; ++i) {
      int v = c.rank() == 0 ? 100 + i : -1;
      if (c.rank() == 0) c.send(1, &v, sizeof v, 7);
      else {
        c.recv(0, &v, sizeof v, 7);
        EXPECT_EQ(v, 100 + i);
      }
    }
  });
  EXPECT_EQ(fired.load(), 1);
}

TEST_P(FaultInjectionTest, DroppedMessageIsATimeoutOnTheReceiver) {
  std::atomic<int> fired{0};
  WorldOptions o = faulty(Fault::kDrop, 1, &fired);
  run_world(2, o, [&](Communicator& c) {
    int v = 5;
    if (c.rank() == 0) {
      c.send(1, &v, sizeof v, 1);
      c.send(1, &v, sizeof v, 2);  // vanishes
      c.recv(1, &v, sizeof v, 3);  // stay up until rank 1 has seen its receive run out
    } else {
      c.recv(0, &v, sizeof v, 1);
      EXPECT_EQ(v, 5);
      EXPECT_THROW(c.irecv(0, &v, sizeof v, 2).wait(0.2), Timeout);
      c.send(0, &v, sizeof v, 3);  // the reverse direction is not faulted
    }
  });
  EXPECT_EQ(fired.load(), 1);
}

// Runs fn on every rank and records what each one threw ("" for nothing).
std::vector<std::string> errors_per_rank(int n, const WorldOptions& o, const std::function<void(Communicator&)>& fn,
                                         std::vector<int>* peers = nullptr) {
  std::vector<std::string> errors(n);
  if (peers) peers->assign(n, -2);
  std::mutex mu;
  run_world(n, o, [&](Communicator& c) {
    try {
      fn(c);
    } catch (const PeerFailure& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = std::string("PeerFailure: ") + e.what();
      if (peers) (*peers)[c.rank()] = e.peer();
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[c.rank()] = std::string("Error: ") + e.what();
    }
  });
  return errors;
}

TEST_P(FaultInjectionTest, ClosedRankIsAPeerFailureNamingIt) {
  std::atomic<int> fired{0};
  WorldOptions o = faulty(Fault::kClose, 1, &fired);
  std::vector<int> peers;
  auto errors = errors_per_rank(2, o, [&](Communicator& c) {
    int v = 1;
    for (int i = 0; i < kMessages; ++i) {
      if (c.rank() == 0) c.send(1, &v, sizeof v, 3);
      else c.recv(0, &v, sizeof v, 3);
    }
  }, &peers);
  EXPECT_EQ(fired.load(), 1);
  EXPECT_EQ(errors[1].rfind("PeerFailure", 0), 0u) << errors[1];
  EXPECT_EQ(peers[1], 0) << errors[1];
}

TEST_P(FaultInjectionTest, KilledRankFailsItselfAndItsPeer) {
  std::atomic<int> fired{0};
  WorldOptions o = faulty(Fault::kKill, 2, &fired);
  auto errors = errors_per_rank(2, o, [&](Communicator& c) {
    int v = 1;
    for (int i = 0; i < kMessages; ++i) {
      if (c.rank() == 0) c.send(1, &v, sizeof v, 4);
      else c.recv(0, &v, sizeof v, 4);
    }
  });
  EXPECT_EQ(fired.load(), 1);
  EXPECT_NE(errors[0].find("killed by fault injection"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1].rfind("PeerFailure", 0), 0u) << errors[1];
}

// A rank killed in the middle of a sequence of all-reduces: every rank ends with an error
// (none hangs, none returns a wrong sum silently).
TEST_P(FaultInjectionTest, RankKilledInsideAllreduceFailsEveryRank) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kTree, Algorithm::kButterfly}) {
    std::atomic<int> fired{0};
    WorldOptions o;
    o.kind = GetParam();
    o.timeout_s = 10;
    o.fault_rank = 2;
    o.fault.kind = Fault::kKill;
    o.fault.at_message = 3;  // on every peer stream of rank 2
    o.fault.fired = &fired;
    auto errors = errors_per_rank(4, o, [&](Communicator& c) {
      std::vector<float> x(1000);
      AllreduceOptions opts;
      opts.algorithm = a;
      for (int step = 0; step < 20; ++step) {
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(c.rank() + i);
        allreduce(c, x.data(), x.size(), DType::kFloat32, ReduceOp::kSum, opts);
        for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], static_cast<float>(6 + 4 * i)) << "step " << step;
      }
    });
    EXPECT_GE(fired.load(), 1) << algorithm_name(a);
    for (int r = 0; r < 4; ++r) EXPECT_NE(errors[r], "") << algorithm_name(a) << ": rank " << r << " did not fail";
    EXPECT_NE(errors[2].find("killed by fault injection"), std::string::npos) << errors[2];
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, FaultInjectionTest, ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return std::string(transport_kind_name(info.param)); });

}  // namespace
}  // namespace dtrain

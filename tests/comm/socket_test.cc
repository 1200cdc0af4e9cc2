// The tcp transport's congestion-control choice (DTRAIN_TCP_CONGESTION) and the socket
// helpers it stands on, over real loopback connections.
#include <gtest/gtest.h>

#include "base/error.h"
#include "comm/socket.h"
#include "support/world.h"

namespace dtrain {
namespace {

struct LoopbackPair {
  Fd server, client;
};

LoopbackPair connect_pair() {
  int port = 0;
  Fd listener = listen_tcp("127.0.0.1", 0, &port);
  LoopbackPair p;
  p.client = connect_tcp("127.0.0.1", port, Deadline::after(10));
  p.server = accept_tcp(listener.get(), Deadline::after(10));
  return p;
}

TEST(Socket, LoopbackPeerIsOnThisHost) {
  LoopbackPair p = connect_pair();
  ASSERT_TRUE(p.server.valid());
  EXPECT_TRUE(peer_on_this_host(p.client.get()));
  EXPECT_TRUE(peer_on_this_host(p.server.get()));
  EXPECT_FALSE(peer_on_this_host(-1));
}

TEST(Socket, CongestionControlIsReadAndSet) {
  LoopbackPair p = connect_pair();
  EXPECT_FALSE(tcp_congestion(p.client.get()).empty());
  // reno is built into every Linux kernel and always permitted.
  EXPECT_EQ(set_tcp_congestion(p.client.get(), "reno"), "");
  EXPECT_EQ(tcp_congestion(p.client.get()), "reno");
  const std::string why = set_tcp_congestion(p.client.get(), "no-such-algorithm");
  EXPECT_NE(why, "");
  EXPECT_EQ(tcp_congestion(p.client.get()), "reno") << "a refused change leaves the connection as it was";
}

TEST(Socket, CongestionPolicy) {
  // auto: reno within one host, whatever the system's default; across hosts, untouched.
  EXPECT_EQ(congestion_to_set("auto", true, "bbr"), "reno");
  EXPECT_EQ(congestion_to_set("auto", true, "cubic"), "reno");
  EXPECT_EQ(congestion_to_set("auto", true, "reno"), "");
  EXPECT_EQ(congestion_to_set("auto", false, "bbr"), "");
  // system: never changed; a name: set wherever it differs.
  EXPECT_EQ(congestion_to_set("system", true, "bbr"), "");
  EXPECT_EQ(congestion_to_set("cubic", false, "bbr"), "cubic");
  EXPECT_EQ(congestion_to_set("cubic", true, "cubic"), "");
}

TEST(Socket, TcpTransportRunsUnderEachSetting) {
  for (const char* setting : {"auto", "system", "reno"}) {
    testing::WorldOptions o;
    o.kind = TransportKind::kTcp;
    o.tcp_congestion = setting;
    testing::run_world(2, o, [&](Communicator& c) {
      std::vector<int> out(300000, c.rank()), in(300000, -1);
      Request r = c.irecv(1 - c.rank(), in.data(), in.size() * sizeof(int));
      c.send(1 - c.rank(), out.data(), out.size() * sizeof(int));
      r.wait();
      EXPECT_EQ(in.front(), 1 - c.rank()) << setting;
      EXPECT_EQ(in.back(), 1 - c.rank()) << setting;
    });
  }
}

TEST(Socket, AnAlgorithmTheKernelRefusesIsAClearError) {
  testing::WorldOptions o;
  o.kind = TransportKind::kTcp;
  o.tcp_congestion = "no-such-algorithm";
  try {
    testing::run_world(2, o, [](Communicator&) { FAIL() << "the communicator should not have been made"; });
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("DTRAIN_TCP_CONGESTION=no-such-algorithm"), std::string::npos) << what;
    EXPECT_NE(what.find("refused by the kernel"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dtrain

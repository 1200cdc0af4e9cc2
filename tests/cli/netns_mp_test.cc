// Multi-host for real: two ranks in two network namespaces joined by a veth pair, talking
// tcp between their own addresses (10.213.x.1 and .2), with node 0's launcher serving the
// rendezvous on its namespace's address. Needs root and iproute2; skipped otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include "support/subprocess.h"

namespace dtrain {
namespace {

using testing::run_command;

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = testing::env_path("DTRAIN_BIN");
    rank_ = testing::env_path("DTRAIN_TEST_RANK");
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (run_command("command -v ip").exit_code != 0) GTEST_SKIP() << "needs iproute2 (ip)";
    id_ = std::to_string(::getpid() % 100000);
    subnet_ = "10.213." + std::to_string(::getpid() % 250) + ".";
    ns0_ = "dtrn0_" + id_;
    ns1_ = "dtrn1_" + id_;
    std::string va = "dva" + id_, vb = "dvb" + id_;
    auto r = run_command("set -e; ip netns add " + ns0_ + "; ip netns add " + ns1_ + "; ip link add " + va +
                         " type veth peer name " + vb + "; ip link set " + va + " netns " + ns0_ + "; ip link set " + vb +
                         " netns " + ns1_ + "; ip -n " + ns0_ + " addr add " + subnet_ + "1/24 dev " + va + "; ip -n " +
                         ns1_ + " addr add " + subnet_ + "2/24 dev " + vb + "; for n in " + ns0_ + " " + ns1_ +
                         "; do ip -n $n link set lo up; done; ip -n " + ns0_ + " link set " + va + " up; ip -n " + ns1_ +
                         " link set " + vb + " up");
    created_ = true;
    if (r.exit_code != 0) GTEST_SKIP() << "cannot create network namespaces here: " << r.output;
  }
  void TearDown() override {
    if (created_) run_command("ip netns del " + ns0_ + "; ip netns del " + ns1_);
  }
  std::string bin_, rank_, id_, subnet_, ns0_, ns1_;
  bool created_ = false;
};

TEST_F(NetnsTest, TcpExchangeBetweenTwoHosts) {
  std::string master = subnet_ + "1:29517";
  std::string common = " run -n 1 --nnodes 2 --master " + master + " --transport tcp --timeout 30 ";
  std::string node1 = "ip netns exec " + ns1_ + " env DTRAIN_TOKEN=netns-secret DTRAIN_BIND_ADDR=" + subnet_ + "2 " +
                      bin_ + common + "--node-rank 1 -- " + rank_ + " exchange 1000000";
  std::string node0 = "ip netns exec " + ns0_ + " env DTRAIN_TOKEN=netns-secret DTRAIN_BIND_ADDR=" + subnet_ + "1 " +
                      bin_ + common + "--node-rank 0 -- " + rank_ + " exchange 1000000";
  auto r = run_command(node1 + " > /dev/null 2>&1 & " + node0 + "; rc=$?; wait $!; echo node0=$rc node1=$?");
  EXPECT_NE(r.output.find("exchange ok 2 tcp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("node0=0 node1=0"), std::string::npos) << r.output;
}

// The other host cannot reach node 0's store from outside its namespace pair: a launcher
// pointed at an address nobody serves fails with a clear timeout instead of hanging.
TEST_F(NetnsTest, UnreachableMasterIsAClearError) {
  std::string cmd = "ip netns exec " + ns1_ + " env DTRAIN_TOKEN=s " + bin_ +
                    " run -n 1 --nnodes 2 --node-rank 1 --master " + subnet_ + "1:29518 --timeout 2 -- " + rank_ +
                    " exchange 10";
  auto r = run_command(cmd);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cannot connect to " + subnet_ + "1:29518"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dtrain

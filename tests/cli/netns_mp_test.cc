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

// Two hosts, two ranks each (tcp between the hosts), training with ddp. The link between the
// hosts is cut mid-run: every rank fails within its timeout (3 s, plus the store's slack), the
// ranks on the store's host naming the other host, the others naming a network failure; each
// node's launcher restarts its ranks (--max-restarts), the link comes back, and the job ends
// with exactly the losses of the same job run without a fault.
TEST_F(NetnsTest, CutLinkIsANetworkFailureAndRestartLosesNothing) {
  const std::string dir = "/tmp/dtrain-netns-" + id_;
  auto prep = run_command("rm -rf " + dir + "; mkdir -p " + dir + " && /usr/bin/python3 -c \"\n"
                          "import random\nrandom.seed(5)\n"
                          "with open('" + dir + "/train.csv','w') as t, open('" + dir + "/test.csv','w') as s:\n"
                          "  for i in range(400):\n"
                          "    y=random.randrange(3); o=t if i<300 else s\n"
                          "    o.write(str(y)+','+','.join(str(random.gauss(0,0.7)+(1.0 if j%3==y else 0)) for j in range(8))+'\\\\n')\n\"");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const std::string train = bin_ + " train --data csv:" + dir + "/train.csv," + dir + "/test.csv --model mlp:8-16-3 " +
                            "--epochs 120 --batch 30 --deterministic --quiet --checkpoint " + dir + "/ck";
  auto node = [&](int k, const std::string& port, const std::string& json) {
    const std::string ns = k == 0 ? ns0_ : ns1_;
    return "ip netns exec " + ns + " env DTRAIN_TOKEN=netns-secret DTRAIN_BIND_ADDR=" + subnet_ + std::to_string(k + 1) +
           " DTRAIN_HOST_ID=host" + std::to_string(k) + " " + bin_ + " run -n 2 --nnodes 2 --node-rank " +
           std::to_string(k) + " --master " + subnet_ + "1:" + port + " --timeout 3 --max-restarts 2 -- " + train + json;
  };
  // Reference: the same job, no fault.
  auto ref = run_command(node(1, "29521", "") + " > " + dir + "/ref1.log 2>&1 & " + node(0, "29521", " --json " + dir +
                         "/ref.json") + " > " + dir + "/ref0.log 2>&1; a=$?; wait $!; echo node0=$a node1=$?");
  ASSERT_NE(ref.output.find("node0=0 node1=0"), std::string::npos) << ref.output;
  // The faulted run: cut the link once a checkpoint exists; restore it once both nodes restarted.
  const std::string va = "dva" + id_;
  auto r = run_command(
      "rm -rf " + dir + "/ck; " + node(1, "29522", "") + " > " + dir + "/n1.log 2>&1 & p1=$!; " +
      node(0, "29522", " --json " + dir + "/chaos.json") + " > " + dir + "/n0.log 2>&1 & p0=$!; " +
      "for i in $(seq 400); do [ -f " + dir + "/ck/checkpoint.rank-3.dtc ] && break; sleep 0.05; done; " +
      "ip -n " + ns0_ + " link set " + va + " down; " +
      "for i in $(seq 600); do grep -q 'restart 1' " + dir + "/n0.log && grep -q 'restart 1' " + dir +
      "/n1.log && break; sleep 0.05; done; ip -n " + ns0_ + " link set " + va + " up; " +
      "wait $p0; a=$?; wait $p1; echo node0=$a node1=$?; cat " + dir + "/n0.log " + dir + "/n1.log");
  EXPECT_NE(r.output.find("node0=0 node1=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("on host host1; this rank is on host0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a network failure"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("restart 1 of 2"), std::string::npos) << r.output;
  auto cmp = run_command("/usr/bin/python3 -c \"import json; a=json.load(open('" + dir + "/ref.json')); b=json.load(open('" +
                         dir + "/chaos.json')); print('same' if [e['train_loss'] for e in a['epoch_rows']] == "
                         "[e['train_loss'] for e in b['epoch_rows']] and a['test_loss'] == b['test_loss'] else 'differ', "
                         "b['resumed_from_epoch'])\"");
  EXPECT_NE(cmp.output.find("same"), std::string::npos) << cmp.output;
  run_command("rm -rf " + dir);
}

}  // namespace
}  // namespace dtrain

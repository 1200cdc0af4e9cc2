// Multi-process tests of `dtrain run` and of failure detection across processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <sstream>

#include "comm/socket.h"
#include "support/subprocess.h"

namespace dtrain {
namespace {

using testing::run_command;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = testing::env_path("DTRAIN_BIN");
    rank_ = testing::env_path("DTRAIN_TEST_RANK");
    if (bin_.empty() || rank_.empty()) GTEST_SKIP() << "DTRAIN_BIN / DTRAIN_TEST_RANK not set (run through ctest)";
  }
  std::string bin_, rank_;
};

TEST_F(LauncherTest, EachRankSeesTorchrunEnvironment) {
  auto r = run_command(bin_ + " run -n 3 -- sh -c 'echo \"env $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE "
                              "${#DTRAIN_TOKEN} $DTRAIN_STORE $MASTER_ADDR\"'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> ranks;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    auto pos = line.find("env ");
    if (pos == std::string::npos) continue;
    std::istringstream f(line.substr(pos + 4));
    std::string rank, local, world, lws, toklen, store, master;
    f >> rank >> local >> world >> lws >> toklen >> store >> master;
    EXPECT_EQ(rank, local);
    EXPECT_EQ(world, "3");
    EXPECT_EQ(lws, "3");
    EXPECT_EQ(toklen, "32");  // a 128-bit secret in hex
    EXPECT_EQ(store.rfind("tcp://127.0.0.1:", 0), 0u) << store;
    EXPECT_EQ(master, "127.0.0.1");
    EXPECT_EQ(line.rfind("[rank " + rank + "] ", 0), 0u) << "output lines carry the rank: " << line;
    ranks.insert(rank);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"})) << r.output;
}

TEST_F(LauncherTest, FailingRankStopsTheJobAndIsNamed) {
  // Ranks 0 and 2 would wait forever; the launcher must stop them when rank 1 fails.
  auto r = run_command(bin_ + " run -n 3 -- sh -c 'if [ $RANK = 1 ]; then echo disk full >&2; exit 7; fi; "
                              "exec sleep 1000'");
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("rank 1 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with code 7"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped the other 2 ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| disk full"), std::string::npos) << "stderr tail in the report: " << r.output;
}

TEST_F(LauncherTest, KilledRankIsReportedWithItsSignal) {
  auto r = run_command(bin_ + " run -n 2 -- sh -c 'if [ $RANK = 0 ]; then kill -9 $$; fi; exec sleep 1000'");
  EXPECT_EQ(r.exit_code, 128 + 9) << r.output;
  EXPECT_NE(r.output.find("rank 0 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("was killed by SIGKILL"), std::string::npos) << r.output;
}

TEST_F(LauncherTest, MissingProgramIsAClearError) {
  auto r = run_command(bin_ + " run -n 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no program to run"), std::string::npos) << r.output;
  r = run_command(bin_ + " run -n 2 --bogus 3 -- true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown option --bogus"), std::string::npos) << r.output;
  r = run_command(bin_ + " run -n 1 -- /nonexistent/program");
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_NE(r.output.find("cannot execute '/nonexistent/program'"), std::string::npos) << r.output;
}

class TransportMpTest : public LauncherTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(TransportMpTest, RanksExchangeAcrossProcesses) {
  auto r = run_command(bin_ + " run -n 4 --transport " + GetParam() + " -- " + rank_ + " exchange 300001");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("exchange ok 4 " + GetParam()), std::string::npos) << r.output;
}

TEST_P(TransportMpTest, OversubscribedSplitAcrossProcesses) {
  auto r = run_command(bin_ + " run -n 6 --transport " + GetParam() + " -- " + rank_ + " barrier-split");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("exchange ok 3"), std::string::npos) << r.output;
}

TEST_P(TransportMpTest, PeerExitingMidTransferIsPeerFailureOnSurvivor) {
  auto r = run_command(bin_ + " run -n 2 --timeout 60 --transport " + GetParam() + " -- " + rank_ + " die-mid-transfer");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("survivor saw: peer=1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
}

// Rank 2 fails and rank 0 fails because of it, both while the launcher is stopped, so the
// launcher reaps them together: it blames rank 2, whose failure came first, not rank 0.
TEST_P(TransportMpTest, CulpritIsBlamedNotTheRankThatSawItFail) {
  auto r = run_command(bin_ + " run -n 4 --timeout 60 --transport " + GetParam() + " -- " + rank_ + " witness-race");
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_NE(r.output.find("rank 0 saw rank 2 fail"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dtrain run: rank 2 "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("did not"), std::string::npos) << r.output;
}

// A witness with no culprit behind it (its peer's failure was never reaped) is blamed once
// the launcher's grace for the culprit has passed, and the job still stops.
TEST_F(LauncherTest, WitnessWithoutACulpritIsBlamedAfterTheGrace) {
  auto r = run_command(bin_ + " run -n 3 --timeout 60 -- " + rank_ + " witness-alone");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("dtrain run: rank 1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with code 4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped the other 2 ranks"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Kinds, TransportMpTest, ::testing::Values("shm", "tcp"));

// Two launchers, one per "node", meeting through node 0's store on loopback.
TEST_F(LauncherTest, TwoNodeJobOnLoopback) {
  int port = 0;
  { Fd probe = listen_tcp("127.0.0.1", 0, &port); }  // a free port, released for node 0
  std::string common = " run -n 2 --nnodes 2 --master 127.0.0.1:" + std::to_string(port) + " --transport tcp ";
  std::string cmd = "export DTRAIN_TOKEN=two-node-secret; " + bin_ + common + "--node-rank 1 -- " + rank_ +
                    " exchange 50000 > /dev/null 2>&1 & " + bin_ + common + "--node-rank 0 -- " + rank_ +
                    " exchange 50000; rc=$?; wait $!; rc1=$?; echo node0=$rc node1=$rc1";
  auto r = run_command(cmd);
  EXPECT_NE(r.output.find("exchange ok 4 tcp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("node0=0 node1=0"), std::string::npos) << r.output;
}

TEST_F(LauncherTest, MultiNodeWithoutTokenIsRefused) {
  auto r = run_command("unset DTRAIN_TOKEN; " + bin_ + " run -n 1 --nnodes 2 --master 127.0.0.1:1 -- true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("DTRAIN_TOKEN"), std::string::npos) << r.output;
}

// SIGTERM to the launcher reaches every rank. Ranks announce readiness with a file; the test
// waits for the files (bounded), then signals the launcher.
TEST_F(LauncherTest, SigtermReachesEveryRank) {
  std::string dir = "/tmp/dtrain-sigterm-" + std::to_string(::getpid());
  std::string rank_script = "trap \"echo rank $RANK got TERM; exit 0\" TERM; touch " + dir +
                            "/ready.$RANK; while :; do sleep 0.1; done";
  std::string cmd = "mkdir -p " + dir + "; " + bin_ + " run -n 3 -- sh -c '" + rank_script +
                    "' & pid=$!; i=0; while [ $(ls " + dir + " | wc -l) -lt 3 ] && [ $i -lt 600 ]; do sleep 0.05; "
                    "i=$((i+1)); done; kill -TERM $pid; wait $pid; echo launcher=$?; rm -rf " + dir;
  auto r = run_command(cmd);
  for (int k = 0; k < 3; ++k)
    EXPECT_NE(r.output.find("rank " + std::to_string(k) + " got TERM"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("interrupted by SIGTERM"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("launcher=143"), std::string::npos) << r.output;
}

// A launcher killed with SIGKILL cannot stop its ranks itself: the kernel does
// (PR_SET_PDEATHSIG). Ranks write their pids; the test kills the launcher and waits (bounded)
// until none of them is alive.
TEST_F(LauncherTest, RanksDieWithAKilledLauncher) {
  std::string dir = "/tmp/dtrain-orphans-" + std::to_string(::getpid());
  std::string rank_script = "echo $$ > " + dir + "/pid.$RANK; while :; do sleep 0.1; done";
  std::string cmd = "mkdir -p " + dir + "; " + bin_ + " run -n 3 -- sh -c '" + rank_script +
                    "' & pid=$!; i=0; while [ $(ls " + dir + " | wc -l) -lt 3 ] && [ $i -lt 600 ]; do sleep 0.05; "
                    "i=$((i+1)); done; kill -KILL $pid; wait $pid; pids=$(cat " + dir + "/pid.*); i=0; "
                    "while [ $i -lt 600 ]; do alive=0; for p in $pids; do kill -0 $p 2>/dev/null && alive=$((alive+1)); "
                    "done; [ $alive -eq 0 ] && break; sleep 0.05; i=$((i+1)); done; echo alive=$alive; "
                    "for p in $pids; do kill -KILL $p 2>/dev/null; done; rm -rf " + dir;
  auto r = run_command(cmd);
  EXPECT_NE(r.output.find("alive=0"), std::string::npos) << r.output;
}

// -n is bounded with a clear error instead of forking until descriptors run out.
TEST_F(LauncherTest, RankCountIsBounded) {
  for (const char* n : {"100000", "4294967297", "0"}) {
    auto r = run_command(bin_ + " run -n " + n + " -- true");
    EXPECT_EQ(r.exit_code, 2) << n << "\n" << r.output;
    EXPECT_NE(r.output.find("--nproc must be between 1 and 1024"), std::string::npos) << r.output;
  }
}

// Ranks started by mpirun or srun (simulated by their environment variables) find their rank
// and size and meet through a private file store keyed by the job id, without dtrain run.
TEST_F(LauncherTest, MpirunAndSrunEnvironmentsWithoutLauncher) {
  std::string job = std::to_string(::getpid());
  std::string ompi = "env -u RANK -u WORLD_SIZE -u DTRAIN_STORE -u MASTER_ADDR OMPI_MCA_ess_base_jobid=t" + job +
                     " OMPI_COMM_WORLD_SIZE=2 ";
  auto r = run_command(ompi + "OMPI_COMM_WORLD_RANK=1 " + rank_ + " exchange 1000 & " + ompi +
                       "OMPI_COMM_WORLD_RANK=0 " + rank_ + " exchange 1000; wait $!; echo other=$?");
  EXPECT_NE(r.output.find("exchange ok 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("other=0"), std::string::npos) << r.output;
  std::string slurm = "env -u RANK -u WORLD_SIZE -u DTRAIN_STORE -u MASTER_ADDR SLURM_JOB_ID=s" + job + " SLURM_STEP_ID=0 SLURM_NTASKS=3 ";
  r = run_command(slurm + "SLURM_PROCID=1 " + rank_ + " exchange 10 & " + slurm + "SLURM_PROCID=2 " + rank_ +
                  " exchange 10 & " + slurm + "SLURM_PROCID=0 " + rank_ + " exchange 10; wait");
  EXPECT_NE(r.output.find("exchange ok 3"), std::string::npos) << r.output;
  run_command("rm -rf /tmp/dtrain-$(id -u)-t" + job + " /tmp/dtrain-$(id -u)-s" + job);
}

}  // namespace
}  // namespace dtrain

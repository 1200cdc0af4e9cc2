// What the engines (SLURM, OpenMPI, dtrain run) tell a rank: host lists, the batch step,
// how many hosts a job spans, and the rendezvous errors a job spanning hosts gets at once.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <optional>

#include "base/clock.h"
#include "base/error.h"
#include "base/settings.h"
#include "comm/engine.h"
#include "comm/world.h"

namespace dtrain {
namespace {

// Sets variables for one test and restores them (every rank/launcher variable starts unset).
class Env {
 public:
  explicit Env(std::map<std::string, std::string> set) {
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "DTRAIN_STORE", "MASTER_ADDR",
                          "MASTER_PORT", "DTRAIN_TOKEN", "DTRAIN_BIND_ADDR", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
                          "PMIX_NAMESPACE", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID",
                          "SLURM_STEPID", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST", "SLURM_LOCALID",
                          "SLURM_NODEID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "MPI_LOCALNRANKS",
                          "MPI_LOCALRANKID",
                          "DTRAIN_TIMEOUT", "DTRAIN_CONNECT_TIMEOUT", "DTRAIN_RESTART"})
      save(v, std::nullopt);
    for (auto& [k, v] : set) save(k, v);
  }
  ~Env() {
    for (auto& [k, v] : old_) v ? ::setenv(k.c_str(), v->c_str(), 1) : ::unsetenv(k.c_str());
  }

 private:
  void save(const std::string& k, std::optional<std::string> v) {
    if (!old_.count(k)) {
      const char* cur = ::getenv(k.c_str());
      old_[k] = cur ? std::optional<std::string>(cur) : std::nullopt;
    }
    v ? ::setenv(k.c_str(), v->c_str(), 1) : ::unsetenv(k.c_str());
  }
  std::map<std::string, std::optional<std::string>> old_;
};

TEST(Nodelist, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(expand_nodelist("h[0-1]"), (std::vector<std::string>{"h0", "h1"}));
  EXPECT_EQ(expand_nodelist("n[01-03,7],gpu1"), (std::vector<std::string>{"n01", "n02", "n03", "n7", "gpu1"}));
  EXPECT_EQ(expand_nodelist("a,b[9-10]x"), (std::vector<std::string>{"a", "b9x", "b10x"}));
  EXPECT_EQ(expand_nodelist("solo"), (std::vector<std::string>{"solo"}));
  EXPECT_THROW(expand_nodelist("h[1-"), InvalidArgument);
  EXPECT_THROW(expand_nodelist("h[a-b]"), InvalidArgument);
}

// srun sets no local size: the step's tasks per node ("2(x3),1") at this node's index say it,
// so a rank counts its own host's ranks, not the whole step's.
TEST(SlurmTasks, TheStepsTasksOnThisNode) {
  {
    Env e({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "2"}});
    EXPECT_EQ(slurm_tasks_on_node(), 2);
  }
  {
    Env e({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}});
    EXPECT_EQ(slurm_tasks_on_node(), 1);
  }
  {
    Env e({{"SLURM_TASKS_PER_NODE", "8"}, {"SLURM_NODEID", "0"}});  // the allocation's, when the step's is absent
    EXPECT_EQ(slurm_tasks_on_node(), 8);
  }
  for (const char* bad : {"2(x3", "x", "2(y3)", "0", "", "2(x3),1"}) {
    Env e({{"SLURM_STEP_TASKS_PER_NODE", bad}, {"SLURM_NODEID", "4"}});  // the last: node 4 of 4
    EXPECT_EQ(slurm_tasks_on_node(), 0) << bad;
  }
  {
    Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_STEP_ID", "0"},
           {"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_STEP_TASKS_PER_NODE", "8(x2)"}, {"SLURM_NODEID", "0"},
           {"SLURM_LOCALID", "5"}});
    const WorldInfo w = world_from_env(Settings::from_env());
    EXPECT_EQ(w.size, 16);
    EXPECT_EQ(w.local_size, 8);
    EXPECT_EQ(w.transport.ranks_on_host, 8);
    EXPECT_EQ(w.hosts, 2);
  }
}

// MPICH's hydra sets PMI_RANK/PMI_SIZE and, for the host, MPI_LOCALRANKID/MPI_LOCALNRANKS.
TEST(MpichHydra, TheLocalRanksComeFromItsOwnVariables) {
  Env e({{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "4"}});
  const WorldInfo w = world_from_env(Settings::from_env());
  EXPECT_EQ(w.launched_by, "mpirun");
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 4);
  EXPECT_EQ(w.transport.ranks_on_host, 4);
  EXPECT_EQ(w.hosts, 2);  // 8 ranks, 4 on this host
}

// Measured on SLURM 22.05: the batch script has SLURM_PROCID=0 but no SLURM_STEP_ID.
TEST(BatchStep, AnSbatchScriptIsNoRank) {
  Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}});
  EXPECT_TRUE(in_slurm_batch_step());
  const WorldInfo w = world_from_env(Settings::from_env());
  EXPECT_EQ(w.size, 1);
  EXPECT_EQ(w.launched_by, "single");
}

TEST(BatchStep, AnSrunTaskIsARank) {
  Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"},
         {"SLURM_STEP_NUM_NODES", "2"}});
  EXPECT_FALSE(in_slurm_batch_step());
  const WorldInfo w = world_from_env(Settings::from_env());
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.size, 4);
  EXPECT_EQ(w.launched_by, "srun");
  EXPECT_EQ(w.hosts, 2);
}

TEST(Hosts, MoreRanksThanThisHostMeansSeveralHosts) {
  Env e({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  const WorldInfo w = world_from_env(Settings::from_env());
  EXPECT_EQ(w.hosts, 2);
  EXPECT_NE(w.hosts_reason.find("2 rank(s) on this host"), std::string::npos) << w.hosts_reason;
}

TEST(Addresses, LoopbackAndRoutes) {
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_TRUE(is_loopback("127.3.0.1"));
  EXPECT_TRUE(is_loopback("localhost"));
  EXPECT_FALSE(is_loopback("10.0.0.1"));
  EXPECT_EQ(route_source_address("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(route_source_address("no-such-host.invalid"), "");
}

// A job across hosts with no shared rendezvous fails at once (not after the timeout),
// naming what to add.
TEST(Rendezvous, SeveralHostsWithoutRendezvousFailAtOnce) {
  Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
         {"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_STEP_NODELIST", "h[0-1]"}});
  WorldInfo w = world_from_env(Settings::from_env());
  std::shared_ptr<void> keep;
  const double t0 = now_seconds();
  try {
    open_world_store(w, &keep);
    FAIL() << "no error";
  } catch (const InvalidArgument& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("spans 2 hosts (SLURM_STEP_NUM_NODES=2)"), std::string::npos) << m;
    EXPECT_NE(m.find("DTRAIN_TOKEN"), std::string::npos) << m;
    EXPECT_NE(m.find("MASTER_ADDR"), std::string::npos) << m;
  }
  EXPECT_LT(now_seconds() - t0, w.transport.fabric.connect_timeout_s);  // not a wait for the timeout
}

TEST(Rendezvous, LoopbackAdvertisedToAnotherHostNamesBindAddr) {
  Env e({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "1"}, {"DTRAIN_STORE", "tcp://10.255.255.1:1"},
         {"DTRAIN_TOKEN", "t"}, {"DTRAIN_BIND_ADDR", "127.0.0.1"}});
  WorldInfo w = world_from_env(Settings::from_env());
  std::shared_ptr<void> keep;
  try {
    open_world_store(w, &keep);
    FAIL() << "no error";
  } catch (const InvalidArgument& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("loopback"), std::string::npos) << m;
    EXPECT_NE(m.find("DTRAIN_BIND_ADDR"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
  }
}

TEST(Flags, SetTimeoutFollowsUnlessTheRendezvousTimeoutWasSet) {
  {
    Env e(std::map<std::string, std::string>{{"DTRAIN_TIMEOUT", "0.001"}});
    WorldInfo w = world_from_env(Settings::from_env());
    w.set_timeout(10);
    EXPECT_EQ(w.transport.timeout_s, 10);
    EXPECT_EQ(w.transport.fabric.connect_timeout_s, 10);
  }
  // The process's settings are read once; a snapshot with the rendezvous timeout set stands in.
  WorldInfo w = world_from_env(Settings::from_map({{"DTRAIN_TIMEOUT", "0.001"}, {"DTRAIN_CONNECT_TIMEOUT", "99"}}));
  w.set_timeout(10);
  EXPECT_EQ(w.transport.fabric.connect_timeout_s, 99);
}

}  // namespace
}  // namespace dtrain

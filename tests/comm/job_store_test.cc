// The file store of mpirun/srun jobs (issue 13 item 2, issue 15): private, owner-checked job
// directory keyed by job and step, no keys shared between runs, removed by the last rank.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>

#include "base/error.h"
#include "comm/file_store.h"
#include "comm/world.h"

namespace dtrain {
namespace {
namespace fs = std::filesystem;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = "jstest" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ::setenv("SLURM_JOB_ID", job_.c_str(), 1);
    ::setenv("SLURM_STEP_ID", "0", 1);
    ::unsetenv("MASTER_ADDR");
    ::unsetenv("MASTER_PORT");
    ::unsetenv("OMPI_MCA_ess_base_jobid");
    fs::remove_all(root("0"));
    fs::remove_all(root("1"));
  }
  void TearDown() override {
    fs::remove_all(root("0"));
    fs::remove_all(root("1"));
    ::unsetenv("SLURM_JOB_ID");
    ::unsetenv("SLURM_STEP_ID");
  }
  std::string root(const std::string& step) const {
    return "/tmp/dtrain-" + std::to_string(::getuid()) + "-" + job_ + "-" + step;
  }
  static std::shared_ptr<Store> open(int rank, int size) {
    WorldInfo w;
    w.rank = rank;
    w.size = size;
    w.transport.fabric.connect_timeout_s = 10;
    std::shared_ptr<void> keepalive;
    return open_world_store(w, &keepalive);
  }
  // A run that dies right after rank 0 wrote `key` (a crash: nothing cleaned up).
  static void crashed_run(const std::string& key, const std::string& value) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto s = open(0, 2);
      s->set(key, value);
      ::_exit(0);  // no destructors: the job directory stays behind
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::string job_;
};

TEST_F(JobStoreTest, RerunWithTheSameIdsNeverReadsTheDeadRunsKeys) {
  crashed_run("shm/1", "stale");
  ASSERT_TRUE(fs::exists(root("0")));
  // Rank 1 of the rerun may arrive before its rank 0: it must wait for it, not read "stale".
  auto rank1 = std::async(std::launch::async, [] {
    auto s = open(1, 2);
    std::string v = s->get("shm/1", 10);
    s->set("done", "1");
    return v;
  });
  auto s0 = open(0, 2);
  s0->set("shm/1", "fresh");
  EXPECT_EQ(rank1.get(), "fresh");
  s0->get("done", 10);
  s0.reset();
  EXPECT_FALSE(fs::exists(root("0"))) << "the last rank removes the job directory";
}

TEST_F(JobStoreTest, StepsOfOneAllocationDoNotShare) {
  crashed_run("world/x", "step0");
  ::setenv("SLURM_STEP_ID", "1", 1);
  auto s0 = open(0, 2);
  EXPECT_FALSE(s0->check({"world/x"}));
  EXPECT_TRUE(fs::exists(root("1")));
}

TEST_F(JobStoreTest, DirectoryIsPrivateAndRemovedByTheLastRank) {
  auto a = open(0, 2);
  auto b = open(1, 2);
  struct stat st {};
  ASSERT_EQ(::lstat(root("0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  a->set("k", "v");
  EXPECT_EQ(b->get("k", 5), "v");
  a.reset();
  EXPECT_TRUE(fs::exists(root("0"))) << "rank 1 still uses it";
  b.reset();
  EXPECT_FALSE(fs::exists(root("0")));
}

TEST_F(JobStoreTest, SymlinkOrForeignOrOpenDirectoryIsRefused) {
  std::string elsewhere = root("0") + "-target";
  fs::create_directory(elsewhere);
  fs::create_directory_symlink(elsewhere, root("0"));
  try {
    open(0, 2);
    FAIL() << "a symlinked job directory must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  fs::remove(root("0"));
  fs::remove_all(elsewhere);
  fs::create_directory(root("0"));
  ::chmod(root("0").c_str(), 0777);
  try {
    open(1, 2);
    FAIL() << "a world-writable job directory must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 700"), std::string::npos) << e.what();
  }
}

TEST_F(JobStoreTest, LiveJobWithTheSameIdsIsNamed) {
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    {
      auto s = open(0, 2);
      char c = 'r';
      if (::write(ready[1], &c, 1) != 1) ::_exit(2);
      if (::read(go[0], &c, 1) != 1) ::_exit(3);
    }
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  try {
    open(0, 2);
    ADD_FAILURE() << "two live jobs with the same ids must not share a rendezvous";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("another job"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

}  // namespace
}  // namespace dtrain

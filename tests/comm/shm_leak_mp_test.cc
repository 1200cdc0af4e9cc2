// Shared-memory segments are never left in /dev/shm (issue 13 item 3): a job in which a rank
// fails during setup, while the others are inside the shared-memory rendezvous, leaves
// nothing behind once the launcher has stopped the others. Each job runs in its own mount
// namespace with a private /dev/shm, so what is left there is exactly what the job left.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "support/subprocess.h"

namespace dtrain {
namespace {

using testing::run_command;

class ShmLeakTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    bin_ = testing::env_path("DTRAIN_BIN");
    rank_ = testing::env_path("DTRAIN_TEST_RANK");
    if (bin_.empty() || rank_.empty()) GTEST_SKIP() << "DTRAIN_BIN / DTRAIN_TEST_RANK not set (run through ctest)";
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for a private /dev/shm (unshare --mount)";
    auto probe = run_command("unshare --mount sh -c 'mount -t tmpfs none /dev/shm && ls -A /dev/shm | wc -l'");
    if (probe.exit_code != 0) GTEST_SKIP() << "cannot mount a private /dev/shm here: " << probe.output;
  }
  std::string bin_, rank_;
};

TEST_P(ShmLeakTest, RankFailingDuringSetupLeavesNothingInDevShm) {
  std::string job = bin_ + " run -n 4 --transport shm --timeout 60 -- " + rank_ + " " + GetParam();
  auto r = run_command("unshare --mount sh -c 'mount -t tmpfs none /dev/shm && " + job +
                       "; echo \"exit=$?\"; echo left:; ls -A /dev/shm; echo end'");
  ASSERT_NE(r.output.find("exit=5"), std::string::npos) << "rank 2's failure ends the job: " << r.output;
  EXPECT_NE(r.output.find("rank 2"), std::string::npos) << r.output;
  auto from = r.output.find("left:\n"), to = r.output.find("end", from);
  ASSERT_NE(from, std::string::npos) << r.output;
  EXPECT_EQ(r.output.substr(from + 6, to - from - 6), "") << "left in /dev/shm by the job:\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(Phases, ShmLeakTest, ::testing::Values("die-in-setup", "die-in-shmctx"));

}  // namespace
}  // namespace dtrain

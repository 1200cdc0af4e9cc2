// Collectives across real processes, started by the `dtrain` launcher: every op and every
// algorithm over shm and tcp, each result checked against closed-form values (--check), and
// a rank killed mid-run is reported by the job instead of hanging it.
#include <gtest/gtest.h>

#include <fstream>

#include "support/subprocess.h"

namespace dtrain {
namespace {

class CollectivesMpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = testing::env_path("DTRAIN_BIN");
    if (bin_.empty()) GTEST_SKIP() << "DTRAIN_BIN not set (run through ctest)";
  }
  std::string bin_;
};

TEST_F(CollectivesMpTest, EveryOpAndAlgorithmCheckedAcrossProcesses) {
  std::string json = ::testing::TempDir() + "/coll-mp-" + std::to_string(::getpid()) + ".json";
  auto r = testing::run_command(bin_ +
                                " bench collectives -n 3 --transport shm,tcp --op "
                                "allreduce,allgather,reducescatter,broadcast,reduce,gather,scatter,alltoall "
                                "--algo all --sizes 8:64K --factor 64 --seconds 0.001 --warmup 1 --segment 4096 "
                                "--check --json " +
                                json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(json);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"algo\": \"halving_doubling\""), std::string::npos);
  EXPECT_NE(text.find("\"transport\": \"tcp\""), std::string::npos);
  EXPECT_EQ(text.find("\"wrong\": 1"), std::string::npos) << text;
  std::remove(json.c_str());
}

TEST_F(CollectivesMpTest, ShmContextPathsAcrossProcesses) {
  auto r = testing::run_command(bin_ +
                                " bench collectives -n 3 --transport shm --shm-context --op "
                                "allreduce,allgather,reducescatter,broadcast --algo auto,shm_direct --sizes 8:1M "
                                "--factor 32 --seconds 0.001 --warmup 1 --check");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("shm_direct"), std::string::npos) << r.output;
}

// Large all-reduces across processes: each rank reduces a slice of more than 8 MiB read
// from the other's send buffer (an odd count: the vector kernel's tail runs) and pushes each
// finished piece into the other's output. Out of place and in place (where the output being
// written is the other rank's input), checked element by element.
TEST_F(CollectivesMpTest, LargeShmDirectAllreduceAcrossProcesses) {
  for (const char* extra : {"", " --inplace"}) {
    auto r = testing::run_command(bin_ +
                                  " bench collectives -n 2 --transport shm --shm-context --algo shm_direct "
                                  "--sizes 20000004 --seconds 0.001 --warmup 1 --check" +
                                  extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("shm_direct"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace dtrain

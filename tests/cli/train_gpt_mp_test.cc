// `dtrain train` with the transformer through the CLI: tensor parallel on 2 ranks, and a rank
// killed mid-pipeline stopping the job with an error that names it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "support/subprocess.h"

namespace dtrain {
namespace {

class TrainGptCli : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = testing::env_path("DTRAIN_BIN");
    text_ = "/tmp/dtrain-gpt-cli-" + std::to_string(::getpid()) + ".txt";
    std::ofstream out(text_);
    for (int i = 0; i < 200; ++i) out << "To be, or not to be, that is the question:\nWhether 'tis nobler " << i << "\n";
  }
  void TearDown() override { std::remove(text_.c_str()); }
  std::string run_args(const std::string& extra) {
    return bin_ + " train --model gpt:layers=2,heads=2,width=16,context=8 --data text:" + text_ + " --steps 6 " + extra;
  }
  std::string bin_, text_;
};

TEST_F(TrainGptCli, TensorParallelOnTwoRanks) {
  auto r = testing::run_command(run_args("-n 2 --strategy tp --tp 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("trained 6 steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tensor parallel:"), std::string::npos) << r.output;
}

TEST_F(TrainGptCli, RankKilledMidPipelineIsNamed) {
  auto r = testing::run_command("DTRAIN_FAULT_KILL=1:3 " +
                                run_args("-n 2 --strategy pp --pp 2 --microbatches 2 --eval-every 1 --timeout 60"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("was killed by SIGKILL"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dtrain

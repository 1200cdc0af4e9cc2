// Automatic restart through the launcher: a job that loses a rank ten times — killed at a
// random step, or when a random round begins — is restarted each time from its checkpoints
// (`--max-restarts`), and finishes with exactly the losses, round by round, of an
// uninterrupted run: ddp (deterministic), ps, localsgd, gossip and the GPT under tp and pp.
// A stopped (SIGSTOP) rank is caught by the heartbeat and named as hung within seconds.
#include <random>

#include "cli/train_run.h"
#include "data/rng.h"

namespace {

namespace fs = std::filesystem;
using dtrain::testing::load_json;
using Result = dtrain::testing::TrainResult;

Result run(const std::string& args, const std::string& env = "") { return dtrain::testing::run_train(args, env); }
nlohmann::json load(const std::string& path) { return load_json(path); }

class Restart : public dtrain::testing::TrainTest {
 protected:
  void SetUp() override {
    TrainTest::SetUp();
    if (IsSkipped()) return;
    dtrain::data::Rng rng(5);
    std::ofstream train(file("train.csv")), test(file("test.csv")), text(file("text.txt"));
    for (int i = 0; i < 400; ++i) {
      const int y = static_cast<int>(rng.below(3));
      std::ofstream& o = i < 300 ? train : test;
      o << y;
      for (int j = 0; j < 8; ++j) o << "," << rng.normal() * 0.7 + (j % 3 == y ? 1.0 : 0.0);
      o << "\n";
    }
    for (int i = 0; i < 200; ++i) text << "To be, or not to be, that is the question: " << i << "\n";
  }

  // Ten faults, one per attempt: even attempts kill a random worker at a random step of the
  // attempt (past its first round, so every attempt checkpoints something), odd attempts kill
  // a random rank when the round after the attempt's first begins.
  static std::string faults(int ranks, int workers, int steps_per_round, uint32_t seed) {
    std::mt19937 gen(seed);
    std::string list;
    for (int a = 0; a < 10; ++a) {
      if (!list.empty()) list += ",";
      if (a % 2 == 0) {
        const int r = static_cast<int>(gen() % static_cast<uint32_t>(workers));
        const int s = steps_per_round + static_cast<int>(gen() % static_cast<uint32_t>(steps_per_round));
        list += std::to_string(r) + ":step:" + std::to_string(s);
      } else {
        const int r = static_cast<int>(gen() % static_cast<uint32_t>(ranks));
        list += std::to_string(r) + ":" + std::to_string(a + 1);
      }
    }
    return list;
  }

  void expect_same_run(const std::string& args, int ranks, int workers, int steps_per_round, size_t rounds) {
    fs::remove_all(file("ck"));
    Result full = run(args + " --json " + file("full.json"));
    ASSERT_EQ(full.code, 0) << args << "\n" << full.output;
    const std::string env = "DTRAIN_FAULT_KILL=" + faults(ranks, workers, steps_per_round, 7);
    Result chaos = run(args + " --checkpoint " + file("ck") + " --max-restarts 10 --json " + file("chaos.json"), env);
    ASSERT_EQ(chaos.code, 0) << args << "\n" << env << "\n" << chaos.output;
    EXPECT_NE(chaos.output.find("restart 10 of 10"), std::string::npos) << args << "\n" << chaos.output;
    EXPECT_EQ(chaos.output.find("restart 11"), std::string::npos) << chaos.output;
    const auto a = load(file("full.json")), b = load(file("chaos.json"));
    ASSERT_EQ(a["epoch_rows"].size(), rounds) << args;
    ASSERT_EQ(b["epoch_rows"].size(), rounds) << args;
    for (size_t e = 0; e < rounds; ++e) {
      EXPECT_EQ(a["epoch_rows"][e]["train_loss"].get<double>(), b["epoch_rows"][e]["train_loss"].get<double>())
          << args << " round " << e + 1;
      EXPECT_EQ(a["epoch_rows"][e]["test_loss"].get<double>(), b["epoch_rows"][e]["test_loss"].get<double>())
          << args << " round " << e + 1;
    }
    EXPECT_EQ(a["test_loss"].get<double>(), b["test_loss"].get<double>()) << args;
  }

  std::string csv() { return "--data csv:" + file("train.csv") + "," + file("test.csv") + " --model mlp:8-16-3 "; }
  std::string gpt() {
    return "--model gpt:layers=2,heads=2,width=16,context=8 --data text:" + file("text.txt") +
           " --steps 26 --eval-every 2 --eval-batches 2 ";
  }
};

// 300 examples in global batches of 30: 10 steps per epoch on every worker; 12 epochs.
TEST_F(Restart, DdpTenKillsEndWithTheUninterruptedModel) {
  expect_same_run("-n 2 " + csv() + "--epochs 12 --batch 30 --deterministic --optimizer momentum --seed 3", 2, 2, 10, 12);
}

// --checkpoint-every 3: rounds of 3 steps (4 per epoch), so kills land mid-epoch and at most
// 3 steps are redone.
TEST_F(Restart, MidEpochCheckpointsTenKillsEndWithTheUninterruptedModel) {
  expect_same_run("-n 2 " + csv() + "--epochs 4 --batch 30 --deterministic --optimizer momentum --seed 3 --checkpoint-every 3",
                  2, 2, 3, 16);
}

TEST_F(Restart, DataParallelFamilyTenKillsEndWithTheUninterruptedModel) {
  expect_same_run("-n 3 " + csv() + "--epochs 12 --batch 30 --optimizer momentum --seed 5 --strategy ps --sync --deterministic",
                  3, 2, 10, 12);
  expect_same_run("-n 2 " + csv() + "--epochs 12 --batch 30 --optimizer momentum --seed 5 --strategy localsgd --sync-every 3",
                  2, 2, 10, 12);
  expect_same_run("-n 3 " + csv() + "--epochs 12 --batch 30 --optimizer momentum --seed 5 --strategy gossip", 3, 3, 10, 12);
}

TEST_F(Restart, GptTensorAndPipelineTenKillsEndWithTheUninterruptedModel) {
  expect_same_run("-n 2 " + gpt() + "--strategy tp --timeout 60", 2, 2, 2, 13);
  expect_same_run("-n 2 " + gpt() + "--strategy pp --microbatches 2 --timeout 60", 2, 2, 2, 13);
}

// A rank stopped with SIGSTOP beats no more: the launcher names it as hung after --heartbeat
// seconds and ends the job, far sooner than the collective timeout (300 s here).
TEST_F(Restart, StoppedRankIsNamedAsHungByTheHeartbeat) {
  // Rank 1 stops itself (SIGSTOP instead of SIGKILL) when its step 3 begins.
  Result r = run("-n 2 " + csv() + "--epochs 50 --batch 30 --heartbeat 2", "DTRAIN_FAULT_KILL=1:step:3 DTRAIN_FAULT_SIGNAL=STOP");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped (SIGSTOP)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hung"), std::string::npos) << r.output;
}

}  // namespace

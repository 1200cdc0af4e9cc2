// `dtrain train` as a user runs it: the built binary ($DTRAIN_BIN) as a subprocess. Bad
// flags must fail with exit code 2 and a message that says what to fix; a small run must
// succeed and write the promised JSON.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/train_run.h"

namespace {

namespace fs = std::filesystem;
using Result = dtrain::testing::TrainResult;
using TrainCli = dtrain::testing::TrainTest;

Result run(const std::string& args) { return dtrain::testing::run_train(args); }

void expect_usage_error(const std::string& args, const std::string& needle) {
  Result r = run(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "args: " << args << "\noutput: " << r.output;
}

TEST_F(TrainCli, BadFlagsSayWhatToFix) {
  expect_usage_error("--epoch 3", "did you mean --epochs?");
  expect_usage_error("--epochs", "--epochs needs a value");
  expect_usage_error("--epochs abc", "--epochs expects an integer, got 'abc'");
  expect_usage_error("--epochs 0", "--epochs must be between 1");
  expect_usage_error("--lr fast", "--lr expects a number");
  expect_usage_error("--batch --lr 1", "--batch needs a value");
  expect_usage_error("--optimizer rmsprop", "use sgd, momentum, nesterov, adam or adamw");
  expect_usage_error("--strategy warp", "this build has: single, threads, hogwild, hogwild-lock");
  expect_usage_error("oops", "unexpected argument 'oops'");
  expect_usage_error("--resume=yes", "is a switch");
  expect_usage_error("--strategy hogwild --optimizer adam", "use --optimizer sgd");
  expect_usage_error("--strategy single --threads 2", "use --strategy threads");
  expect_usage_error("--strategy threads -n 4", "drop -n/--ranks");
  expect_usage_error("--data imagenet", "unknown dataset 'imagenet'");
  expect_usage_error("--model resnet", "unknown --model 'resnet'");
  expect_usage_error("--model mlp:784-x-10", "784-x-10");
}

TEST_F(TrainCli, HelpListsFlagsStrategiesAndDatasets) {
  Result r = run("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"--strategy", "--checkpoint", "hogwild-lock", "libsvm:FILE", "--json"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
}

TEST_F(TrainCli, MalformedDataNamesFileAndLine) {
  std::ofstream(file("bad.svm")) << "+1 1:1 2:1\n-1 1:1 two:1\n";
  Result r = run("--model logreg --data libsvm:" + file("bad.svm"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("bad.svm: line 2"), std::string::npos) << r.output;
}

TEST_F(TrainCli, SmallRunWritesJsonAndResumes) {
  {
    std::ofstream svm(file("train.svm"));
    for (int i = 0; i < 400; ++i) svm << (i % 2 ? "+1" : "-1") << " " << (i % 2 ? 1 : 2) << ":1 " << 3 + i % 5 << ":0.5\n";
  }
  const std::string common = "--model logreg --data libsvm:" + file("train.svm") + " --batch 8 --lr 0.5 --quiet";
  Result r = run(common + " --strategy hogwild --threads 2 --epochs 2 --json " + file("out.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(file("out.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  for (const char* k : {"strategy", "world_size", "threads", "model", "dataset", "epochs", "test_accuracy", "test_loss",
                        "examples_per_second", "wall_seconds", "epoch_rows"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["strategy"], "hogwild");
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["epoch_rows"].size(), 2u);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.95);  // separable by features 1 vs 2
  // The file names the build that produced it (dtrain --version's fields).
  ASSERT_TRUE(j.contains("build")) << j.dump();
  EXPECT_FALSE(j["build"].value("revision", "").empty()) << j["build"].dump();
  EXPECT_TRUE(j["build"].contains("kernels")) << j["build"].dump();

  // Checkpoint after 1 epoch, resume to 3: the JSON holds all 3 rows and equals a straight run.
  const std::string ck = " --checkpoint " + file("ck");
  ASSERT_EQ(run(common + ck + " --epochs 1").code, 0);
  Result resumed = run(common + ck + " --epochs 3 --resume --json " + file("resumed.json"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  ASSERT_EQ(run(common + " --epochs 3 --json " + file("straight.json")).code, 0);
  nlohmann::json a = nlohmann::json::parse(std::ifstream(file("resumed.json")));
  nlohmann::json b = nlohmann::json::parse(std::ifstream(file("straight.json")));
  EXPECT_EQ(a["resumed_from_epoch"], 1);
  ASSERT_EQ(a["epoch_rows"].size(), 3u);
  for (size_t e = 0; e < 3; ++e) EXPECT_EQ(a["epoch_rows"][e]["train_loss"], b["epoch_rows"][e]["train_loss"]) << e;
  EXPECT_EQ(a["test_loss"], b["test_loss"]);

  expect_usage_error(common + " --resume", "--resume needs --checkpoint DIR");
}

TEST_F(TrainCli, HogwildHotTrainsAndOwnsItsFlags) {
  {
    std::ofstream svm(file("hot.svm"));
    for (int i = 0; i < 400; ++i) svm << (i % 2 ? "+1" : "-1") << " " << (i % 2 ? 1 : 2) << ":1 " << 3 + i % 5 << ":0.5\n";
  }
  const std::string common = "--model logreg --data libsvm:" + file("hot.svm") + " --batch 1 --lr 0.5 --quiet";
  Result r = run(common + " --strategy hogwild-hot --threads 2 --hot-features 3 --merge-every 16 --epochs 2 --json " +
                 file("hot.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(std::ifstream(file("hot.json")));
  EXPECT_EQ(j["strategy"], "hogwild-hot");
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.95);
  expect_usage_error(common + " --strategy hogwild --hot-features 10", "--hot-features applies to --strategy hogwild-hot");
  expect_usage_error(common + " --strategy hogwild-hot --merge-every 0", "--merge-every must be between 1");
  expect_usage_error(common + " --strategy hogwild-hot --optimizer adam", "use --optimizer sgd");
}

}  // namespace

// tests/cli/train_run.h — running `dtrain train` as a user does, for the CLI tests: the built
// binary ($DTRAIN_BIN) as a subprocess, its exit code and its stdout+stderr; a per-test
// scratch directory; a JSON result file read back.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace dtrain::testing {

struct TrainResult {
  int code = -1;       // exit code; -1 when killed by a signal
  std::string output;  // stdout + stderr
};

inline std::string dtrain_bin() {
  const char* b = std::getenv("DTRAIN_BIN");
  return b ? b : "";
}

// Runs `env dtrain train args` (env: "VAR=value ..." or empty).
inline TrainResult run_train(const std::string& args, const std::string& env = "") {
  TrainResult r;
  const std::string cmd = env + " " + dtrain_bin() + " train " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A fixture with a fresh directory per test (removed afterwards); skips without DTRAIN_BIN.
class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dtrain_bin().empty() || !std::filesystem::exists(dtrain_bin()))
      GTEST_SKIP() << "DTRAIN_BIN is not set to the built dtrain binary";
    dir_ = std::filesystem::temp_directory_path() /
           ("dtrain_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string file(const std::string& n) const { return (dir_ / n).string(); }
  std::filesystem::path dir_;
};

}  // namespace dtrain::testing

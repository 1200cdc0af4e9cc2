// tests/cli/bench_files.h — the bench CLI tests' scratch files: a per-process path under the
// test's temporary directory, and a JSON file read back (a missing file fails the test).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace dtrain::testing {

inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "-" + std::to_string(::getpid());
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

}  // namespace dtrain::testing

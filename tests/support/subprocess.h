// tests/support/subprocess.h — run a shell command, capture its output and exit status.
#pragma once

#include <string>

namespace dtrain::testing {

struct CommandResult {
  int exit_code;      // 128+N when killed by signal N
  std::string output; // stdout and stderr together
};

// Runs `command` with /bin/sh, stdout and stderr merged.
CommandResult run_command(const std::string& command);

// The path in environment variable `var` (set by CTest), or "" when unset.
std::string env_path(const char* var);

}  // namespace dtrain::testing

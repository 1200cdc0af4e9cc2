#include "support/subprocess.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

namespace dtrain::testing {

CommandResult run_command(const std::string& command) {
  std::string full = "(" + command + ") 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  CommandResult r{-1, ""};
  if (!p) return r;
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, k);
  int status = ::pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
}

std::string env_path(const char* var) {
  const char* v = std::getenv(var);
  return v ? v : "";
}

}  // namespace dtrain::testing

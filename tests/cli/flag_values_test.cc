// Every numeric flag of every command, fed 0, -1, NaN, infinity, a huge value and 2^32 + 1:
// the command either accepts the value or exits with code 2 and a message naming the flag —
// never a signal, never another error. The flags are read from each command's --help, so a new
// flag is covered without touching this test; `--help` after the value makes a command parse
// and check every flag, then print its help instead of running.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "support/subprocess.h"

namespace dtrain {
namespace {

using testing::run_command;

// "--name VALUE" pairs on the help's option lines (switches have no value and are skipped).
std::vector<std::string> flags_with_values(const std::string& help) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::istringstream in(help);
  const std::regex option(R"(^\s+(?:-\w, )?--([a-z0-9-]+) (\S+))");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, option)) continue;
    if (m[1] == "help" || !seen.insert(m[1]).second) continue;
    out.push_back(m[1]);
  }
  return out;
}

TEST(FlagValues, EveryNumericFlagOfEveryCommandFailsCleanlyOrAccepts) {
  const std::string bin = testing::env_path("DTRAIN_BIN");
  const std::vector<std::string> commands = {"train", "run", "bench p2p", "bench collectives", "bench calibrate", "bench tp-blocks",
                                             "plan collective", "generate"};
  const std::vector<std::string> values = {"0", "-1", "nan", "inf", "1e300", "4294967297"};
  int checked = 0;
  for (const std::string& cmd : commands) {
    auto help = run_command(bin + " " + cmd + " --help");
    ASSERT_EQ(help.exit_code, 0) << cmd << "\n" << help.output;
    const auto flags = flags_with_values(help.output);
    EXPECT_GE(flags.size(), 3u) << "no flags found in the help of '" << cmd << "':\n" << help.output;
    for (const std::string& flag : flags) {
      for (const std::string& v : values) {
        auto r = run_command(bin + " " + cmd + " --" + flag + " " + v + " --help");
        ++checked;
        EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2)
            << "dtrain " << cmd << " --" << flag << " " << v << " exited " << r.exit_code << ":\n" << r.output;
        if (r.exit_code == 2) {
          EXPECT_NE(r.output.find("--" + flag), std::string::npos)
              << "dtrain " << cmd << " --" << flag << " " << v << " does not name the flag:\n" << r.output;
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
}

}  // namespace
}  // namespace dtrain

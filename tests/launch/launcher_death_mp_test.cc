// Ranks die with their launcher (issue 13 item 4): `dtrain run` killed with SIGKILL cannot
// forward anything, yet none of its ranks may keep running.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <string>

#include "base/clock.h"
#include "support/subprocess.h"

namespace dtrain {
namespace {

// Reads the launcher's output until `n` lines "pid P" arrived (bounded by the deadline).
std::set<int> read_pids(int fd, size_t n, const Deadline& deadline) {
  std::set<int> pids;
  std::string text;
  while (pids.size() < n && !deadline.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, deadline.remaining_ms()) <= 0) break;
    char buf[4096];
    ssize_t k = ::read(fd, buf, sizeof buf);
    if (k <= 0) break;
    text.append(buf, static_cast<size_t>(k));
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      auto at = line.find("pid ");
      if (at != std::string::npos) pids.insert(std::atoi(line.c_str() + at + 4));
    }
  }
  return pids;
}

TEST(LauncherDeath, RanksDieWhenTheLauncherIsKilled) {
  std::string bin = testing::env_path("DTRAIN_BIN");
  if (bin.empty()) GTEST_SKIP() << "DTRAIN_BIN not set (run through ctest)";
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::execl(bin.c_str(), bin.c_str(), "run", "-n", "2", "--", "sh", "-c", "echo pid $$; exec sleep 600",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::set<int> ranks = read_pids(out[0], 2, Deadline::after(30));
  ASSERT_EQ(ranks.size(), 2u) << "the ranks did not start";
  std::vector<int> pidfds;
  for (int pid : ranks) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    ASSERT_GE(fd, 0) << "rank pid " << pid;
    pidfds.push_back(fd);
  }
  ASSERT_EQ(::kill(launcher, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  size_t gone = 0;
  for (int fd : pidfds) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) == 1) ++gone;  // readable once the rank has exited
  }
  EXPECT_EQ(gone, ranks.size()) << "ranks outlived their launcher";
  for (int pid : ranks) ::kill(pid, SIGKILL);  // a failing run leaves nothing behind either
  for (int fd : pidfds) ::close(fd);
  ::close(out[0]);
}

}  // namespace
}  // namespace dtrain

// The launcher's sampler of the cores' distance: its file while it runs, none after, and the
// verdict a pass takes from its samples.
#include "cli/cores_sampler.h"
#include "plan/calibrate_cache.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

namespace dtrain::cli {
namespace {

TEST(CoresSampler, KeepsItsCountsInAPrivateFileWhileItRuns) {
  std::string path;
  {
    CoresSampler s(::testing::TempDir());
    ASSERT_TRUE(s.running());
    path = s.path();
    EXPECT_EQ(::access(path.c_str(), R_OK), 0) << path;
    const auto [close, far] = s.counts();
    EXPECT_GE(close, 0);
    EXPECT_GE(far, 0);
    // Another process reads the same counts from the file (or none yet, before the first write).
    if (const auto read = read_sampler_file(path)) {
      EXPECT_LE(read->first + read->second, s.counts().first + s.counts().second);
    }
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << path << " left behind";
  EXPECT_FALSE(read_sampler_file(path).has_value());
}

// The sampler's pace: every `every` for its first kDenseSamples samples or without a CPU
// share; after that, slower where a sample costs more than the share of the wait.
TEST(CoresSampler, WaitsLongEnoughToKeepItsShareOfTheCpu) {
  using std::chrono::milliseconds;
  const milliseconds every(100);
  EXPECT_EQ(sampler_wait(every, 0, 100, 0.05), every);                    // no share asked
  EXPECT_EQ(sampler_wait(every, 0.01, kDenseSamples - 1, 0.05), every);   // still dense
  EXPECT_EQ(sampler_wait(every, 0.01, kDenseSamples, 0.05), milliseconds(5000));
  EXPECT_EQ(sampler_wait(every, 0.01, kDenseSamples, 0.0004), every);     // cheap: never faster
  EXPECT_EQ(sampler_wait(every, 0.01, kDenseSamples, 0.0015), milliseconds(150));
  EXPECT_EQ(sampler_wait(every, 0.01, kDenseSamples, 0), every);          // no probe ran
  EXPECT_EQ(sampler_wait(every, 0.01, kDenseSamples, 1e9), milliseconds(3600000));
}

// The probe reports the CPU its two threads took: at least what one spinning round costs.
TEST(CoresSampler, TheProbeChargesItsThreadsCpu) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: nothing to probe against";
  double cpu_s = -1;
  const double ns = plan::probe_core_round_trip_ns(0.0002, &cpu_s);
  if (ns == 0) GTEST_SKIP() << "two CPUs could not be had";
  EXPECT_GT(ns, 0);
  EXPECT_GT(cpu_s, 0);
  EXPECT_LT(cpu_s, 60);
}

// A launcher's job sees the sampler's file named in DTRAIN_CORES_SAMPLES for its length and
// not after, and learns the samples taken meanwhile.
TEST(CoresSampler, AJobRunsWithTheSamplersFileExportedAndThenWithout) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: nothing to sample against";
  std::string seen;
  std::pair<int64_t, int64_t> counts{-1, -1};
  const int rc = run_sampled_job(
      [&] {
        const char* path = std::getenv("DTRAIN_CORES_SAMPLES");
        seen = path ? path : "";
        return 7;
      },
      kSampleEvery, ::testing::TempDir(), &counts);
  EXPECT_EQ(rc, 7);
  EXPECT_FALSE(seen.empty());
  EXPECT_EQ(std::getenv("DTRAIN_CORES_SAMPLES"), nullptr);
  EXPECT_NE(::access(seen.c_str(), F_OK), 0) << seen << " left behind";
  EXPECT_GE(counts.first, 0);
  EXPECT_GE(counts.second, 0);
  // The launched side reads it through the settings; unset, there is nothing to read.
  EXPECT_FALSE(launcher_samples(Settings::from_map({})));
}

// Nothing is left in the directory even by a process that dies without unwinding, and a
// child process reads the counts through path().
TEST(CoresSampler, LeavesNoFileEvenWhenKilled) {
  const std::string dir = ::testing::TempDir() + "cores-sampler-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CoresSampler s(dir);
    const bool readable = s.running() && read_sampler_file(s.path()).has_value();
    const bool empty = std::filesystem::is_empty(dir);
    ::_exit(readable && empty ? 0 : 3);  // no destructor runs
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir;
  std::filesystem::remove_all(dir);
}

// A launcher that handles SIGTERM itself (blocks it and reads it from a signalfd, as
// launch/launch.cc does) gets it while the sampler runs: the sampling thread does not take it and die
// of it. The child announces its job's start through a pipe; the test then signals it.
TEST(CoresSampler, ASignalReachesTheJobNotTheSamplingThread) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: nothing to sample against";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    const int rc = run_sampled_job(
        [&] {
          sigset_t term;
          sigemptyset(&term);
          sigaddset(&term, SIGTERM);
          pthread_sigmask(SIG_BLOCK, &term, nullptr);
          // Read from a signalfd, as the launcher does: a thread in sigwait() would unblock
          // the signal for its wait and get it first whatever the other threads do.
          const int sfd = ::signalfd(-1, &term, 0);
          if (sfd < 0) return 6;
          const char byte = 1;
          if (::write(ready[1], &byte, 1) != 1) return 4;
          signalfd_siginfo si;
          return ::read(sfd, &si, sizeof si) == sizeof si && si.ssi_signo == SIGTERM ? 42 : 5;
        },
        std::chrono::milliseconds(5), ::testing::TempDir());
    ::_exit(rc);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(::kill(child, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 42);
}

TEST(CoresSampler, APassTakesTheVerdictOfThreeQuartersOfItsSamples) {
  EXPECT_EQ(sampled_verdict({0, 0}, {9, 1}), "close");
  EXPECT_EQ(sampled_verdict({0, 0}, {1, 3}), "far");
  EXPECT_EQ(sampled_verdict({0, 0}, {5, 5}), "");  // mixed: no verdict
  EXPECT_EQ(sampled_verdict({0, 0}, {2, 0}), "");  // too few
  EXPECT_EQ(sampled_verdict({10, 4}, {10, 8}), "far");  // only the samples since `before`
  EXPECT_EQ(sampled_verdict({0, 0}, {6, 4}, 0.6), "close");
}

}  // namespace
}  // namespace dtrain::cli

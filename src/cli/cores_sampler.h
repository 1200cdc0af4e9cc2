// cli/cores_sampler.h — the cores' distance sampled while a job's ranks run.
//
// Why: on the 2-vCPU EPYC VM the hypervisor moves the two vCPUs between cores that share a
// cache ("close") and cores that do not ("far"), for seconds to minutes, and what crosses
// cores costs 2-4x more far apart. Twelve 4-rank runs beside a sampler took 0.66-0.84 ms a
// step (ddp) and 0.76-1.05 (gossip) where it read close throughout, and 1.29-1.97 where
// 66-100% of its samples read far; probes before and after each run saw neither
// (2026-11-30 10:40). A launcher is idle while its ranks run: it samples.
//
// Contract
// - CoresSampler(dir) times a cache line's round trip between two pinned threads
//   (plan::probe_core_round_trip_ns) for kSampleProbeSeconds before it returns, then starts a
//   thread that does so every `every` (kSampleEvery unless told), counting each verdict
//   (plan::core_distance), until destruction (which joins it). The first sample is taken before
//   the job starts, so every job has at least one. With no ranks running a sample costs the
//   CPUs ~0.8 ms; a round that timed the scheduler instead is passed over (the probe reads
//   its fastest).
// - The probe's two threads must run at once, and ranks that keep both cores busy make them
//   wait for each other: with 2 or 4 ranks of the sitting's ddp job on 2 cores a sample took
//   1-18 ms of CPU (means of 20; 2026-12-01), so at 10 a second up to a tenth of a core.
//   Given a CPU share (`max_cpu_share`, of one CPU; 0: none), the sampler takes its first
//   kDenseSamples samples every `every` (a short run keeps its count of samples) and after
//   that waits sampler_wait(): at least `every`, and long enough that the last sample's CPU
//   time is that share of the wait. `dtrain train` and the calibration's passes use
//   kSamplerCpuShare; `bench collectives`' rows (0.2 s each) sample at full rate.
// - counts() is {close, far} so far. The counts are also kept in a private temporary file
//   (path(), "close far\n", rewritten in place at every sample) for processes that read
//   them (DTRAIN_CORES_SAMPLES: rank 0 of `dtrain train`, before and after each row of
//   `dtrain bench collectives`), made in `dir` (mkstemp, mode 0600) and unlinked at once:
//   path() is /proc/<pid>/fd/<fd>, readable while this object lives, so that no end of the
//   process (a signal, SIGKILL) leaves a file behind (where /proc is missing, path() is the
//   file's name, removed on destruction). running() is false where the file could not be
//   made, and then nothing is sampled.
// - The sampling thread blocks every signal: a launcher that handles SIGINT and SIGTERM
//   itself (launch/launch.cc, a signalfd) gets them, rather than this thread dying of them
//   and the process with it, its ranks stopped only by PR_SET_PDEATHSIG.
// - A host of one CPU has nothing to time against: construct none there (the probe says 0).
// - run_sampled_job(job, every, dir, counts): what every launcher does around its ranks
//   (`dtrain train`, `bench collectives` on more than 2 ranks, bench calibrate's passes):
//   a CoresSampler in `dir` ("": the temporary directory) whose file is exported as
//   DTRAIN_CORES_SAMPLES while job() runs, and *counts (if given) the samples it took.
//   Where this process was itself started with the variable set (a sampling launcher above
//   it) or the host has one CPU, no sampler is started and *counts stays {0, 0}. Returns
//   job()'s result.
// - launcher_samples(settings): the reader for the launched side: a function returning the
//   counts in the file DTRAIN_CORES_SAMPLES names ({0, 0} where it cannot be read), or an
//   empty function where the variable is unset.
// Thread-safety: counts() from any thread; construct and destroy on one; run_sampled_job
// on the launcher's main thread (it sets the environment).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/settings.h"

namespace dtrain::cli {

constexpr double kSampleProbeSeconds = 0.0002;
constexpr auto kSampleEvery = std::chrono::milliseconds(100);
// `bench collectives` rows last ~0.2 s: a sample every 20 ms gives each about 10 (with the
// ranks outnumbering the cores, at a cost of several ms of CPU a sample, above).
constexpr auto kRowSampleEvery = std::chrono::milliseconds(20);
constexpr int64_t kDenseSamples = 10;
constexpr double kSamplerCpuShare = 0.01;

// The wait before the next sample (contract above): `every` for the first kDenseSamples
// (`taken` so far, the first included) or where max_cpu_share <= 0, else at least `every` and
// at least last_cpu_s / max_cpu_share.
std::chrono::milliseconds sampler_wait(std::chrono::milliseconds every, double max_cpu_share, int64_t taken,
                                       double last_cpu_s);

class CoresSampler {
 public:
  // dir: where its file goes ("": the working directory).
  explicit CoresSampler(const std::string& dir, std::chrono::milliseconds every = kSampleEvery,
                        double max_cpu_share = 0);
  ~CoresSampler();
  CoresSampler(const CoresSampler&) = delete;
  CoresSampler& operator=(const CoresSampler&) = delete;

  const std::string& path() const { return path_; }
  bool running() const { return fd_ >= 0; }
  std::pair<int64_t, int64_t> counts() const;

 private:
  // Probes once, counts and rewrites the file; false where the write failed. *cpu_s: the
  // probe's CPU time.
  bool sample(double* cpu_s);

  std::string path_;
  std::string named_;  // the file's name while it has one (no /proc): removed on destruction
  int fd_ = -1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int64_t close_ = 0, far_ = 0;
  std::thread thread_;
};

// The counts in a sampler's file (path()), read by another process; nullopt where the file
// cannot be read or holds no counts.
std::optional<std::pair<int64_t, int64_t>> read_sampler_file(const std::string& path);

int run_sampled_job(const std::function<int()>& job, std::chrono::milliseconds every = kSampleEvery,
                    const std::string& dir = "", std::pair<int64_t, int64_t>* counts = nullptr,
                    double max_cpu_share = 0);

std::function<std::pair<int64_t, int64_t>()> launcher_samples(const Settings& settings);

// The verdict most of the samples since `before` read, where at least `share` of at least 3
// did ("close" or "far"); "" otherwise.
std::string sampled_verdict(std::pair<int64_t, int64_t> before, std::pair<int64_t, int64_t> after,
                            double share = 0.75);

}  // namespace dtrain::cli

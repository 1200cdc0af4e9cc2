// cli/cores_sampler.cc — see cores_sampler.h.
#include "cli/cores_sampler.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "plan/calibrate_cache.h"

namespace dtrain::cli {

std::chrono::milliseconds sampler_wait(std::chrono::milliseconds every, double max_cpu_share, int64_t taken,
                                       double last_cpu_s) {
  if (max_cpu_share <= 0 || taken < kDenseSamples || !(last_cpu_s > 0)) return every;
  const double ms = std::min(last_cpu_s / max_cpu_share * 1e3, 3.6e6);  // (an hour at most)
  return std::max(every, std::chrono::milliseconds(static_cast<int64_t>(std::ceil(ms))));
}

CoresSampler::CoresSampler(const std::string& dir, std::chrono::milliseconds every, double max_cpu_share) {
  std::string named = (dir.empty() ? std::string(".") : dir) + "/dtrain-cores-XXXXXX";
  // Not close-on-exec: a launcher that replaces itself (srun inside a multi-node sbatch
  // allocation, launch/launch.cc) keeps the descriptor, so the path it exported still names
  // this file (its last counts) and never another file of the new program, such as a pipe
  // whose read would block.
  fd_ = ::mkstemp(named.data());
  if (fd_ < 0) return;  // no sampling
  // Unnamed at once, so that no end of this process (SIGKILL included) leaves it behind; the
  // readers, this process's children, open it through this process's descriptor. Without
  // /proc the name stays, removed on destruction.
  path_ = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd_);
  if (::access(path_.c_str(), R_OK) == 0 && ::unlink(named.c_str()) == 0) {
    named_.clear();
  } else {
    path_ = named_ = named;
  }
  // The first sample before returning: the job has not started, so its ranks cannot keep the
  // probe's two threads from meeting, and a job shorter than a probe under load (a 10 ms run
  // of 4 ranks on 2 cores) still has one sample in the file.
  double cpu_s = 0;
  if (!sample(&cpu_s)) return;
  // The thread takes none of the process's signals: a launcher that blocks SIGINT and SIGTERM
  // to handle them (launch/launch.cc) would otherwise be ended by their default action here.
  struct Quiet {  // every signal blocked for this scope (the new thread inherits the mask)
    sigset_t before;
    Quiet() {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &before);
    }
    ~Quiet() { pthread_sigmask(SIG_SETMASK, &before, nullptr); }
  } quiet;
  thread_ = std::thread([this, every, max_cpu_share, cpu_s] {
    std::unique_lock<std::mutex> lock(mu_);
    int64_t taken = 1;
    double last_cpu_s = cpu_s;
    while (!cv_.wait_for(lock, sampler_wait(every, max_cpu_share, taken, last_cpu_s), [this] { return stop_; })) {
      lock.unlock();
      const bool written = sample(&last_cpu_s);
      lock.lock();
      if (!written) return;
      ++taken;
    }
  });
}

bool CoresSampler::sample(double* cpu_s) {
  const double ns = plan::probe_core_round_trip_ns(kSampleProbeSeconds, cpu_s);
  std::lock_guard<std::mutex> lock(mu_);
  if (ns > 0) ++(std::string(plan::core_distance(ns)) == "far" ? far_ : close_);
  char line[64];
  const int n = std::snprintf(line, sizeof line, "%020lld %020lld\n", static_cast<long long>(close_),
                              static_cast<long long>(far_));
  return ::pwrite(fd_, line, static_cast<size_t>(n), 0) == n;
}

CoresSampler::~CoresSampler() {
  if (fd_ < 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  if (!named_.empty()) ::unlink(named_.c_str());
}

std::pair<int64_t, int64_t> CoresSampler::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {close_, far_};
}

std::optional<std::pair<int64_t, int64_t>> read_sampler_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return std::nullopt;
  long long close = -1, far = -1;
  const bool ok = std::fscanf(f, "%lld %lld", &close, &far) == 2 && close >= 0 && far >= 0;
  std::fclose(f);
  if (!ok) return std::nullopt;
  return std::pair<int64_t, int64_t>{close, far};
}

int run_sampled_job(const std::function<int()>& job, std::chrono::milliseconds every, const std::string& dir,
                    std::pair<int64_t, int64_t>* counts, double max_cpu_share) {
  if (counts) *counts = {0, 0};
  if (Settings::process().has("DTRAIN_CORES_SAMPLES") || std::thread::hardware_concurrency() < 2) return job();
  std::string where = dir;
  if (where.empty()) {
    std::error_code ec;
    const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    if (!ec) where = tmp.string();
  }
  CoresSampler sampler(where, every, max_cpu_share);
  struct Exported {  // for the job's length, thrown out of or not
    bool on;
    ~Exported() {
      if (on) ::unsetenv("DTRAIN_CORES_SAMPLES");
    }
  } exported{sampler.running() && ::setenv("DTRAIN_CORES_SAMPLES", sampler.path().c_str(), 1) == 0};
  const int rc = job();
  if (counts) *counts = sampler.counts();
  return rc;
}

std::function<std::pair<int64_t, int64_t>()> launcher_samples(const Settings& settings) {
  if (!settings.has("DTRAIN_CORES_SAMPLES")) return {};
  return [path = settings.text("DTRAIN_CORES_SAMPLES")] {
    return read_sampler_file(path).value_or(std::pair<int64_t, int64_t>{0, 0});
  };
}

std::string sampled_verdict(std::pair<int64_t, int64_t> before, std::pair<int64_t, int64_t> after, double share) {
  const double closes = static_cast<double>(after.first - before.first);
  const double fars = static_cast<double>(after.second - before.second);
  const double all = closes + fars;
  if (all < 3) return "";
  if (closes >= share * all) return "close";
  if (fars >= share * all) return "far";
  return "";
}

}  // namespace dtrain::cli

#include "plan/calibrate_mix.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "parallel/gossip.h"
#include "plan/calibrate_cache.h"

namespace dtrain::plan {
namespace {

constexpr int kWarmRounds = 2, kMinRounds = 9, kMaxRounds = 401;

// Two slots of `floats` each for one thread, in shared anonymous memory (the window's kind of
// pages); unmapped on destruction.
struct Slots {
  float* base = nullptr;
  size_t floats = 0;
  explicit Slots(size_t n) : floats(n) {
    void* p = ::mmap(nullptr, 2 * n * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    DT_CHECK(p != MAP_FAILED, IoError, "calibrate mix: cannot map " << 2 * n * sizeof(float) << " bytes");
    base = static_cast<float*>(p);
    std::fill(base, base + 2 * n, 1.0f);
  }
  ~Slots() { ::munmap(base, 2 * floats * sizeof(float)); }
  Slots(const Slots&) = delete;
  Slots& operator=(const Slots&) = delete;
  float* slot(int k) const { return base + static_cast<size_t>(k) * floats; }
};

// Seconds of one mix of a model of `bytes` (median over both threads' rounds); 0 when two
// CPUs cannot be had.
double time_mix(int64_t bytes, double seconds) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 64) / 4);
  Slots slots[2] = {Slots(n), Slots(n)};
  std::atomic<int> arrived{0}, first_cpu{-2};
  std::atomic<bool> pinned_both{true}, stop{false};
  std::vector<double> times[2];
  // A barrier by count: the b-th meeting (from 1) ends when both threads have arrived b times.
  auto meet = [&](int& b) {
    ++b;
    arrived.fetch_add(1, std::memory_order_acq_rel);
    while (arrived.load(std::memory_order_acquire) < 2 * b) std::this_thread::yield();
  };
  auto body = [&](int me) {
    if (me == 0) {
      first_cpu.store(pin_to_a_cpu(-1), std::memory_order_release);
    } else {
      while (first_cpu.load(std::memory_order_acquire) == -2) std::this_thread::yield();
      if (first_cpu.load() < 0 || pin_to_a_cpu(first_cpu.load()) < 0) pinned_both.store(false);
    }
    int b = 0;
    meet(b);  // both pinned (or not)
    if (!pinned_both.load() || first_cpu.load() < 0) return;
    std::vector<float> acc(4096);
    const double start = now_seconds();
    for (int r = 0;; ++r) {
      const int cur = r % 2;
      float* x = slots[me].slot(cur);
      for (size_t i = 0; i < n; ++i) x[i] = x[i] * 0.999f + 0.001f;  // the optimizer's step
      meet(b);
      const float* peer = slots[1 - me].slot(cur);
      const std::vector<const float*> members = me == 0 ? std::vector<const float*>{x, peer}
                                                         : std::vector<const float*>{peer, x};
      const double t0 = now_seconds();
      gossip_average(members, 0.5f, slots[me].slot(1 - cur), n, acc.data());
      if (r >= kWarmRounds) times[me].push_back(now_seconds() - t0);
      if (me == 0)
        stop.store(r + 1 >= kMaxRounds || (r + 1 >= kMinRounds + kWarmRounds && now_seconds() - start >= seconds),
                   std::memory_order_release);
      meet(b);
      if (stop.load(std::memory_order_acquire)) return;
    }
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
  std::vector<double> all = times[0];
  all.insert(all.end(), times[1].begin(), times[1].end());
  if (all.empty()) return 0;
  std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
  return all[all.size() / 2];
}

}  // namespace

std::vector<int64_t> mix_calibration_sizes() { return {int64_t{256} << 10, int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20}; }

std::vector<std::pair<double, double>> measure_mix(const std::vector<int64_t>& model_bytes, double seconds) {
  std::vector<std::pair<double, double>> out;
  if (std::thread::hardware_concurrency() < 2) return out;
  for (int64_t bytes : model_bytes) {
    const double s = time_mix(bytes, seconds / static_cast<double>(std::max<size_t>(1, model_bytes.size())));
    if (s <= 0) return {};
    out.push_back({static_cast<double>(bytes), 4.0 * static_cast<double>(bytes) / s});
  }
  return out;
}

}  // namespace dtrain::plan

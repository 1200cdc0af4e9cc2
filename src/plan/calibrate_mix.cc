#include "plan/calibrate_mix.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <map>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "base/median.h"
#include "parallel/gossip.h"
#include "plan/calibrate_cache.h"

namespace dtrain::plan {
namespace {

constexpr int kWarmRounds = 2, kMinRounds = 9, kMaxRounds = 401;
constexpr int kPingTrips = 24;

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

// Seconds of one mix of a model of `bytes` (median over both threads' rounds), over every
// round and by the verdict of the round trip timed just before it (key "" for all); empty
// when two CPUs cannot be had. shared: the complete graph's mix (gossip.cc mix_window at 2
// ranks): each thread averages its half of the elements, in 32 KiB pieces, into its own
// next slot and copies the piece into the other's.
std::map<std::string, double> time_mix(int64_t bytes, double seconds, bool shared) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 64) / 4);
  Slots slots[2] = {Slots(n), Slots(n)};
  std::atomic<int> arrived{0}, first_cpu{-2};
  std::atomic<bool> pinned_both{true}, stop{false};
  alignas(64) std::atomic<uint64_t> line{0};
  std::vector<double> times[2], round_trips;  // round_trips[r]: thread 0's, before round r's mix
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
    uint64_t count = 0;
    meet(b);  // both pinned (or not)
    if (!pinned_both.load() || first_cpu.load() < 0) return;
    std::vector<float> acc(4096);
    const double start = now_seconds();
    for (int r = 0;; ++r) {
      const int cur = r % 2;
      float* x = slots[me].slot(cur);
      const double rt = ping_pong(line, count, me, kPingTrips);
      if (me == 0 && r >= kWarmRounds) round_trips.push_back(rt);
      for (size_t i = 0; i < n; ++i) x[i] = x[i] * 0.999f + 0.001f;  // the optimizer's step
      meet(b);
      const float* peer = slots[1 - me].slot(cur);
      const std::vector<const float*> members = me == 0 ? std::vector<const float*>{x, peer}
                                                         : std::vector<const float*>{peer, x};
      const double t0 = now_seconds();
      if (!shared) {
        gossip_average(members, 0.5f, slots[me].slot(1 - cur), n, acc.data());
      } else {
        const size_t part = n / 2 / 16 * 16, lo = me == 0 ? 0 : part, hi = me == 0 ? part : n;
        constexpr size_t kPiece = 8192;  // gossip.cc's
        float* mine = slots[me].slot(1 - cur);
        float* theirs = slots[1 - me].slot(1 - cur);
        std::vector<const float*> at(2);
        for (size_t off = lo; off < hi; off += kPiece) {
          const size_t len = std::min(kPiece, hi - off);
          at[0] = members[0] + off, at[1] = members[1] + off;
          gossip_average(at, 0.5f, mine + off, len, acc.data());
          std::copy(mine + off, mine + off + len, theirs + off);
        }
      }
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
  std::map<std::string, std::vector<double>> by;
  for (int me = 0; me < 2; ++me)
    for (size_t r = 0; r < times[me].size() && r < round_trips.size(); ++r) {
      by[""].push_back(times[me][r]);
      by[core_distance(round_trips[r])].push_back(times[me][r]);
    }
  std::map<std::string, double> out;
  for (const auto& [k, v] : by) out[k] = median(v, "calibrate mix");  // by holds no empty list
  return out;
}

}  // namespace

std::vector<int64_t> mix_calibration_sizes() { return {int64_t{256} << 10, int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20}; }

MixRates measure_mix(const std::vector<int64_t>& model_bytes, double seconds) {
  MixRates out;
  if (std::thread::hardware_concurrency() < 2) return out;
  const double each = seconds / static_cast<double>(2 * std::max<size_t>(1, model_bytes.size()));
  for (int64_t bytes : model_bytes)
    for (bool shared : {false, true}) {
      const auto s = time_mix(bytes, each, shared);
      if (s.empty() || s.at("") <= 0) return {};
      // Whole: 4 models of traffic a mix. Shared: the same mix's half, per rank.
      const double traffic = (shared ? 2.0 : 4.0) * static_cast<double>(bytes);
      for (const auto& [verdict, secs] : s) {
        auto& points = verdict.empty() ? (shared ? out.shared : out.all)
                                       : (shared ? out.shared_by_cores : out.by_cores)[verdict];
        points.push_back({static_cast<double>(bytes), traffic / secs});
      }
    }
  // A verdict that some sizes never saw is left out: one table holds every size.
  for (auto* by : {&out.by_cores, &out.shared_by_cores})
    for (auto it = by->begin(); it != by->end();)
      it = it->second.size() == out.all.size() ? std::next(it) : by->erase(it);
  return out;
}

}  // namespace dtrain::plan

#include "plan/host_probe.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "coll/config.h"

namespace dtrain::plan {
namespace {

bool pin(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return ::pthread_setaffinity_np(::pthread_self(), sizeof one, &one) == 0;
}

}  // namespace

// Two counters on lines of their own. The leader stores i and waits until the follower has
// stored i back; the follower waits for i and stores it. Each wait gives up (returns -1 from
// the probe) after a second, so a thread that could not run never hangs the caller.
int64_t host_round_trip_ns() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) return -1;
  constexpr uint64_t kWarm = 32, kRounds = 256, kLast = kWarm + kRounds;
  struct alignas(64) Line {
    std::atomic<uint64_t> v{0};
  };
  Line lead, follow;
  std::atomic<bool> failed{false};
  const int64_t give_up = now_ns() + 1'000'000'000;
  auto await = [&](const std::atomic<uint64_t>& x, uint64_t v) {
    for (uint64_t i = 1; x.load(std::memory_order_acquire) < v; ++i)
      if (failed.load(std::memory_order_relaxed) || (i % 4096 == 0 && now_ns() > give_up)) {
        failed.store(true, std::memory_order_relaxed);
        return false;
      }
    return true;
  };
  int64_t round_trip = -1;
  std::thread leader([&] {
    if (!pin(cpus[0])) return failed.store(true);
    int64_t t0 = now_ns();
    for (uint64_t i = 1; i <= kLast; ++i) {
      if (i == kWarm + 1) t0 = now_ns();
      lead.v.store(i, std::memory_order_release);
      if (!await(follow.v, i)) return;
    }
    round_trip = (now_ns() - t0) / static_cast<int64_t>(kRounds);
  });
  std::thread follower([&] {
    if (!pin(cpus[1])) return failed.store(true);
    for (uint64_t i = 1; i <= kLast; ++i) {
      if (!await(lead.v, i)) return;
      follow.v.store(i, std::memory_order_release);
    }
  });
  leader.join();
  follower.join();
  return failed.load() ? -1 : round_trip;
}

bool host_cores_far(int64_t round_trip_ns) { return round_trip_ns >= kCloseRoundTripNs; }

}  // namespace dtrain::plan

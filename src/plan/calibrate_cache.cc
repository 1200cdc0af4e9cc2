#include "plan/calibrate_cache.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "base/clock.h"

namespace dtrain::plan {

int pin_to_a_cpu(int skip) {
  const long cpus = std::min<long>(::sysconf(_SC_NPROCESSORS_CONF), CPU_SETSIZE);
  for (long c = 0; c < cpus; ++c) {
    if (c == skip) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(static_cast<int>(c), &one);
    if (::pthread_setaffinity_np(::pthread_self(), sizeof one, &one) == 0) return static_cast<int>(c);
  }
  return -1;
}

namespace {

// A gradient accumulating (every line read and written) and a forward pass reading weights.
void rewrite(std::vector<float>& v) {
  for (float& x : v) x = x * 0.5f + 1.0f;
}
float read_all(const std::vector<float>& v) {
  // Sixteen independent sums: one chain of adds would take longer than the loads it waits
  // for and hide any cost of fetching the lines.
  float acc[16] = {};
  const size_t n = v.size() / 16 * 16;
  for (size_t i = 0; i < n; i += 16)
    for (size_t j = 0; j < 16; ++j) acc[j] += v[i + j];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

// The two threads hand the buffer back and forth through `turn`: the timer (on one CPU)
// passes it to the peer with an odd value, the peer hands it back with the next even one.
// Between hand-offs only one thread touches the buffer, so each timed pass sees exactly the
// cache state the step before left: its own lines, or lines the peer just read or wrote.
CacheHandoff measure_handoff(int64_t bytes, int rounds) {
  CacheHandoff out;
  out.bytes = bytes;
  std::vector<float> buf(static_cast<size_t>(std::max<int64_t>(bytes, 64) / 64 * 16), 1.0f);
  std::atomic<int> turn{0}, timer_cpu{-2};
  std::atomic<bool> peer_ok{true};
  std::atomic<float> sink{0};
  std::vector<double> war, raw;  // write after the peer's read, read after the peer's write
  auto wait_for = [&](int t) {
    while (turn.load(std::memory_order_acquire) != t) std::this_thread::yield();
  };
  std::thread timer([&] {
    const int cpu = pin_to_a_cpu(-1);
    timer_cpu.store(cpu, std::memory_order_release);
    if (cpu < 0) return;
    wait_for(1000);  // the peer is pinned (or gave up)
    if (!peer_ok.load()) return;
    int t = 1000;
    for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms both caches and is not kept
      rewrite(buf);
      double t0 = now_seconds();
      rewrite(buf);
      const double own_w = now_seconds() - t0;
      turn.store(++t, std::memory_order_release);  // the peer reads every line
      wait_for(++t);
      t0 = now_seconds();
      rewrite(buf);
      const double after_read = now_seconds() - t0;
      t0 = now_seconds();
      sink.store(read_all(buf), std::memory_order_relaxed);
      const double own_r = now_seconds() - t0;
      turn.store(++t, std::memory_order_release);  // the peer writes every line
      wait_for(++t);
      t0 = now_seconds();
      sink.store(read_all(buf), std::memory_order_relaxed);
      const double after_write = now_seconds() - t0;
      if (r > 0) war.push_back(after_read - own_w), raw.push_back(after_write - own_r);
    }
    turn.store(-1, std::memory_order_release);
  });
  while (timer_cpu.load(std::memory_order_acquire) == -2) std::this_thread::yield();
  const int first = timer_cpu.load();
  std::thread peer([&] {
    if (first < 0) return;
    if (pin_to_a_cpu(first) < 0) peer_ok.store(false);
    int t = 1000;
    turn.store(t, std::memory_order_release);
    if (!peer_ok.load()) return;
    for (;;) {
      int now_turn;
      while ((now_turn = turn.load(std::memory_order_acquire)) == t) std::this_thread::yield();
      if (now_turn < 0) return;
      t = now_turn;
      if ((t - 1000) % 4 == 1) sink.store(read_all(buf), std::memory_order_relaxed);
      else rewrite(buf);
      turn.store(++t, std::memory_order_release);
    }
  });
  timer.join();
  peer.join();
  if (war.empty()) return out;
  out.measured = true;
  out.write_after_read_s_per_byte = std::max(0.0, median(war)) / static_cast<double>(bytes);
  out.read_after_write_s_per_byte = std::max(0.0, median(raw)) / static_cast<double>(bytes);
  return out;
}

}  // namespace dtrain::plan

#include "plan/calibrate_cache.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "base/clock.h"
#include "coll/config.h"

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
void overwrite(std::vector<float>& v) { std::memset(v.data(), 0, v.size() * sizeof(float)); }
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

constexpr int kPingTrips = 32;

// Writes the CPU time the calling thread takes over this object's life into *to.
struct ChargeThreadCpu {
  double* to;
  double t0 = thread_cpu_seconds();
  ~ChargeThreadCpu() { *to = thread_cpu_seconds() - t0; }
};

}  // namespace

double ping_pong(std::atomic<uint64_t>& line, uint64_t& count, int me, int trips) {
  constexpr int kBatch = 8;
  // A wait of this many reads (a few microseconds; a trip takes 0.1-0.4 us) means the partner
  // is not running: on a loaded host (the launcher samples the cores while its ranks run) the
  // waiting side then yields its CPU rather than spin through the partner's wait for a time
  // slice. That batch reads long either way; the median of the batches drops it.
  constexpr unsigned kSpinsBeforeYield = 4096;
  auto wait_for = [&line](uint64_t value) {
    for (unsigned spins = 0; line.load(std::memory_order_acquire) != value;)
      if (++spins % kSpinsBeforeYield == 0) std::this_thread::yield();
  };
  std::vector<double> per_trip;
  for (int b = 0; b < trips / kBatch; ++b) {
    const double t0 = me == 0 ? now_seconds() : 0;
    for (int i = 0; i < kBatch; ++i, count += 2) {
      if (me == 0) {
        line.store(count + 1, std::memory_order_release);
        wait_for(count + 2);
      } else {
        wait_for(count + 1);
        line.store(count + 2, std::memory_order_release);
      }
    }
    if (me == 0) per_trip.push_back((now_seconds() - t0) / kBatch * 1e9);
  }
  return per_trip.empty() ? 0 : median(per_trip);
}

const char* core_distance(double round_trip_ns) { return round_trip_ns < kCloseRoundTripNs ? "close" : "far"; }

double probe_core_round_trip_ns(double seconds, double* cpu_seconds) {
  double cpu[2] = {0, 0};  // each thread's own CPU time
  alignas(64) std::atomic<uint64_t> line{0};
  std::atomic<int> first_cpu{-2}, rounds{-1};  // rounds: -1 until the second thread has pinned (0: it could not)
  std::vector<double> trips;
  std::thread a([&] {
    const ChargeThreadCpu charge{&cpu[0]};
    const int pinned = pin_to_a_cpu(-1);
    first_cpu.store(pinned, std::memory_order_release);
    if (pinned < 0) return;
    while (rounds.load(std::memory_order_acquire) == -1) std::this_thread::yield();
    uint64_t count = 0;
    for (int r = 0; r < rounds.load(); ++r) trips.push_back(ping_pong(line, count, 0, kPingTrips));
  });
  std::thread b([&] {
    const ChargeThreadCpu charge{&cpu[1]};
    while (first_cpu.load(std::memory_order_acquire) == -2) std::this_thread::yield();
    const int first = first_cpu.load();
    // Both sides must agree on the number of rounds before spinning: `seconds` over ~20 us a
    // round (a far round trip is ~0.4 us: a round's 32 of them ~13 us).
    if (first < 0 || pin_to_a_cpu(first) < 0) {
      rounds.store(0, std::memory_order_release);
      return;
    }
    rounds.store(std::clamp(static_cast<int>(seconds / 20e-6), 1, 100000), std::memory_order_release);
    uint64_t count = 0;
    for (int r = 0; r < rounds.load(); ++r) ping_pong(line, count, 1, kPingTrips);
  });
  a.join();
  b.join();
  if (cpu_seconds) *cpu_seconds = cpu[0] + cpu[1];
  // The fastest round, not the median: a round can only read slower than the cores' distance
  // (its threads preempted, as by ranks that outnumber the cores), never faster.
  return trips.empty() ? 0 : *std::min_element(trips.begin(), trips.end());
}

// The two threads hand the buffer back and forth through `turn`: the timer (on one CPU)
// passes it to the peer with an odd value, the peer hands it back with the next even one.
// Between hand-offs only one thread touches the buffer, so each timed pass sees exactly the
// cache state the step before left: its own lines, or lines the peer just read or wrote.
// Each round asks four things of the peer in turn: the round trip (both spin on `line`),
// a read of every line, a rewrite of every line, a read of every line again.
CacheHandoff measure_handoff(int64_t bytes, int rounds, double spread_s) {
  CacheHandoff out;
  out.bytes = bytes;
  std::vector<float> buf(static_cast<size_t>(std::max<int64_t>(bytes, 64) / 64 * 16), 1.0f);
  std::atomic<int> turn{0}, timer_cpu{-2};
  std::atomic<bool> peer_ok{true};
  std::atomic<float> sink{0};
  alignas(64) std::atomic<uint64_t> line{0};
  struct Round {
    double war, raw, sar, round_trip_ns;
  };
  std::vector<Round> kept;
  auto wait_for = [&](int t) {
    while (turn.load(std::memory_order_acquire) != t) std::this_thread::yield();
  };
  const double pause = rounds > 0 ? std::max(0.0, spread_s) / rounds : 0;
  std::thread timer([&] {
    const int cpu = pin_to_a_cpu(-1);
    timer_cpu.store(cpu, std::memory_order_release);
    if (cpu < 0) return;
    wait_for(1000);  // the peer is pinned (or gave up)
    if (!peer_ok.load()) return;
    int t = 1000;
    uint64_t count = 0;
    for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms both caches and is not kept
      turn.store(++t, std::memory_order_release);  // the round trip
      const double rt = ping_pong(line, count, 0, kPingTrips);
      wait_for(++t);
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
      overwrite(buf);
      t0 = now_seconds();
      overwrite(buf);
      const double own_s = now_seconds() - t0;
      turn.store(++t, std::memory_order_release);  // the peer reads every line again
      wait_for(++t);
      t0 = now_seconds();
      overwrite(buf);
      const double store_after_read = now_seconds() - t0;
      if (r > 0) kept.push_back({after_read - own_w, after_write - own_r, store_after_read - own_s, rt});
      if (pause > 0) std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    }
    turn.store(-1, std::memory_order_release);
  });
  while (timer_cpu.load(std::memory_order_acquire) == -2) std::this_thread::yield();
  const int first = timer_cpu.load();
  std::thread peer([&] {
    if (first < 0) return;
    if (pin_to_a_cpu(first) < 0) peer_ok.store(false);
    int t = 1000;
    uint64_t count = 0;
    turn.store(t, std::memory_order_release);
    if (!peer_ok.load()) return;
    for (;;) {
      int now_turn;
      while ((now_turn = turn.load(std::memory_order_acquire)) == t) std::this_thread::yield();
      if (now_turn < 0) return;
      t = now_turn;
      switch ((t - 1001) / 2 % 4) {
        case 0: ping_pong(line, count, 1, kPingTrips); break;
        case 2: rewrite(buf); break;
        default: sink.store(read_all(buf), std::memory_order_relaxed);
      }
      turn.store(++t, std::memory_order_release);
    }
  });
  timer.join();
  peer.join();
  if (kept.empty()) return out;
  out.measured = true;
  const double b = static_cast<double>(bytes);
  auto rates = [&](const char* verdict) {
    std::vector<double> war, raw, sar;
    for (const Round& r : kept)
      if (!verdict || core_distance(r.round_trip_ns) == std::string(verdict))
        war.push_back(r.war), raw.push_back(r.raw), sar.push_back(r.sar);
    HandoffRates h;
    h.rounds = static_cast<int>(war.size());
    if (h.rounds > 0) {
      h.write_after_read_s_per_byte = std::max(0.0, median(war)) / b;
      h.read_after_write_s_per_byte = std::max(0.0, median(raw)) / b;
      h.store_after_read_s_per_byte = std::max(0.0, median(sar)) / b;
    }
    return h;
  };
  const HandoffRates all = rates(nullptr);
  out.write_after_read_s_per_byte = all.write_after_read_s_per_byte;
  out.read_after_write_s_per_byte = all.read_after_write_s_per_byte;
  out.store_after_read_s_per_byte = all.store_after_read_s_per_byte;
  for (const char* v : {"close", "far"})
    if (const HandoffRates h = rates(v); h.rounds > 0) out.by_cores[v] = h;
  return out;
}

}  // namespace dtrain::plan

// Cross-core cache hand-off: what one core pays, per byte, to use lines another core touched
// last. ddp on one node leaves exactly that behind every step (parallel/data_parallel.h):
// the owners of the other shards read this rank's gradient in place, so the next backward
// must take those lines back before it writes them; and with the fused ZeRO each owner writes
// its shard of the node's shared parameters, so the next forward fetches those lines from the
// owner's cache. How much that costs depends on how far apart the cores are: on a 2-vCPU VM
// whose vCPUs sit far apart ddp's passes ran ~0.50 ms where localsgd's identical passes ran
// ~0.38; on a 16-vCPU VM they ran the same. The simulator charges it from this measurement
// (falling back to the 2-rank exchange's rate per byte for files without it).
//
// measure_handoff(bytes, rounds, spread_s): two threads on two different CPUs (the first two
// this process may use; none else running) take turns over one buffer of `bytes`:
//   write_after_read: the timing thread rewrites (read-modify-write, as a gradient
//     accumulates) lines the other thread has just read, less the same pass over lines it
//     already holds;
//   read_after_write: the timing thread reads lines the other thread has just written, less
//     the same read over lines it holds;
//   store_after_read: the timing thread overwrites whole lines (memset, as a ps worker zeroes
//     its gradient slot before backward accumulates into it, and as a server copies its
//     slice into its slot) that the other thread has just read, less the same pass over
//     lines it holds. On the EPYC VM (2026-12-01, cores far) that read 0.02 ns/B where the
//     rewrite read 0.34-0.48: a store that takes a whole line needs no copy of it, only the
//     other core's invalidated, and sync ps, which writes only so, took no more a step with
//     the cores far than the model priced without any hand-off.
// Each is the median over `rounds` of (pass after the peer - pass alone) / bytes, at least 0.
// The rounds are spread over about spread_s seconds (0: back to back).
//
// Near or far. On a VM the two vCPUs can sit on cores that share a cache or on cores that do
// not, and the hypervisor moves them within seconds: on the 2-vCPU EPYC VM (2026-11-30) a
// rewrite after the peer's read cost 0.02 ns/B while a cache line's round trip took 60 ns,
// and 0.35-0.45 ns/B while it took 340-390 ns. So before each round the two threads time a
// line's round trip (ping_pong) and the round is filed under ShmContext's verdict for that
// time (coll/config.h kCloseRoundTripNs): by_cores["close"] and ["far"] hold the medians of
// the rounds each verdict saw, and a 2-rank run that knows its own verdict is priced with
// its own (plan::with_core_distance). The plain fields are the median over every round.
// On a machine with one CPU (or where no two CPUs can be had) everything is 0 and `measured`
// is false. Thread-safety: starts and joins its own threads; call from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace dtrain::plan {

struct HandoffRates {
  double write_after_read_s_per_byte = 0;
  double read_after_write_s_per_byte = 0;
  double store_after_read_s_per_byte = 0;
  int rounds = 0;
};

struct CacheHandoff {
  bool measured = false;
  double write_after_read_s_per_byte = 0;
  double read_after_write_s_per_byte = 0;
  double store_after_read_s_per_byte = 0;
  int64_t bytes = 0;
  std::map<std::string, HandoffRates> by_cores;  // "close", "far": only the verdicts seen
};

CacheHandoff measure_handoff(int64_t bytes = int64_t{1} << 20, int rounds = 101, double spread_s = 2.0);

// Pins the calling thread to the lowest CPU other than `skip` (-1: none) that it may run on
// and returns it; -1 when there is none. (The calibration may run inside a rank the launcher
// bound to one core: the kernel lets a thread widen that within the process's cgroup.)
int pin_to_a_cpu(int skip);

// One cache line's round trip between two threads, as ShmContext's probe times it: both
// threads call this at once with the same `trips` (a multiple of 8) and each its own
// `count` (0 at first, kept between calls); thread 0 (me == 0) writes an odd value and
// spins until thread 1 answers with the next. Thread 0 returns the median over batches of 8
// of nanoseconds per round trip, thread 1 returns 0. Both spin: pin them to two CPUs first.
double ping_pong(std::atomic<uint64_t>& line, uint64_t& count, int me, int trips);

// "close" or "far": ShmContext's verdict for a round trip of `round_trip_ns`.
const char* core_distance(double round_trip_ns);

// The cores' distance right now: two threads pinned to the first two CPUs this process may use
// time a cache line's round trip (ping_pong) for about `seconds`, in rounds of 32 trips (each
// the median of its batches); the fastest round, in ns: a preempted round only reads slower,
// and the launcher's sampler probes while ranks that outnumber the cores run (the median of the
// rounds read "far" for 8-20% of the samples of 4- and 8-rank runs whose steps ran at the close
// speed, 2026-11-30). 0 where two CPUs cannot be had. `dtrain train --probe-speed` records it
// beside a run, so that a run of any rank count is priced with the figures of its verdict.
// *cpu_seconds (if given): the CPU time the two threads took, which under ranks that
// outnumber the cores is far more than `seconds` (cli/cores_sampler.h).
double probe_core_round_trip_ns(double seconds, double* cpu_seconds = nullptr);

}  // namespace dtrain::plan

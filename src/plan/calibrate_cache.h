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
// measure_handoff(bytes, rounds): two threads on two different CPUs (the first two this
// process may use; none else running) take turns over one buffer of `bytes`:
//   write_after_read: the timing thread rewrites (read-modify-write, as a gradient
//     accumulates) lines the other thread has just read, less the same pass over lines it
//     already holds;
//   read_after_write: the timing thread reads lines the other thread has just written, less
//     the same read over lines it holds.
// Each is the median over `rounds` of (pass after the peer - pass alone) / bytes, at least 0.
// On a machine with one CPU (or where no two CPUs can be had) both are 0 and `measured` is
// false. Thread-safety: starts and joins its own threads; call from one thread.
#pragma once

#include <cstdint>

namespace dtrain::plan {

struct CacheHandoff {
  bool measured = false;
  double write_after_read_s_per_byte = 0;
  double read_after_write_s_per_byte = 0;
  int64_t bytes = 0;
};

CacheHandoff measure_handoff(int64_t bytes = int64_t{1} << 20, int rounds = 101);

// Pins the calling thread to the lowest CPU other than `skip` (-1: none) that it may run on
// and returns it; -1 when there is none. (The calibration may run inside a rank the launcher
// bound to one core: the kernel lets a thread widen that within the process's cgroup.)
int pin_to_a_cpu(int skip);

}  // namespace dtrain::plan

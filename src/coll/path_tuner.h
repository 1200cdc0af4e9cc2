// coll/path_tuner.h — which of the two ways a shared-memory collective can move its data (the
// context's slots, or cross-memory reads of the peers' buffers) each call takes, chosen by
// timing both as the calls go: two ranks with a core each, under each verdict of their
// cores' distance, and ranks beyond the cores under one (ShmContext::count_decision).
//
// Why: which path is faster depends on the host, not only on the distance between the two
// cores that ShmContext's round-trip probe measures. On the Xeon VM and an earlier EPYC VM,
// close cores made the slots 1.3-1.9x faster from 256 KiB (coll/shm_direct.cc). On the EPYC
// VM of 2026-11-30 (Zen 4, L3 32 MiB shared by both vCPUs) the probe read close cores
// (0.10-0.11 us a round trip) and the reads still won at most sizes: all-reduce 4 MiB 15-16
// against the slots' 7 GB/s busbw, broadcast 256 KiB 21 against 9, reduce-scatter 4 MiB 12.5
// against 7.5; the slots won only the 1 MiB all-gather (12.7 against 9.5).
//
// How (a bandit with a stale-estimate rule, on rank 0 only):
// - Calls are grouped into entries: op (all-reduce, all-gather, reduce-scatter, broadcast) x
//   size class (a factor of 4 per class: up to 64 KiB, 256 KiB, ... 256 MiB, beyond), and
//   each entry is kept apart per probe verdict (close, far), since the VM flips between
//   them within seconds and each has its own winner.
// - Rank 0 times every call it makes and adds it to the entry's path, except the first call
//   below 16 MiB after the entry switched to that path (it pays for cold pages and caches:
//   the first tries of the reads read up to 2x slower than the next calls). At each re-probe
//   (decide), a path's calls since its last estimate are folded into that estimate (time per
//   byte; the new figure weighs half, and replaces an estimate kExploreEvery probes old, which
//   may come from another of the VM's modes) once there are kMinCalls of them or kMinBytes.
// - The choice for the calls until the next probe, per entry of the new verdict: the path
//   with the lower estimate. An entry with no estimate is undecided: the fixed rule
//   (shm_direct_takes_slots) holds.
// - The entry tries the other path while that has no estimate or a kExploreEvery-probe-old
//   one, if the entry had calls in the last kExploreEvery probe intervals (trying a path no
//   call uses would time nothing), and only after kExploreEvery tries' worth of calls on its
//   choice (kExploreEvery x kMinCalls calls, or x kMinBytes), so trying costs at most about
//   one call in kExploreEvery. A try lasts until the tried path has been timed.
// - A path tried, or taken over from the other, is on trial: the next probe comes after
//   about kMinCalls + 1 such calls (at most kMinBytes and one call), so a try, or a switch
//   made on a few noisy calls, costs a few calls rather than a whole interval (100 ms: in a
//   sitting's 0.2 s benchmark rows such switches had run whole rows on the slower path).
// - The choice travels in one 64-bit mask that rank 0 publishes with the probe's verdict,
//   so both ranks take the same path from the same call on (ShmContext::probe_peers); ranks
//   beyond the cores take rank 0's mask from the call after next (ShmContext::count_decision).
//
// Contract: the choice is only a choice between two exact paths; both reduce in rank order
// (reduce_ordered), so results are bit-identical whichever path a call takes. A machine
// whose winner holds pays a try's few calls on the slower path in every kExploreEvery
// tries' worth.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll/types.h"

namespace dtrain {

class PathTuner {
 public:
  static constexpr int kOps = 4;
  static constexpr int kSizeClasses = 8;
  static constexpr int kEntries = kOps * kSizeClasses;  // 32: one mask's low half
  static constexpr int64_t kMinCalls = 4;
  static constexpr uint64_t kMinBytes = uint64_t{64} << 20;       // ... or fewer calls of this many bytes
  static constexpr uint64_t kWarmBelowBytes = uint64_t{16} << 20;  // a first call this large is timed
  static constexpr int64_t kExploreEvery = 16;

  // The entry of a call of `bytes` of op, or -1 for ops it does not choose for.
  static int entry(CollOp op, size_t bytes);
  // Whether mask decides entry e, and then whether e takes the slots.
  static bool decided(uint64_t mask, int e) { return (mask >> e) & 1; }
  static bool takes_slots(uint64_t mask, int e) { return (mask >> (kEntries + e)) & 1; }

  // A call of entry e took ns on path `slots` under verdict `far`.
  void record(bool far, int e, bool slots, int64_t ns, size_t bytes);
  // At a probe: folds the calls since the last estimates, then returns the choice for the
  // calls until the next probe under verdict `far` (bit e: decided; bit kEntries + e: slots).
  // *explore_bytes: where an entry in use changes its path (tries one, or takes the other
  // over), the bytes after which the next probe can judge the new one (kMinCalls + 1 calls of
  // the class's largest size, at most kMinBytes and one call more), else 0.
  uint64_t decide(bool far, uint64_t* explore_bytes);
  // Whether entry e under verdict `far` is still learning its paths: it has had calls, and a
  // path has no estimate yet or is being tried. (`bench collectives` times its rows after
  // this turns false, as a long training run would run them.)
  bool exploring(bool far, int e) const;
  // The estimate of path `slots` for entry e under verdict `far`, in ns per byte (-1: none).
  double estimate(bool far, int e, bool slots) const { return table_[far][e].path[slots].estimate; }

 private:
  struct Path {
    double estimate = -1;   // ns per byte
    int64_t estimated_at = -1;  // the decide() that last folded calls into it
    double ns = 0, bytes = 0;   // calls not folded yet
    int64_t calls = 0;
    bool warm = false;  // false until a call came since the path was last left (that call is not timed)
  };
  struct Entry {
    Path path[2];  // [0] reads, [1] slots
    int64_t used_at = -1;  // the decide() count when a call last came
    int current = -1;      // the path the last decide() gave (-1: none, the fixed rule)
    int trying = -1;       // the path being tried until it is timed (-1: none)
    int64_t calls_since_try = 0;  // calls (and their bytes) since the last try of a path
    double bytes_since_try = 0;
  };
  Entry table_[2][kEntries];  // [far][entry]
  int64_t decisions_ = 0;
};

}  // namespace dtrain

// coll/config.h — the collectives' job-wide configuration, carried by each Communicator.
//
// Contract
// - CollConfig holds what used to be read from the environment on the collectives' paths:
//   the segment size, whether calls exchange fingerprints, the shared-memory context switch
//   and its yield budget, the cost-model calibration file, the forced algorithms and the host
//   identity of the hierarchical all-reduce. A default-constructed one is an unset environment.
// - coll_config_from(settings) fills one from a settings snapshot (DTRAIN_SEGMENT_BYTES,
//   DTRAIN_COLL_CHECK, DTRAIN_SHM_CONTEXT, DTRAIN_SHM_YIELD_US, DTRAIN_SHM_SLOT_BYTES, DTRAIN_SHM_SLOTS_BYTES,
//   DTRAIN_SHM_CORES, DTRAIN_SHM_REPROBE_MS, DTRAIN_SHM_TIMED_PATHS, DTRAIN_CALIBRATION,
//   DTRAIN_ALGO, DTRAIN_<OP>_ALGO, DTRAIN_HOST_ID); Communicator::from_env passes it in, and
//   split() hands the parent's to its children. A malformed value is an InvalidArgument naming
//   the variable.
// - forced_algorithm(op) is DTRAIN_<OP>_ALGO, else DTRAIN_ALGO (job_wide: applies only where the
//   op has that algorithm), else empty.
// Thread-safety: a plain value.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <string>

#include "base/settings.h"
#include "coll/types.h"

namespace dtrain {

struct ForcedAlgorithm {
  std::string name;       // "" = none
  bool job_wide = false;  // from DTRAIN_ALGO
};

// With a core per rank and the cores far apart, an all-reduce never takes the shared-memory
// slots (the cross-memory path at every size: coll/shm_direct.cc has the measurements; the
// threshold was 8 MiB until the far mode measured the slots 1.4-1.7x slower at 8-32 MiB
// too). The planner prices the paths' memory as for cores far apart (plan/simulator.cc).
inline constexpr size_t kSlotsAllreduceFarMinBytes = std::numeric_limits<size_t>::max();
// ... and from this size where two ranks measured each other close (ShmContext's probe: a
// cache line's round trip under kCloseRoundTripNs): there the slots were 1.3-1.9x faster
// from 256 KiB on.
inline constexpr size_t kSlotsAllreduceCloseMinBytes = size_t{256} << 10;
inline constexpr int64_t kCloseRoundTripNs = 250;  // measured: 0.06-0.21 us close, 0.53 us far
// DTRAIN_SHM_SLOTS_BYTES's default: the slots carry calls of every size (coll/shm_slots.cc).
inline constexpr size_t kDefaultShmSlotsBytes = size_t{64} << 30;
// An in-place reduction over a transport (coll/call.cc flow) receives into a window of
// scratch segments of up to this many bytes, posted ahead so the sender's segments land there
// rather than in the transport's early buffers. The windows come from a per-communicator
// BufferPool that keeps up to two warm; the planner prices one (a ring's chunk) per rank.
inline constexpr size_t kReduceWindowBytes = size_t{64} << 20;

// How close two ranks' cores are, for the choice between the slots and cross-memory reads
// (ShmContext): measured when the context is built and again every ~DTRAIN_SHM_REPROBE_MS of
// calls (kProbe), or stated (DTRAIN_SHM_CORES).
enum class CoreDistance { kProbe, kClose, kFar };

struct CollConfig {
  size_t segment_bytes = size_t{1} << 20;
  bool check = true;
  bool shm_context = true;  // DTRAIN_SHM_CONTEXT
  double shm_yield_us = 100;
  size_t shm_slot_bytes = size_t{256} << 10;  // DTRAIN_SHM_SLOT_BYTES: the context's slot size
  size_t shm_slots_bytes = kDefaultShmSlotsBytes;  // DTRAIN_SHM_SLOTS_BYTES
  CoreDistance shm_cores = CoreDistance::kProbe;    // DTRAIN_SHM_CORES
  int64_t shm_reprobe_ms = 100;                     // DTRAIN_SHM_REPROBE_MS (0: probe once)
  bool shm_timed_paths = true;                      // DTRAIN_SHM_TIMED_PATHS (coll/path_tuner.h)
  std::string calibration_path;  // "" = the built-in cost parameters
  std::string host_id;           // "" = the host name
  std::array<ForcedAlgorithm, static_cast<size_t>(CollOp::kBarrier) + 1> forced{};

  const ForcedAlgorithm& forced_algorithm(CollOp op) const { return forced[static_cast<size_t>(op)]; }
};

// The configuration the settings describe (see the contract above).
CollConfig coll_config_from(const Settings& settings);
// "DTRAIN_ALLREDUCE_ALGO" for kAllreduce, ...
std::string algorithm_setting_name(CollOp op);

}  // namespace dtrain

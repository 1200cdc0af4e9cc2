// tests/support/world.h — an in-process world: N ranks as threads over a MemoryStore and a
// real transport (shm or tcp).
//
// run_world(n, kind, fn) builds one Communicator per thread (collectively), calls fn(comm)
// on each, and re-throws the first exception after every thread has finished. A rank that
// throws destroys its communicator, which closes its transport, so its peers fail with
// PeerFailure instead of hanging. Timeouts default to 30 s so a broken test ends. With
// fault_rank >= 0 that rank's transport runs on a FaultyFabric injecting `fault`.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "coll/communicator.h"
#include "support/faulty_fabric.h"

namespace dtrain::testing {

struct WorldOptions {
  TransportKind kind = TransportKind::kShm;
  double timeout_s = 30;
  size_t shm_ring_bytes = 1 << 20;
  std::string tcp_congestion = "auto";  // FabricOptions::tcp_congestion (DTRAIN_TCP_CONGESTION)
  CollConfig coll;       // the collectives' configuration (what DTRAIN_ALGO etc. set in a job)
  int ranks_on_host = 0;  // TransportOptions::ranks_on_host (what LOCAL_WORLD_SIZE sets in a job)
  int fault_rank = -1;   // this rank's fabric gets `fault` (support/faulty_fabric.h)
  // The host each rank says it is on (CollConfig::host_id, what DTRAIN_HOST_ID sets), or none.
  std::function<std::string(int rank)> host_of;
  Fault fault;
};

void run_world(int n, const WorldOptions& opts, const std::function<void(Communicator&)>& fn);
inline void run_world(int n, TransportKind kind, const std::function<void(Communicator&)>& fn) {
  WorldOptions o;
  o.kind = kind;
  run_world(n, o, fn);
}

// Deterministic bytes for message checks: byte i of the message from `from` to `to` with `tag`.
inline unsigned char pattern_byte(int from, int to, uint64_t tag, size_t i) {
  uint64_t x = (static_cast<uint64_t>(from) * 1315423911u) ^ (static_cast<uint64_t>(to) * 2654435761u) ^ (tag * 97) ^ i;
  x ^= x >> 13;
  x *= 0x9E3779B97F4A7C15ull;
  return static_cast<unsigned char>(x >> 56);
}

}  // namespace dtrain::testing

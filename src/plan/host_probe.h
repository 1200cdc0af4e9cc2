// plan/host_probe.h — how far apart the host's first two CPUs are, measured by two threads.
//
// On a VM whose vCPUs move between sharing a cache ("close") and not ("far"), the shared-memory
// collectives change speed by 2-3x with the distance, with any number of ranks: the 4-rank
// all-reduce on 2 vCPUs took 0.31-0.37 ms for 1 MiB when a 2-rank probe just before read close
// and 0.69-0.94 ms when it read far (2026-11-28). ShmContext probes only two ranks with a core
// each; ranks that outnumber the cores would disturb any probe of their own, so the launcher of
// `dtrain bench collectives` probes before it starts them, and the calibration and the
// predictions split by the verdict (plan/cluster.h by_cores_by_ranks).
//
// Contract: host_round_trip_ns() pins two threads to the first two CPUs this process may run
// on and bounces a counter between them (ShmContext::probe_peers' bounce: 32 rounds of warm-up,
// then 256 timed) and returns the mean round trip in nanoseconds; -1 where fewer than two
// CPUs are allowed or pinning is refused. host_cores_far(ns) is the verdict at
// coll's kCloseRoundTripNs. ~0.1 ms; call it while nothing else runs on those CPUs.
#pragma once

#include <cstdint>

namespace dtrain::plan {

int64_t host_round_trip_ns();
bool host_cores_far(int64_t round_trip_ns);

}  // namespace dtrain::plan

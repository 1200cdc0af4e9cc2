// plan/calibrate_mix.h — time gossip's mix as two ranks on one host run it.
//
// Why. Gossip on one host trains each rank's model in a slot of a shared-memory window and
// then averages it with its neighbours' slots where they lie, into its other slot
// (parallel/gossip.h). The simulator priced that mix at the element-wise rate, which the
// calibration takes over 16 MiB arrays streamed through memory. A model of a few MB is not
// streamed through memory: its slots stay in the caches, and the neighbour's slot comes from
// the other core's. Five validations on the 2-vCPU Xeon (dv-p3, dv-x1, dv-s2, dv-s3, dv-s5)
// put gossip's cost beyond localsgd's (the same compute) at 1.4-2.7x its measure at 4 and 8
// ranks, every time; a two-thread copy of the mix of the validation's 0.94 MB model ran at
// 22-27 GB/s in the element-wise measure where the calibration's element-wise rate was 12.2.
//
// What. measure_mix(model_bytes, seconds): for each size, two threads pinned to two CPUs
// (pin_to_a_cpu), each owning two slots of that size in shared anonymous memory (as the
// window's), run gossip's step in lock-step: rewrite the current slot (the optimizer's
// step), meet, then both mix at once with the executor's own loop (gossip_average: the two
// current slots in rank order, into the other slot), meet again. The median mix over both
// threads and about seconds / sizes of rounds (two warm-up rounds dropped) gives the rate in
// the simulator's measure of a mix through the window: deg + 3 = 4 models of bytes (two
// read, the output's lines allocated and written) per mix. Returns (model bytes, bytes/s)
// points, sizes increasing; empty where two CPUs cannot be had. Before each round the two
// threads time a cache line's round trip (plan::ping_pong), and by_cores holds the same
// points from only the rounds ShmContext would call "close" or "far" (a verdict some size
// never saw is left out): the neighbour's slot comes from the other core's cache, which
// costs what the cores' distance makes it (plan/calibrate_cache.h).
// shared / shared_by_cores: the same rounds with the mix a complete graph runs (every graph
// at 2 ranks, gossip.cc mix_window): each thread averages half of the elements into its next
// slot and copies them into the other's, in gossip's 32 KiB pieces. Timed apart because it
// crosses cores differently: at 2 ranks on the EPYC VM the runs whose cores probed far took
// 0.03-0.04 ms a step longer than the close ones, where the whole mix's far rate priced
// 0.17 ms more (validations dv-g1 to dv-h1, 2026-11-30). Each size and kind gets seconds /
// (2 x sizes).
// Thread-safety: starts and joins its own threads; call from one thread with nothing else
// running (a calibration).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::plan {

// The sizes bench calibrate times: 256 KiB, 1, 4 and 16 MiB models (in the caches of one
// core, of the host, and past them on the VMs this was built on).
std::vector<int64_t> mix_calibration_sizes();

struct MixRates {
  std::vector<std::pair<double, double>> all;
  std::map<std::string, std::vector<std::pair<double, double>>> by_cores;
  // The complete graph's shared mix (below), in the same measure: half of the 4 models per
  // thread, so the simulator's mix_share x 4 models over this rate is one thread's time.
  std::vector<std::pair<double, double>> shared;
  std::map<std::string, std::vector<std::pair<double, double>>> shared_by_cores;
};
MixRates measure_mix(const std::vector<int64_t>& model_bytes, double seconds);

}  // namespace dtrain::plan

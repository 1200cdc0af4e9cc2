// cli/bench.h — the benchmarks behind `dtrain bench NAME`.
// Each takes the arguments after its name and returns the exit code. They print
// nccl-tests-style tables on rank 0 and, with --json FILE, machine-readable rows.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/commands.h"

namespace dtrain::cli {

int bench_p2p(const Args& args);          // latency and bandwidth per transport (bench_p2p.cc)
int bench_collectives(const Args& args);  // every collective x algorithm (bench_collectives.cc)
int bench_calibrate(const Args& args);    // alpha-beta-gamma calibration (bench_calibrate.cc)
int bench_tp_blocks(const Args& args);    // tensor-parallel blocks across the ranks (bench_tp_blocks.cc)
int bench_cores(const Args& args);        // the cores' distance, sampled (bench_cores.cc)

// `bench calibrate`'s tensor-parallel rows, timed in several rounds: one row per (spec, tp,
// ranks, items), in the order first seen, its fwd_s and bwd_s the median of its rounds (the
// mean of the middle two for an even count). Other fields are the first round's.
nlohmann::json median_tp_rows(const nlohmann::json& rows);

}  // namespace dtrain::cli

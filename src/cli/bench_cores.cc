// `dtrain bench cores`: how far apart two of this machine's cores are, now and over a while.
//
// Why. On a VM the hypervisor may place the vCPUs on cores that share a cache or on cores
// that do not, and move them within seconds to minutes. Everything that crosses cores changes
// with it: on the 2-vCPU EPYC VM (2026-11-30) a cache line's round trip read ~60 ns or ~360 ns,
// the 4-rank 1 MiB all-reduce took 230-300 us or 840-880 us, and rewriting lines the other
// core had read cost 0.02 or 0.4 ns a byte. A run that is suddenly twice as slow may be this,
// and this command says whether it is (dtrain train records the same probe for every run:
// "cores_probed").
//
// What. Every --every-ms for --seconds, two threads pinned to the first two CPUs this process
// may use time a cache line's round trip for 2 ms (plan::probe_core_round_trip_ns, the measure
// the shared-memory context's probe uses); each sample is "close" or "far" by the context's
// threshold (coll/config.h kCloseRoundTripNs). Prints the samples' median, range and the
// share of each verdict; --json FILE writes every sample. On one CPU it says so and exits 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "cli/bench.h"
#include "cli/flags.h"
#include "coll/config.h"
#include "plan/calibrate_cache.h"

namespace dtrain::cli {

int bench_cores(const Args& args) {
  Flags f("bench cores", args);
  const double seconds = f.get_double("seconds", 1.0, 0.0, 3600.0, "how long to sample (0: one sample)");
  const double every_ms = f.get_double("every-ms", 100.0, 1.0, 60000.0, "time between samples, ms");
  const std::string json = f.get_string("json", "", "write every sample as JSON to FILE");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("[--seconds 10] [--every-ms 100] [--json FILE]").c_str());
    return 0;
  }
  f.finish();
  std::vector<std::pair<double, double>> samples;  // (seconds since start, ns)
  const double start = now_seconds();
  for (;;) {
    const double t = now_seconds() - start;
    const double ns = plan::probe_core_round_trip_ns(0.002);
    if (ns <= 0) {
      std::printf("cores: fewer than two CPUs for this process; nothing to measure\n");
      return 0;
    }
    samples.push_back({t, ns});
    if (t + every_ms * 1e-3 > seconds) break;
    std::this_thread::sleep_until(std::chrono::steady_clock::now() +
                                  std::chrono::duration<double>(start + t + every_ms * 1e-3 - now_seconds()));
  }
  std::vector<double> ns;
  int far = 0;
  for (const auto& [t, v] : samples) ns.push_back(v), far += std::string(plan::core_distance(v)) == "far" ? 1 : 0;
  std::sort(ns.begin(), ns.end());
  const double median = ns[ns.size() / 2];
  std::printf("cores: a cache line's round trip %.0f ns (median of %zu samples over %.1f s, %.0f-%.0f ns): %s; "
              "%d close, %d far (far: >= %lld ns, where the 2-rank collectives and the planner take the far figures)\n",
              median, ns.size(), samples.back().first, ns.front(), ns.back(), plan::core_distance(median),
              static_cast<int>(ns.size()) - far, far, static_cast<long long>(kCloseRoundTripNs));
  if (!json.empty()) {
    nlohmann::json out = {{"median_ns", median}, {"verdict", plan::core_distance(median)}, {"far", far},
                          {"close", static_cast<int>(ns.size()) - far}, {"samples", nlohmann::json::array()}};
    for (const auto& [t, v] : samples) out["samples"].push_back({{"t_s", t}, {"ns", v}, {"verdict", plan::core_distance(v)}});
    std::ofstream o(json);
    DT_CHECK(o.good(), IoError, "cannot write --json file " << json);
    o << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace dtrain::cli

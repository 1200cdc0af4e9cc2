#include <cstdio>
#include <map>

#include "base/error.h"
#include "cli/bench.h"
#include "cli/commands.h"

namespace dtrain::cli {

int bench_main(const Args& args) {
  static const std::map<std::string, std::pair<int (*)(const Args&), const char*>> table = {
      {"p2p", {bench_p2p, "point-to-point latency and bandwidth per transport"}},
      {"collectives", {bench_collectives, "collectives with nccl-tests columns (--op, --algo, --sizes)"}},
      {"calibrate", {bench_calibrate, "measure alpha, beta, gamma for the cost model"}},
      {"tp-blocks", {bench_tp_blocks, "tensor-parallel GPT blocks timed across the ranks (-n = degree)"}},
      {"cores", {bench_cores, "how far apart two cores are now (a cache line's round trip), sampled over a while"}},
  };
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fprintf(stderr, "usage: dtrain bench <name> [options]\n\nbenchmarks:\n");
    for (const auto& [name, e] : table) std::fprintf(stderr, "  %-12s %s\n", name.c_str(), e.second);
    return args.empty() ? 2 : 0;
  }
  auto it = table.find(args[0]);
  DT_CHECK(it != table.end(), InvalidArgument,
           "unknown benchmark '" << args[0] << "' (use p2p, collectives, calibrate, tp-blocks or cores)");
  return it->second.first(Args(args.begin() + 1, args.end()));
}

}  // namespace dtrain::cli

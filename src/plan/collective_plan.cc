#include "plan/collective_plan.h"

#include <cstdio>
#include <sstream>

#include "base/env.h"

namespace dtrain {
namespace {

double bus_factor(CollOp op, int p) {
  switch (op) {
    case CollOp::kAllreduce: return 2.0 * (p - 1) / p;
    case CollOp::kBroadcast:
    case CollOp::kReduce:
    case CollOp::kBarrier: return 1.0;
    default: return static_cast<double>(p - 1) / p;
  }
}

}  // namespace

std::vector<CollectivePlanRow> plan_collective(CollOp op, int p, size_t bytes, const CostParams& cp,
                                               size_t segment_bytes, bool shm) {
  std::vector<CollectivePlanRow> rows;
  Algorithm pick = choose(op, p, bytes, cp, shm, segment_bytes);
  for (Algorithm a : supported_algorithms(op)) {
    if (a == Algorithm::kHierarchical || (a == Algorithm::kShmDirect && !shm)) continue;
    CollectivePlanRow row;
    row.algorithm = a;
    row.seconds = predict_seconds(op, a, p, bytes, cp, segment_bytes);
    row.algbw_gbps = row.seconds > 0 ? bytes / row.seconds / 1e9 : 0;
    row.busbw_gbps = row.algbw_gbps * bus_factor(op, p);
    row.chosen = a == pick;
    rows.push_back(row);
  }
  return rows;
}

std::string format_plan(CollOp op, int p, size_t bytes, const std::string& transport, const CostParams& cp,
                        const std::vector<CollectivePlanRow>& rows) {
  std::ostringstream os;
  char line[256];
  os << coll_op_name(op) << " of " << format_bytes(static_cast<double>(bytes)) << " (" << bytes << " B) on " << p
     << " ranks over " << transport << "\n";
  std::snprintf(line, sizeof line, "cost model (%s): alpha = %.2f us/message, beta = %.3f GB/s, gamma = %.3f GB/s\n",
                cp.source.c_str(), cp.alpha_s * 1e6, 1e-9 / cp.beta_s_per_byte, 1e-9 / cp.gamma_s_per_byte);
  os << line;
  std::snprintf(line, sizeof line, "%-20s %14s %12s %12s  %s\n", "algorithm", "predicted(us)", "algbw(GB/s)",
                "busbw(GB/s)", "");
  os << line;
  const CollectivePlanRow* chosen = nullptr;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%-20s %14.1f %12.3f %12.3f  %s\n", algorithm_name(r.algorithm), r.seconds * 1e6,
                  r.algbw_gbps, r.busbw_gbps, r.chosen ? "<- auto" : "");
    os << line;
    if (r.chosen) chosen = &r;
  }
  if (chosen) os << "auto picks " << algorithm_name(chosen->algorithm) << " (lowest predicted time)\n";
  return os.str();
}

}  // namespace dtrain

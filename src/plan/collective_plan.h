// plan/collective_plan.h — explain the collective algorithm choice: predicted time of every
// algorithm for one call, and the one `auto` picks.
//
// Contract: plan_collective(op, p, bytes, params, segment_bytes, shm) returns one row per
// algorithm the op supports (shm-direct only when shm; hierarchical excluded: it needs a host
// layout), in the cost model's order, each with the predicted time (coll/cost_model.h), the
// algbw/busbw it implies (nccl-tests conventions) and whether auto would choose it — exactly
// the decision coll::choose makes at run time with the same parameters.
// format_plan renders the rows as a table. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "coll/cost_model.h"
#include "coll/types.h"

namespace dtrain {

struct CollectivePlanRow {
  Algorithm algorithm;
  double seconds = 0;
  double algbw_gbps = 0, busbw_gbps = 0;
  bool chosen = false;
};

std::vector<CollectivePlanRow> plan_collective(CollOp op, int p, size_t bytes, const CostParams& cp,
                                               size_t segment_bytes, bool shm);
std::string format_plan(CollOp op, int p, size_t bytes, const std::string& transport, const CostParams& cp,
                        const std::vector<CollectivePlanRow>& rows);

}  // namespace dtrain

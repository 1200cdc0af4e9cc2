// plan/plan_measure.h — run a planned layout with `dtrain train` and read its measured step.
//
// Contract
// - train_args(model, layout, batch, data, steps) is the `dtrain train` command line that runs
//   exactly `layout` (strategy, -n, --dp/--tp/--pp, --zero, --microbatches, --schedule,
//   --virtual-stages, --recompute, --bucket-mb, --batch); the GPT trains --steps steps, the
//   MLP one epoch. `data` ("" = the trainer's default) is passed as --data.
// - measure_layout runs it as a subprocess of this program (/proc/self/exe)
//   with --json to a temporary file and returns train_seconds / steps; a failed run is a
//   Error carrying the command and its exit status.
// Thread-safety: starts a process; one call at a time per caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/simulator.h"

namespace dtrain::plan {

struct Measured {
  double step_s = 0;
  int64_t steps = 0;
  double train_seconds = 0;
};

std::vector<std::string> train_args(const std::string& model, const Layout& l, int64_t batch, const std::string& data,
                                    int64_t steps);
Measured measure_layout(const std::string& model, const Layout& l, int64_t batch, const std::string& data, int64_t steps);

}  // namespace dtrain::plan

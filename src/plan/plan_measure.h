// plan/plan_measure.h — run a planned layout with `dtrain train` and read its measured step.
//
// Contract
// - train_args(model, layout, batch, data, steps) is the `dtrain train` command line that runs
//   exactly `layout` (strategy, -n, --dp/--tp/--pp, --zero, --microbatches, --schedule,
//   --virtual-stages, --recompute, --bucket-mb, --batch); the GPT trains --steps steps, the
//   MLP one epoch. `data` ("" = the trainer's default) is passed as --data.
// - measure_layout runs it as a subprocess of this program (/proc/self/exe)
//   with --json to a temporary file and returns its steady step (steady_step_s) and the mean
//   (train_seconds / steps); a failed run is a Error carrying the command and its exit status.
// - steady_step_s(run, batch) is the step time a prediction is compared with: a run of several
//   rounds (the GPT trains --steps in rounds of max(1, steps/10) steps, each row of the JSON's
//   "epoch_rows" timing one) gives the MEDIAN over its rounds after the first of batch / the
//   round's examples per second; the first round carries the warm-up (first touches of the
//   activations, the ranks' start-up skew before the first collective: 0.5-2.6 s against
//   0.1-0.5 s for a later step here), which a long run amortises and a 6-step run does not.
//   A single-round run (the MLP's epoch of ~900 steps) gives batch / examples per second of the
//   whole run. 0 when the run reports neither.
// Thread-safety: starts a process; one call at a time per caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/simulator.h"

namespace dtrain::plan {

struct Measured {
  double step_s = 0;       // steady step (steady_step_s)
  double mean_step_s = 0;  // train_seconds / steps, warm-up included
  int64_t steps = 0;
  double train_seconds = 0;
  // The run's own prediction (dtrain train --json "prediction".step_ms, 0 where absent): the
  // planner's, priced with the 2-rank path the run's probe chose ("shm_cores", "" where no
  // verdict was needed; plan::with_core_distance).
  double predicted_step_s = 0;
  std::string shm_cores;
};

std::vector<std::string> train_args(const std::string& model, const Layout& l, int64_t batch, const std::string& data,
                                    int64_t steps);
double steady_step_s(const nlohmann::json& run, int64_t batch);
Measured measure_layout(const std::string& model, const Layout& l, int64_t batch, const std::string& data, int64_t steps);

}  // namespace dtrain::plan

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
// - measure_layouts(..., repeats, on_run) runs every layout `repeats` times in rounds: each
//   round runs each layout once, in predicted order on even rounds and reversed on odd ones,
//   so a drift of the machine over the rounds weighs on every layout alike. Each layout's
//   figure is the median of its runs' steady steps, with the fastest and slowest beside it;
//   on_run (may be empty) is called after every run, for progress.
// - judge_measured(runs) compares the chosen layout (index 0, the planner's first) with the
//   one of the lowest median: how much slower the chosen measured, and whether the runs tell
//   the two apart (every run of the chosen slower than every run of the other; needs two runs
//   each). On a shared VM a layout's runs spread 10-25% (docs/PLANNER.md), more than the
//   planner's layouts differ by, so a lead inside the spread is called a draw, not a miss.
// Thread-safety: starts processes; one call at a time per caller.
#pragma once

#include <cstdint>
#include <functional>
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

struct LayoutRuns {
  std::vector<Measured> runs;  // in the order they ran
  double median_s = 0, min_s = 0, max_s = 0;  // over the runs' steady steps
};
// Fills median_s, min_s and max_s from runs (non-empty).
void summarise(LayoutRuns& r);
std::vector<LayoutRuns> measure_layouts(const std::string& model, const std::vector<Layout>& layouts, int64_t batch,
                                        const std::string& data, int64_t steps, int repeats,
                                        const std::function<void(int round, size_t index, const Measured&)>& on_run);

struct MeasuredVerdict {
  size_t fastest = 0;        // index of the lowest median (0: the chosen layout itself)
  double chosen_excess = 0;  // the chosen's median over the fastest's, minus 1 (0 when it is the fastest)
  bool apart = false;        // the chosen's fastest run is slower than the fastest layout's slowest
  bool judged = false;       // both have two runs or more (else `apart` says nothing)
};
MeasuredVerdict judge_measured(const std::vector<LayoutRuns>& runs);

}  // namespace dtrain::plan

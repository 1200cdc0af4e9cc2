// cli/plan_predict.h — the planner inside `dtrain train`: --plan auto and the prediction each
// run records beside its measurement.
//
// Contract
// - resolve_plan_flag(args): without "--plan" the args come back unchanged. With "--plan auto"
//   it reads --model, -n/--ranks, --batch (the trainer's defaults when absent: the MLP batch
//   64, the GPT 12) and --strategy (a filter), plans on this machine (plan/planner.h), prints
//   the chosen layout to stderr, and returns the args with --plan and the layout flags the user
//   gave (--dp --tp --pp --zero --microbatches --schedule --virtual-stages --recompute
//   --bucket-mb --strategy) replaced by the plan's. "--plan X" for X other than auto is an
//   InvalidArgument. No layout fitting is an InvalidArgument saying so.
// - prediction_for_run(config, measured_json) is the "prediction" object `dtrain train --json`
//   records: the simulator's step time and memory per rank for the run's model, strategy,
//   mesh and batch on this machine, the measured step (train_seconds / steps), their error,
//   the measured training heap (train_heap_mb: the heap high-water mark during training above
//   what was live before the model was built, the largest over the ranks, base/heap_stats.h)
//   and the memory error against it, and rank 0's peak RSS (which also holds the data set and
//   the runtime). A layout the simulator does not cover gives
//   {"error": why} instead: a prediction never fails a run.
// - prediction_line(prediction) is that object as one line for the run's report: predicted
//   step and memory per rank, the measured ones and the errors, and which machine model
//   (a calibration file, or the defaults with the command that calibrates) and, where the
//   calibration had figures for the cores' verdict the run probed, that verdict (the share of
//   each where the launcher sampled them while the ranks ran, "cores_sampled", or where the
//   probes before and after the run differ: plan_predict.cc), and where a unit of the model
//   is priced far past the shapes the calibration timed ("extrapolated",
//   plan::extrapolated_unit), which unit and the `dtrain bench calibrate --models` command
//   that times the model's own; "" for an {"error": ...} object (a strategy the simulator
//   does not cover says nothing).
// Thread-safety: call from the main thread.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "plan/cluster.h"
#include "train/config.h"

namespace dtrain::cli {

Args resolve_plan_flag(const Args& args);
// probe_s: the speed probe timed beside this run (0: none); with a calibration that has its
// own probe, compute is priced at probe_s / the calibration's (replacing a file's re-probe),
// and the object records "speed_probe_ms" and "compute_scale".
nlohmann::json prediction_for_run(const TrainConfig& config, const nlohmann::json& measured, double probe_s = 0);
std::string prediction_line(const nlohmann::json& prediction);
// Where a unit of `model` is priced far past the shapes the calibration timed
// (plan::extrapolated_unit): {"unit", "kind", "params", "largest_timed_params", "calibrate"
// (the command that times the model's own)}; null where none is. The prediction's
// "extrapolated" and `dtrain plan train`'s note.
nlohmann::json extrapolation_json(const std::string& model, const plan::Cluster& c);
// That object as the report's words: "its fc1 (1049600 parameters) is priced past the largest
// unit of its kind the calibration timed (200960): `dtrain bench calibrate --models '...'`
// times this model's own".
std::string extrapolation_words(const nlohmann::json& x);

}  // namespace dtrain::cli

// plan/calibrate_units.h — time the executors' own units (forward and backward through the
// real nn/autograd code) and fit a cost line per unit kind, so the simulator predicts what
// training actually runs rather than what a bare GEMM achieves.
//
// Contract
// - A unit kind is what plan/simulator.h's ModelSpec calls a unit: "mlp_layer" (one Linear
//   layer of the MLP), "gpt_embedding", "gpt_block", "gpt_head"; and "gpt_layernorm", one
//   layernorm (forward, backward) over a block's output, which tensor parallelism does not
//   split (its work: items x context x width elements); and kZero3Block, a GPT block run as
//   ZeRO-3 runs it (parallel/zero3.h): alone, "forward" a pass that records nothing and
//   "backward" the re-run forward with recording plus the backward, on activations still
//   hot from that re-run (measured 6x128 GPT, 12 sequences: 5.2 + 12.9 ms a block, where
//   the stacked block's forward + backward + forward again is ~21). Its WORK for a pass over
//   `items` examples or sequences is items x (fwd_flops + out_elems) of the ModelSpec unit
//   (unit_work()): FLOPs, plus the elements it writes so the embedding (no FLOPs) has a size.
// - UnitFit is t = fixed_s + work x s_per_work + params x s_per_param: least squares with
//   every coefficient >= 0 (fit_plane: the best of the fits on each subset of the three terms
//   whose coefficients all come out >= 0; fit_line is fit_plane without the parameter term:
//   a negative slope gives the mean as a constant, a negative intercept the fit through the
//   origin).
//   The parameter term is fitted only when a kind's points have at least two parameter
//   counts (the MLP's three layers; a GPT kind's two widths) and is kept only where it lowers
//   the error, so it separates "per example" from "per weight" where the points can tell
//   them apart. fit_units caps the intercept at kMaxFixedShare of the smallest point.
//   UnitCost holds one fit for forward and one for backward.
// - measure_units(points, seconds) runs each point (kind, spec, items) on the calling thread
//   with one BLAS thread: builds the unit (nn/mlp.h's MLP of one layer, nn/transformer.h's
//   GptStage of one unit), and times a forward (graph built as the executors build it) and
//   the backward of that graph (a block: a stack of 4 blocks, charged a quarter, so the
//   activations are as cold as in a whole model), in three interleaved rounds over all the
//   points, each round the median of repetitions filling about a third of the point's share
//   of `seconds` (at least 6), the point the median of its rounds (the median, not the best:
//   a run pays the typical pass on a shared machine; the rounds: a change of the machine's
//   speed hits every point alike). The heap is kept warm first (base/heap_warm.h), as a
//   training run's is.
// - default_unit_points() are the shapes `dtrain bench calibrate` measures: the MLPs
//   784-256-128-10's and kWideMlp's three layers and kNarrowMlp's two at 8, 16, 64 and 128
//   examples, and the GPT's embedding, block
//   (also as kZero3Block) and head at widths 64, 128 and 256 (heads 4, 8 and 8, context 64) and 2, 6, 12
//   and 24 sequences, at width 512 (heads 8) and 2, 6 and 12, and at context 256 at widths
//   128 and 256 (heads 8 and 4) and 2 and 4 sequences.
//   extra points come from `--models` (any mlp:/gpt: spec, at the same item counts).
// - fit_units(points) groups the points by kind and fits each direction; memory is the
//   least-squares slope through the origin of the heap bytes (base/heap_stats.h) the forward
//   graph keeps (act) and of the high-water mark over forward + backward (peak), against
//   items (per item) and against items x mem_elems of the point's unit (per element: the
//   default points mix widths 64 and 128, whose bytes per item differ 2x; per element of the
//   closed form they agree within 1%, so the per-item slope under-counted width 128 by 25%).
//   A block's per-element figure is two where its points tell them apart: bytes per
//   attention probability (Unit::score_elems, heads x context^2) and per element of the rest
//   (least squares through the origin in both). The default widths have heads x context /
//   width 4, 4, 2 and 1: on the EPYC VM they read 4.03 and 5.18 bytes kept (the block keeps
//   22 s h floats a sequence where the closed form counts 17, and one float per probability),
//   9.06 and 4.03 at the high-water mark, every point within 1%; the one figure of 5.06 had
//   priced a block at context 256 (the ratio 16) +28% (fifty-fourth session).
// - units_json / units_from_json move the points and the fits to and from the calibration
//   file's "units" section (each fit's coefficients, and every point so a fit can be redone).
//   A malformed section is InvalidArgument naming the field.
// Thread-safety: pure apart from measure_units, which uses the calling thread only.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/heap_warm.h"

namespace dtrain::plan {

inline constexpr const char* kZero3Block = "gpt_block_zero3";

struct UnitFit {
  double fixed_s = 0, s_per_work = 0;
  // Per parameter of the unit, whatever the items: streaming the weights (and, backward,
  // their gradient) through the cache once per pass. At a few items per rank this is most of
  // a wide layer's pass: 784x256 forward at 16 examples is 78 us, of which about 29 us do not
  // shrink with the examples. 0 when the kind's points have a single parameter count.
  double s_per_param = 0;
  double at(double work, double params = 0) const { return fixed_s + work * s_per_work + params * s_per_param; }
};

struct UnitCost {
  UnitCost() = default;
  UnitCost(UnitFit f, UnitFit b) : fwd(f), bwd(b) {}
  UnitFit fwd, bwd;
  // Memory per item (0: not measured): what the forward graph keeps for backward, and the
  // heap's high-water mark over forward + backward (activations + their gradients).
  double act_b_per_item = 0, peak_b_per_item = 0;
  // The same per element of the unit's memory basis (simulator.h mem_elems: its closed-form
  // activations + output per item), so one fit serves every width: 0 in files before it.
  double act_b_per_elem = 0, peak_b_per_elem = 0;
  // Bytes per element of a block's attention probabilities (Unit::score_elems) where the
  // points tell them apart from the rest (blocks whose heads x context / width differ); the
  // per-element figures above are then per element of the rest. 0: one figure for all.
  double act_b_per_score = 0, peak_b_per_score = 0;
  // Heap bytes per item of a unit with mem_elems elements of memory basis, score_elems of
  // them attention probabilities: the per-element fits when there are some, else per item.
  double act_b(double mem_elems, double score_elems = 0) const {
    return bytes_of(act_b_per_elem, act_b_per_score, act_b_per_item, mem_elems, score_elems);
  }
  double peak_b(double mem_elems, double score_elems = 0) const {
    return bytes_of(peak_b_per_elem, peak_b_per_score, peak_b_per_item, mem_elems, score_elems);
  }
  static double bytes_of(double per_elem, double per_score, double per_item, double elems, double scores) {
    if (per_elem <= 0) return per_item;
    return per_score > 0 ? per_elem * (elems - scores) + per_score * scores : per_elem * elems;
  }
  bool has_memory() const { return peak_b_per_item > 0 || peak_b_per_elem > 0; }
  // The points the kind was timed at, by (model spec, the unit's parameters), items
  // increasing (fit_units and units_from_json fill it from the points; every kind but the
  // ZeRO-3 block and the layernorm, see attach_timed in the .cc).
  struct Timed {
    double items = 0, fwd_s = 0, bwd_s = 0;
  };
  std::map<std::pair<std::string, double>, std::vector<Timed>> timed;
  // Forward and backward seconds of one unit of model `spec` with `params` parameters over
  // `items` (work: items x unit_work). Where that very unit was timed at two or more item
  // counts: linear in items between the two points around `items`; below the first, the
  // first two points' line extended (a pass's fixed cost stays; never below the first point
  // scaled in proportion); above the last, it scaled by the fit's ratio between the two
  // item counts. Else the fit. The points are made non-decreasing in items first (a point
  // above a later one takes its time).
  // Why: the fit is one plane over a kind's points, and the kernels under it change with
  // the shape (tensor/gemm_small.h reads the weights in place up to 64-256 rows, OpenBLAS
  // packs them above). On a host whose OpenBLAS ran the 128-example layer 9x slower than the
  // 64-example one (a 16-core Xeon VM, 2026-11-26), the plane priced every MLP step at
  // 8-64 examples +35..+180%; the points themselves say what each shape costs. A GPT pass has
  // a fixed cost that the fit's line (intercept >= 0, bent by the 24-sequence point whose
  // activations leave the cache) lost, so pipelines of many micro-batches were priced too
  // cheap (attach_timed in the .cc).
  std::pair<double, double> pass(const std::string& spec, double params, double items, double work) const;
};

struct UnitPass {
  double fwd_s = 0, bwd_s = 0, act_b = 0, peak_b = 0;
};

struct UnitPoint {
  std::string kind;  // mlp_layer, gpt_embedding, gpt_block, gpt_head
  std::string spec;  // the model spec the unit is taken from
  int unit = 0;      // index into ModelSpec::parse(spec).units
  int64_t items = 1;
  double work = 0;   // items x unit_work
  double fwd_s = 0, bwd_s = 0;
  double act_b = 0, peak_b = 0;  // heap bytes: kept by forward; high-water over forward + backward
};

// max_fixed_share: the intercept may be at most this share of the time of the point with the
// least work (when that work is > 0 and not every point has it); a larger one is capped there
// and the rest refitted (least squares through (0, cap)). fit_units uses kMaxFixedShare: on this shared machine the
// medians of a loaded minute gave the GPT block intercepts of 0.2-1.6 ms against passes of
// 0.3-1 ms at 2 sequences (quiet calibrations: 26-86 us), which then charged every small
// pipeline micro-batch that noise (pipelines were over-predicted by 50-160%).
constexpr double kMaxFixedShare = 0.2;
// The examples per pass the MLP points are timed at: down to 8, what each of 8 ranks gets of
// a 64-example minibatch (below 16 a wide layer's pass is mostly its weights, not its FLOPs).
inline const std::vector<int64_t> kMlpItems{8, 16, 64, 128};
// The wide MLP the default calibration times beside the 784-256-128-10 one, so that an MLP
// of neither shape has its layers' line and the rest of its step (simulate_data_parallel.cc
// rest_untimed_s) from two timed sizes, 0.24M and 1.9M parameters, around it or nearer it
// than the small one alone.
inline constexpr const char* kWideMlp = "mlp:784-1024-1024-10";
// And a narrow one: its 784x64 layer runs at two thirds the rate per work of 784x256, which
// an untimed narrow layer placed among the other two models' hidden layers (the narrowest
// 256x128) does not reach: timed alone, 784x48 and 784x32 read -14..-51% without it, -34..+15%
// with it (sim_costs.h untimed_mlp_layer; 2026-12-02).
inline constexpr const char* kNarrowMlp = "mlp:784-64-10";
UnitFit fit_line(const std::vector<std::pair<double, double>>& xy, double max_fixed_share = 1e300);
struct PlanePoint {
  double work = 0, params = 0, t = 0;
};
UnitFit fit_plane(const std::vector<PlanePoint>& pts, double max_fixed_share = 1e300);
std::map<std::string, UnitCost> fit_units(const std::vector<UnitPoint>& points);

std::vector<UnitPoint> default_unit_points();
// The points of one more model spec (its distinct unit kinds, at the default item counts).
std::vector<UnitPoint> unit_points_for(const std::string& spec);
void measure_units(std::vector<UnitPoint>& points, double seconds);
// Forward and backward seconds of one point (the best pass): passes for about `seconds`, or
// exactly `fixed` passes after one warm-up when fixed > 0. on_pass (optional) is told each
// timed pass's start and end (steady clock, seconds; the warm-up is not timed).
using PassHook = std::function<void(double start_s, double end_s)>;
UnitPass time_unit(const UnitPoint& p, double seconds, int fixed, const PassHook& on_pass = {});

nlohmann::json units_json(const std::vector<UnitPoint>& points, const std::map<std::string, UnitCost>& fits);
std::map<std::string, UnitCost> units_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace dtrain::plan

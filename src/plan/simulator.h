// plan/simulator.h — predict one training step of a model under a strategy on a cluster.
//
// Contract
// - ModelSpec::parse takes the `--model` spec dtrain train takes: "mlp:784-256-128-10" or
//   "gpt:layers=..,heads=..,width=..,context=.." (vocab 65, the text data's). The model is a
//   list of units in forward order, the same units the executors use (an MLP layer; the GPT's
//   embedding, blocks and head), each with its parameters, forward FLOPs per item and the
//   activations it keeps per item. An item is an example (MLP) or a sequence (GPT).
//   (model_spec.cc; simulate in simulator.cc.)
// - Layout is what a run is configured by: strategy (ddp, ps, localsgd, gossip, fedavg, tp,
//   pp, zero, hybrid, single), dp x tp x pp, ZeRO stage, micro-batches, schedule and virtual
//   stages, recompute, bucket size, plus the data-parallel knobs (sync_every, servers).
// - simulate(model, layout, cluster, batch) predicts a step of `batch` items (the global
//   minibatch) on dp*tp*pp ranks:
//     compute      forward (2 FLOPs per MAC) + backward (2x forward, 3x with recompute) at the
//                  cluster's GEMM rate, slowed when the ranks outnumber the node's cores;
//     comm         ddp walks the gradient buckets of parallel/share_grad.h (GradBuckets over
//                  the units, last layer first, as backward reports them): each bucket's
//                  all-reduce starts when backward has produced it and the previous one is
//                  done; only what is left after backward ends is exposed. The GPT's
//                  data-parallel sync (ZeRO 0-2, bucketed reduce-scatter/all-gather) runs after
//                  the pipeline; ZeRO-3 gathers parameters in forward and backward. tp adds
//                  two all-reduces of the activations per block in forward and two in backward.
//     pipeline     pp builds the executor's instruction lists (parallel/pipeline_schedule.h,
//                  make_schedule) and runs its simulate() with these durations: forwards and
//                  backwards from the stage's units, sends from the activation size over the
//                  link; bubble = makespan - the busiest stage's compute.
//     fedavg       a client step at the whole minibatch, scaled by the executor's own client
//                  sample (fedavg_sample): the busiest rank's clients, or the node's share of
//                  all of them, per client trained (its time per minibatch of examples trained).
//     optimizer    local parameters (after tp/pp split and ZeRO sharding) x ns per parameter.
//   Memory per rank: weights, gradients, optimizer state (ZeRO stage over dp, closed_forms.h)
//   and activations (per-unit activations x micro-batch items x the most micro-batches in
//   flight the schedule simulation reports; recompute keeps block inputs only).
//   Traffic: bytes each rank sends per step (fedavg: per round), by group (dp, tp, pp).
// - Unsupported combinations (a strategy the model lacks, dp*tp*pp != ranks, heads % tp,
//   more stages than units, batch not divisible) are InvalidArgument naming the fix.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "plan/cluster.h"

namespace dtrain::plan {

struct Unit {
  std::string name;
  std::string kind;       // mlp_layer, gpt_embedding, gpt_block, gpt_head (calibrate_units.h)
  double params = 0;
  double fwd_flops = 0;   // per item
  double act_elems = 0;   // kept for backward, per item (no recompute)
  double out_elems = 0;   // the output it sends onwards, per item
  bool block = false;     // a transformer block (tp-split and recomputable)
  // Of act_elems, the attention probabilities a block keeps (heads x context^2 per item; 0
  // for every other unit): calibrated apart from the rest (UnitCost::act_b).
  double score_elems = 0;
};

// What a unit's calibrated cost line is a function of, per item: fwd_flops + out_elems.
inline double unit_work(const Unit& u) { return u.fwd_flops + u.out_elems; }
// What a unit's calibrated heap bytes are proportional to, per item: act_elems + out_elems.
inline double mem_elems(const Unit& u) { return u.act_elems + u.out_elems; }
// An MLP layer's input width: its forward is 2 x in x out FLOPs an item.
inline double in_elems(const Unit& u) { return u.fwd_flops / 2 / std::max(1.0, u.out_elems); }

struct ModelSpec {
  std::string spec;
  // The name its units' calibrated lines go by (Cluster::unit_for's "kind@spec"): the spec
  // itself for the MLP; for the GPT the one-block spec of its shape (gpt_block_spec), which
  // is what the calibration times: looked up by the whole spec ("layers=6"), no GPT ever
  // found its own shape's lines, and took the one fit over both timed widths, 14-20% above
  // the 6x128 block's own points at 2 sequences.
  std::string unit_spec;
  bool gpt = false;
  int64_t heads = 1, width = 0, context = 1, layers = 0;
  std::vector<Unit> units;
  double params() const;
  static ModelSpec parse(const std::string& spec);
};

// The spec of a one-block GPT of this shape ("gpt:layers=1,heads=H,width=W,context=C"): what
// the calibration times a block of and names it by.
std::string gpt_block_spec(int64_t heads, int64_t width, int64_t context);

// The MLP executors' step beyond its units (the batch gathered from the dataset, the loss and
// its gradient, the gradient's scaling and hand-off: parallel/share_grad.h), per item: what
// its calibrated line ("mlp_step", calibrate_compute.h) is a function of: the input width
// plus the classes.
inline double mlp_step_work(const ModelSpec& m) {
  return m.units.empty() ? 0 : m.units.front().act_elems - m.units.front().out_elems + m.units.back().out_elems;
}

struct Layout {
  std::string strategy = "ddp";
  int dp = 1, tp = 1, pp = 1;
  int zero = 0;
  int micro = 1;
  std::string schedule = "1f1b";
  int virtual_stages = 1;
  bool recompute = false;
  double bucket_mb = 1.0;
  // ddp with ZeRO 1-2 on one host: one shared copy of the parameters (1) or one per rank (0);
  // -1: by the model's size, as dtrain train --shared-params auto (parallel/data_parallel.h).
  int shared_params = -1;
  // ddp's cut of each batch (dtrain train --batch-split, parallel/batch_split.h): -1 auto
  // (measured unless the node has more ranks than cores), 0 even, 1 measured. A measured cut
  // takes equally long on every rank, so its step is priced at the even share, and its
  // busiest rank's memory at the band's top, (1 + kMeasuredSpread) / dp of the batch.
  int batch_split = -1;
  // Fixed weights (--batch-split W0,W1,...): the largest rank's fraction of the batch, which
  // prices both its step and its memory; 0 where the weights are not fixed.
  double batch_share_max = 0;
  int sync_every = 8;   // localsgd
  int servers = 1;      // ps
  bool ps_sync = false; // ps: --sync (one update per step) rather than one per push
  int clients = 0;               // fedavg: simulated clients (0: 10 per rank, as dtrain train)
  double client_fraction = 0.1;  // fedavg: share of the clients sampled per round
  uint64_t seed = 0;             // fedavg: the run's seed (it draws the sample)
  int64_t rounds = 1;            // fedavg: the run's rounds (--epochs), over which the sample is averaged
  // dtrain train's --optimizer (sgd, momentum, nesterov, adam, adamw); "" = the model's
  // default there (AdamW for the GPT, plain SGD for the MLP). Sets the optimizer's state
  // (memory) and the calibrated rate of its step (cluster.h optimizer_family).
  std::string optimizer = "";
  // The MLP's training set, in rows (each rank holds the epoch's order of them: sim_costs.h
  // kOrderBytesPerRow); 0: kDefaultTrainRows, Fashion-MNIST's 60,000 (dtrain train's default).
  int64_t train_rows = 0;
  int ranks() const { return dp * tp * pp; }
  std::string describe() const;
};

inline constexpr int64_t kDefaultTrainRows = 60000;

struct Prediction {
  double step_s = 0, compute_s = 0, comm_s = 0, bubble_s = 0, optimizer_s = 0;
  double weights_b = 0, grads_b = 0, optimizer_b = 0, activations_b = 0;
  double buffers_b = 0;  // the strategy's own copies of parameters / gradients (MLP strategies)
  double dp_bytes = 0, tp_bytes = 0, pp_bytes = 0;  // sent per rank per step
  double memory_b() const { return weights_b + grads_b + optimizer_b + activations_b + buffers_b; }
  // The GPT's layouts: the memory exceeded simulate's memory_limit_b, so the time fields were
  // not computed (memory first: it does not depend on the schedule's timing).
  bool over_memory = false;
};

// A run whose calls went partly one way and partly another (two ranks whose context re-probed
// their distance and changed its verdict mid-run, coll/shm_context.h after_call): the times
// of `a` and `b` weighted (1 - w_b) : w_b, w_b clamped to [0, 1]. Memory and traffic are
// `a`'s (the verdict most calls ran under), except that the buffers are the larger of the
// two where b has any weight: the paths' scratch differs by a slot's worth, and the heap's
// high-water mark keeps whichever a call took.
Prediction blend_times(const Prediction& a, const Prediction& b, double w_b);

// The unit of `m` priced furthest past what the calibration timed: one not timed itself (no
// points of its own model and size, UnitCost::timed) whose parameters are more than `factor`
// x those of the largest unit of its kind that was. Its time is then the kind's fit carried
// out to a shape it never saw (the default calibration times the MLP 784-256-128-10: its
// plane priced the compute of the 784-1024-1024-1024-10 MLP's 2-rank step, 128 rows a rank,
// at 9.9 ms where that model's own timed points price 14.2; the step measured 16.1 against
// 12.2 and 16.6 predicted). nullopt where
// every unit is timed or within `factor`, or the cluster has no calibrated line for a kind.
// Of several past `factor`, the one with the largest ratio.
struct UnitExtrapolation {
  std::string unit, kind;
  double params = 0, largest_timed_params = 0;
};
std::optional<UnitExtrapolation> extrapolated_unit(const ModelSpec& m, const Cluster& c, double factor = 2.0);

// memory_limit_b: a layout predicted to need more per rank stops after its memory (over_memory).
Prediction simulate(const ModelSpec& m, const Layout& l, const Cluster& c, int64_t batch,
                    double memory_limit_b = std::numeric_limits<double>::infinity());

}  // namespace dtrain::plan

// plan/sim_costs.h — what simulate() prices a step with, shared by its two halves.
//
// Contract (internal to plan/: simulator.cc, simulate_data_parallel.cc, simulate_model_parallel.cc)
// - allreduce_s, reduce_scatter_s, allgather_s(cluster, group, bytes, node_ranks): seconds of
//   one collective of `bytes` (the whole buffer) in a group: the calibration's figure at that
//   many ranks on the node when it has one (its gap factor and the ranks beyond it included),
//   else the formula on the group's link (hierarchical across nodes). 0 for a group of one.
// - link_of: the link (alpha, beta, gamma at that size) a group's transfer uses; p2p for
//   point-to-point sends. beyond: how much slower a figure measured with `measured` ranks on
//   the node runs with node_ranks.
// - unit_pass: one unit's forward and backward seconds over `items` before any
//   oversubscription slowdown (a block's work split over tp ranks).
// - StepBasics: what both halves share, worked out once by simulate() from the layout and
//   the cluster: ranks, ranks on the node, the compute and communication slowdowns, the
//   optimizer family and the time of its step.
// - simulate_data_parallel (the MLP's ddp, ps, localsgd, gossip, fedavg, single) and
//   simulate_model_parallel (the GPT on dp x tp x pp) fill a Prediction (simulator.h) for a
//   layout simulate() has checked.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coll/config.h"
#include "plan/simulator.h"

namespace dtrain::plan::sim {

constexpr double kF = 4;  // bytes per float
// The largest call the shared-memory slots carry by default (DTRAIN_SHM_SLOTS_BYTES).
constexpr double kShmSlotsBytes = static_cast<double>(kDefaultShmSlotsBytes);
// The epoch's order of the training set's rows (data/sampler.h epoch_permutation: one int64
// a row), which every MLP strategy's ranks hold while they train; fedavg also its clients'
// partition of the rows (16 bytes a row in all). Measured on the EPYC VM (2026-12-02, 1-epoch
// runs of Fashion-MNIST's 60,000 rows and of its first 20,000, both default MLPs): every
// strategy's heap 0.32 MB less at 20,000 rows (fedavg 0.65) at 1, 2, 4 and 8 ranks. Until
// then a fitted 0.5 MB of "staging" (ddp's window and the slot or cross-memory all-reduce,
// gossip, the ps server) had stood for it at 60,000 rows, and 1-rank runs read 0.44 MB under.
constexpr double kOrderBytesPerRow = 8;
// The scratch a cross-memory all-reduce keeps per peer in another process: one piece of the
// peer's slice (coll/shm_direct.cc kPieceBytes).
constexpr double kReadPieceBytes = 256.0 * 1024;

// A group of g ranks whose members are `stride` world ranks apart: the link it uses and, when
// it spans nodes, the hierarchical all-reduce.
struct Group {
  int size = 1, stride = 1;
};

// How much slower a figure measured with `measured` ranks on the node runs with node_ranks.
double beyond(const Cluster& c, int node_ranks, int measured);
// gapped: with the calibration's gap factor (training computes between the calls); false:
// back to back, where the caller prices the compute's imbalance itself (Cluster::
// meeting_penalty).
double allreduce_s(const Cluster& c, Group g, double bytes, int node_ranks, bool gapped = true);
// ddp's all-reduce of a bucket on one host, in place in its shared-memory window
// (Cluster::allreduce_window_by_ranks), slowed as allreduce_s slows its figures; allreduce_s
// where the calibration did not time it at this many ranks.
double window_allreduce_s(const Cluster& c, Group g, double bytes, int node_ranks, bool gapped = true);
double reduce_scatter_s(const Cluster& c, Group g, double bytes, int node_ranks);
double allgather_s(const Cluster& c, Group g, double bytes, int node_ranks);
CostParams link_of(const Cluster& c, Group g, double bytes, bool p2p, bool one_way = false);
// Ranks that meet every step (ddp, gossip, sync ps) and share a core take turns on it, and
// each comes back to caches its co-located peers filled: its parameters (`bytes`) are
// fetched again every time it is switched in. Priced as k^2 refills at the element-wise rate, k the ranks
// on the busiest core (ceil(node_ranks / cores)); 0 with a core per rank. The form is fitted:
// on the EPYC VM (2026-12-01, `dtrain train --strategy ddp` of mlp:784-64-10,
// 784-256-128-10, 784-512-512-10 and 784-1024-1024-10, two runs each at 2, 4 and 8 ranks on
// 2 cores, against the prediction with the steady slowdown curve) the step's excess over its
// 2-rank excess grew with the parameters' bytes and about with k^2: 0.12-0.17 ms per MB at
// k = 2, 0.33-0.60 at k = 4 (the 0.2 MB model: 0.01 and 0.13 ms), where this prices 0.12 and
// 0.49 at the calibration's 32.5 GB/s. A GPT's step is hundreds of times the refill.
double lockstep_refill_s(const Cluster& c, int node_ranks, double bytes);
// The CPU a message of `bytes` costs the node over tcp when the node's ranks outnumber its
// cores (seconds per byte, its send and its receive together), from the calibrated tcp
// all-reduce at node_ranks ranks: that all-reduce keeps every core busy, so its time on all
// the cores, less its reductions at the element-wise rate, over the bytes its messages carry
// (each rank sends 2 (p - 1) / p of the buffer). -1 where it does not apply: shared memory,
// a core per rank, or no such table. The 2-rank exchange's beta (both ends running at once,
// each message read as it lands) prices a message at a third of this: over loopback on the
// EPYC VM, 4 ranks on 2 cores, gossip's 0.94 MB messages took about 0.29 ms of the node's
// CPU each where the exchange table says 0.10 (2026-12-05, dv-g1 and dv-g2: gossip -30%,
// sync ps -23..-28%).
double tcp_message_cpu_s_per_byte(const Cluster& c, int node_ranks, double bytes);

struct Pass {
  double f = 0, b = 0;
};
Pass unit_pass(const Cluster& c, const Unit& u, double items, int tp, const std::string& spec);
// A GPT unit of a shape the calibration did not time (no "kind@spec" lines of its own):
// seconds per unit of work (unit_work) of its forward and backward over `items` sequences,
// the timed shapes' at those items (each its own points' pass over its own work),
// interpolated in log(parameters) between the two on either side of `params`, the nearest
// one's beyond them. nullopt for an MLP, a shape with lines of its own, a kind no other shape
// was timed for, and the layernorm (one line over every width: its work is elements).
// Why: a block's GEMMs run faster per FLOP as the width grows (their inner dimension is the
// width), which one line in work over the timed widths 64 and 128 did not follow: 4-layer
// GPTs at 1 rank, batch 8, widths 192 / 256 / 384 were priced +36 / +105 / +141% (2026-12-01,
// fifty-third session).
// Where two timed shapes of one width differ in their attention probabilities (Unit::
// score_elems: another context or head count), the attention is priced apart: tau0 + tau1 x
// head_dim a probability, least squares over those pairs, and the per-work rates above are
// then over each shape's work less its attention's FLOPs (its dense work). One rate per work
// from context 64 had priced blocks at context 256 12-28% short and at 512 38% (fifty-fourth
// session; the default calibration times context 256 at widths 128 and 256).
std::optional<Pass> untimed_gpt_rate(const Cluster& c, const std::string& kind, const std::string& spec, double params,
                                     double items);
// An MLP layer `u` of model `spec` without timed points of its own (the model not timed):
// forward and backward seconds over `items` examples from the layers the calibration did
// time, in any model. A layer is timed alone (calibrate_units.cc time_unit), so what it costs
// is its shape (inputs, outputs, and whether it is the last, without an activation), not the
// model around it: a timed layer of the same shape gives its own points (UnitCost::pass);
// else the timed layers of its role give their seconds per unit of work at these items,
// interpolated between the two on either side of the layer (flat beyond them): a hidden
// layer in log of its narrower side (inputs or outputs: what the products' kernels fill
// well or not), a last layer, whose outputs are the classes, in log(parameters). nullopt:
// not an MLP, its own points exist, or no timed layer of its role.
// Why: the kind's one plane in work and parameters, fitted over wide and narrow, hidden and
// last layers at once, priced the layers of 15 untimed MLPs timed alone (784x32 to 2048x2048,
// 32x10 to 2048x10; 2026-12-02) at a median error of 27-44% by item count (8-128), every last
// layer -60..-75%; 1-rank runs of 784-64-10 read -9..-22% on their step. This reads them at a
// median 5-12% (in parameters alone the hidden layers read worse: 256x256 sits beside 784x64
// there and runs at 1.5x its rate per work). Docs: docs/history/planner.md, fifty-fifth session.
std::optional<Pass> untimed_mlp_layer(const Cluster& c, const Unit& u, const std::string& spec, double items);

// The small products' packing scratch (tensor/gemm_small.h) that a rank's thread keeps from
// its first product on: the largest forward's plus the largest weight gradient's (a bound:
// they share one of their buffers) among `products` ((outputs, inputs) of each weight) at
// `rows` rows. 0 where gemm_small takes none of them.
double products_scratch_b(int64_t rows, const std::vector<std::pair<int64_t, int64_t>>& products);
// A GPT rank's: the products of a stage that runs blocks and/or the head, `rows` tokens a
// micro-batch. A block's four products are split over tp ranks as Megatron splits them (qkv
// and fc by their outputs, the two projections by their inputs); the head (vocabulary x
// width) is whole; the embedding is a lookup. Since the products take large sides from 32
// where OpenBLAS runs narrower kernels (2026-12-02), every rank of the 6x128 GPT keeps 0.3
// MB of it: dv-z1's runs measured 0.25-0.27 MB more than dv-p5's on every GPT row below tp 8
// (0.13 at tp 2), and the pipelines at 8 ranks read -5.0..-5.8% under without it.
double gpt_scratch_b(const ModelSpec& m, int tp, int64_t rows, bool blocks, bool head);

struct StepBasics {
  int n = 1;               // the job's ranks
  int node_n = 1;          // of them on one node
  double slow = 1;         // compute slowdown of the ranks that compute at once
  double two = 1;          // the slowdown at (up to) two ranks, which the links were calibrated with
  double comm_slow = 1;    // communication slowdown beyond those two ranks
  std::string family;      // optimizer_family of the run's optimizer
  double opt_states = 0;   // its state arrays per parameter
  const Cluster* cluster = nullptr;
  // Seconds of one optimizer step over `params` parameters (the calibrated rate at that size).
  double optimizer_step_s(double params) const;
};

Prediction simulate_data_parallel(const ModelSpec& m, const Layout& l, const Cluster& c, int64_t batch,
                                  const StepBasics& b);
Prediction simulate_model_parallel(const ModelSpec& m, const Layout& l, const Cluster& c, int64_t batch,
                                   double memory_limit_b, const StepBasics& b);

}  // namespace dtrain::plan::sim

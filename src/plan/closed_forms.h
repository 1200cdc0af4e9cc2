// plan/closed_forms.h — the textbook formulas of parallel training, as plain functions.
//
// Contract
// - Collectives (alpha-beta-gamma, coll/cost_model.h's CostParams: alpha s/message, beta s/byte
//   moved, gamma s/byte reduced; n = bytes of the buffer, p = ranks):
//     ring all-reduce          2(p-1)a + 2(p-1)/p n b + (p-1)/p n g
//     tree all-reduce          binomial reduce then broadcast: 2 L (a + n b) + L n g, L = ceil(log2 p)
//     recursive doubling       L (a + n b + n g)
//     halving/doubling         2 L a + 2(p-1)/p n b + (p-1)/p n g          (Rabenseifner)
//     ring reduce-scatter      (p-1)a + (p-1)/p n (b + g);  ring all-gather (p-1)a + (p-1)/p n b
//     hierarchical all-reduce  reduce-scatter inside each node of g ranks (intra params), ring
//                              all-reduce of n/g bytes across the nodes (inter params), all-gather
//                              inside each node.
// - ZeRO (Rajbhandari et al.): per-parameter bytes w (weights), gr (gradients), k (optimizer
//   state); stage 0 keeps (w+gr+k)P per rank, stage 1 shards k, stage 2 shards gr and k, stage 3
//   shards everything over N data-parallel ranks. zero_bytes(stage, P, N, w, gr, k) is that
//   figure; with w = gr = 2, k = 12 stage 3 is the paper's 16P/N. Traffic per rank per step in
//   elements: stages 0-2 2P(N-1)/N (all-reduce = reduce-scatter + all-gather), stage 3
//   3P(N-1)/N (parameters gathered in forward and again in backward).
// - Activation memory of one transformer block, in elements, for sequence s, micro-batch b,
//   width h, heads a and tensor-parallel degree t (dtrain's fp32 blocks, no dropout; see
//   block_activation_elems for the count): 4sbh + (12sbh + a s^2 b)/t; with full recompute only
//   the block input sbh is kept. korthikanti_bytes is the published fp16 figure
//   sbh(34 + 5as/h) for reference.
// - Pipeline bubble (idle/total): gpipe and 1f1b (p-1)/(m+p-1); interleaved with v chunks
//   r/(1+r), r = (p-1)/(m v).
// - Amdahl S(N) = 1/(s + (1-s)/N), Gustafson S(N) = N - s(N-1), s the serial fraction; the
//   fits return the least-squares serial fraction of measured (N, speedup) points (clamped to
//   [0, 1]), both linear in s so closed form.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coll/cost_model.h"

namespace dtrain::plan {

double ring_allreduce_s(int p, double bytes, const CostParams& c);
double tree_allreduce_s(int p, double bytes, const CostParams& c);
double recursive_doubling_allreduce_s(int p, double bytes, const CostParams& c);
double halving_doubling_allreduce_s(int p, double bytes, const CostParams& c);
double ring_reduce_scatter_s(int p, double bytes, const CostParams& c);
double ring_allgather_s(int p, double bytes, const CostParams& c);
// nodes x per_node ranks; intra within a node, inter between nodes.
double hierarchical_allreduce_s(int nodes, int per_node, double bytes, const CostParams& intra,
                                const CostParams& inter);
// The cheapest of ring, tree, halving/doubling (what an auto choice would approach).
double best_allreduce_s(int p, double bytes, const CostParams& c);

struct ZeroBytes {
  double weights = 0, grads = 0, optimizer = 0;
  double total() const { return weights + grads + optimizer; }
};
ZeroBytes zero_bytes(int stage, double params, int n, double w, double gr, double k);
// Elements each rank sends per step for the data-parallel gradient sync under `stage`.
double zero_traffic_elems(int stage, double params, int n);

double block_activation_elems(int64_t s, int64_t b, int64_t h, int64_t a, int t, bool recompute);
double korthikanti_bytes(int64_t s, int64_t b, int64_t h, int64_t a);

double bubble_fraction(const std::string& schedule, int p, int m, int v);

double amdahl_speedup(double serial, double n);
double gustafson_speedup(double serial, double n);
// points: (N, measured speedup). Need at least one point with N > 1, else InvalidArgument.
double fit_amdahl(const std::vector<std::pair<double, double>>& points);
double fit_gustafson(const std::vector<std::pair<double, double>>& points);

// Least squares through the origin of y on two variables, y ~ a x1 + b x2, from the sums of
// x1^2, x1 x2, x2^2, x1 y and x2 y (the normal equations): {a, b}, or nullopt where the points
// hold x1 and x2 in nearly one proportion (det <= min_independence x x1^2 x x2^2 summed, or
// either variable absent). Shared by the calibration's memory fit and the attention's rate.
std::optional<std::pair<double, double>> fit_two_through_origin(double x11, double x12, double x22, double x1y, double x2y,
                                                                double min_independence);

}  // namespace dtrain::plan

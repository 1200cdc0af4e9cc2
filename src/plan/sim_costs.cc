#include "plan/sim_costs.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/calibrate_units.h"
#include "plan/closed_forms.h"

namespace dtrain::plan::sim {

// How much slower a figure measured with `measured` ranks on the node runs with node_ranks:
// the slowdown curve's ratio.
double beyond(const Cluster& c, int node_ranks, int measured) {
  return std::max(1.0, c.compute_slowdown(node_ranks) / c.compute_slowdown(std::min(measured, node_ranks)));
}

// Each transfer is costed with its link's beta at its own size (Cluster::link_at: the
// calibrated all-reduce and exchange figures by size), not one large-buffer beta.
// node_ranks: the job's ranks on the node; those beyond the ranks a figure was measured with
// slow it (beyond).
// Training computes between collectives: a group measured back to back costs its calibrated
// gap factor more (LinkSizes::gap_factor_by_ranks; 1 where the calibration has none).
namespace {

double gap_factor(const Cluster& c, int ranks) {
  auto it = c.intra_sizes.gap_factor_by_ranks.find(ranks);
  return it == c.intra_sizes.gap_factor_by_ranks.end() ? 1.0 : it->second;
}

}  // namespace

double allreduce_s(const Cluster& c, Group g, double bytes, int node_ranks, bool gapped) {
  if (g.size <= 1 || bytes <= 0) return 0;
  int rpn = c.ranks_per_node > 0 ? c.ranks_per_node : g.size * g.stride;
  int per_node = std::clamp(rpn / g.stride, 1, g.size);
  if (per_node >= g.size) {
    // Measured at this many ranks: the time itself, oversubscription included.
    const double t = c.measured_allreduce_s(g.size, bytes);
    if (t >= 0) return t * (gapped ? gap_factor(c, g.size) : 1.0) * beyond(c, node_ranks, g.size);
    return best_allreduce_s(g.size, bytes, c.link_at(false, bytes, false)) * beyond(c, node_ranks, 2);
  }
  return hierarchical_allreduce_s(g.size / per_node, per_node, bytes, c.link_at(false, bytes, false),
                                  c.link_at(true, bytes / per_node, false)) * beyond(c, node_ranks, 2);
}

double lockstep_refill_s(const Cluster& c, int node_ranks, double bytes) {
  if (node_ranks <= c.cores_per_node || c.cores_per_node < 1 || c.elementwise_bps <= 0) return 0;
  const double k = std::ceil(static_cast<double>(node_ranks) / c.cores_per_node);
  return k * k * bytes / c.elementwise_bps;
}

double window_allreduce_s(const Cluster& c, Group g, double bytes, int node_ranks, bool gapped) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const double t = g.stride == 1 ? c.measured_allreduce_window_s(g.size, bytes) : -1;
  if (t < 0) return allreduce_s(c, g, bytes, node_ranks, gapped);
  return t * (gapped ? gap_factor(c, g.size) : 1.0) * beyond(c, node_ranks, g.size);
}

// Reduce-scatter and all-gather of `bytes` (the whole buffer) in group g: measured at this
// many ranks on one node when the calibration has them (reducescatter_by_ranks,
// allgather_by_ranks), slowed as allreduce_s slows its figures; else the ring formula on the
// group's link. `measured` is the cluster's figure for the operation (-1: none), `ring` its
// formula.
namespace {

double half_collective_s(const Cluster& c, Group g, double bytes, int node_ranks,
                         double (Cluster::*measured)(int, double) const, double (*ring)(int, double, const CostParams&)) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const int rpn = c.ranks_per_node > 0 ? c.ranks_per_node : g.size * g.stride;
  const double t = std::clamp(rpn / g.stride, 1, g.size) >= g.size ? (c.*measured)(g.size, bytes) : -1;
  if (t >= 0) return t * gap_factor(c, g.size) * beyond(c, node_ranks, g.size);
  return ring(g.size, bytes, c.link_at(g.size * g.stride > rpn, bytes, false)) * beyond(c, node_ranks, 2);
}

}  // namespace

double reduce_scatter_s(const Cluster& c, Group g, double bytes, int node_ranks) {
  return half_collective_s(c, g, bytes, node_ranks, &Cluster::measured_reducescatter_s, &ring_reduce_scatter_s);
}
double allgather_s(const Cluster& c, Group g, double bytes, int node_ranks) {
  return half_collective_s(c, g, bytes, node_ranks, &Cluster::measured_allgather_s, &ring_allgather_s);
}

// The link a group's transfer of `bytes` uses: inside a node or between nodes; p2p for
// point-to-point sends (the exchange figures), else the collective ones.
CostParams link_of(const Cluster& c, Group g, double bytes, bool p2p) {
  int rpn = c.ranks_per_node > 0 ? c.ranks_per_node : g.size * g.stride;
  return c.link_at(g.size * g.stride > rpn, bytes, p2p);
}

std::optional<Pass> untimed_gpt_rate(const Cluster& c, const std::string& kind, const std::string& spec, double params,
                                     double items) {
  if (spec.rfind("gpt:", 0) != 0 || kind == "gpt_layernorm" || c.units.count(kind + "@" + spec) || items <= 0)
    return std::nullopt;
  // The unit of the timed one-block model that `kind` prices (the ZeRO-3 block is a block).
  const std::string unit_kind = kind == kZero3Block ? "gpt_block" : kind;
  std::vector<std::pair<double, double>> fwd, bwd;  // (parameters, seconds per work)
  const std::string prefix = kind + "@";
  for (auto it = c.units.lower_bound(prefix); it != c.units.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    const std::string timed = it->first.substr(prefix.size());
    if (timed.rfind("gpt:", 0) != 0) continue;
    const ModelSpec m = ModelSpec::parse(timed);
    const auto u = std::find_if(m.units.begin(), m.units.end(), [&](const Unit& x) { return x.kind == unit_kind; });
    if (u == m.units.end() || unit_work(*u) <= 0 || u->params <= 0) continue;
    const double w = items * unit_work(*u);
    const auto [f, b] = it->second.pass(timed, u->params, items, w);
    fwd.push_back({u->params, f / w});
    bwd.push_back({u->params, b / w});
  }
  if (fwd.empty() || params <= 0) return std::nullopt;
  std::sort(fwd.begin(), fwd.end());
  std::sort(bwd.begin(), bwd.end());
  // In log(parameters), flat beyond the ends (Cluster's beta_at).
  return Pass{beta_at(fwd, params, 0), beta_at(bwd, params, 0)};
}

// One unit's forward and backward seconds over `items`, before any oversubscription slowdown:
// the calibrated line of its kind (calibrate_units.h) at its work, a block's work split over
// tp ranks; without one, FLOPs at the GEMM rate plus its activations at the element-wise rate,
// backward twice forward.
Pass unit_pass(const Cluster& c, const Unit& u, double items, int tp, const std::string& spec) {
  const double split = u.block ? tp : 1;
  if (const UnitCost* uc = c.unit_for(u.kind, spec)) {
    const double w = items * unit_work(u) / split;
    const double params = u.params / split;
    // Unsplit, the unit's own timed points where it has them (UnitCost::pass); split, the fit.
    // A GPT shape not timed: the timed shapes' cost per work at these items.
    const std::optional<Pass> rate = untimed_gpt_rate(c, u.kind, spec, u.params, items);
    const auto [f, b] = rate            ? std::pair{rate->f * w, rate->b * w}
                        : split == 1 ? uc->pass(spec, params, items, w)
                                     : std::pair{uc->fwd.at(w, params), uc->bwd.at(w, params)};
    Pass p{f, b};
    // Every tp rank normalises the whole width (the block's two layernorms are replicated,
    // as in Megatron without sequence parallelism), so the share of them the split took off
    // comes back: (1 - 1/tp) of two layernorms over the block's output. At 8 ranks perf put
    // layernorm at 21% of the step's CPU; without this the 4- and 8-rank tp rows were
    // predicted 25% and 39% short.
    const UnitCost* ln = c.unit_for("gpt_layernorm", spec);
    if (u.block && tp > 1 && ln) {
      const double e = items * u.out_elems, share = 2 * (1 - 1.0 / tp);
      p.f += share * ln->fwd.at(e), p.b += share * ln->bwd.at(e);
    }
    return p;
  }
  const double f = u.fwd_flops * items / split / c.gemm_flops + 2 * kF * u.act_elems * items / c.elementwise_bps;
  return {f, 2 * f};
}

double StepBasics::optimizer_step_s(double params) const {
  return cluster->optimizer_s(params, cluster->optimizer_ns(family, params), optimizer_step_bytes(family));
}

}  // namespace dtrain::plan::sim

#include "plan/sim_costs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/calibrate_units.h"
#include "plan/closed_forms.h"
#include "tensor/gemm_small.h"

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

// Over tcp across hosts of per_node ranks, the hosts' hierarchy (coll/hierarchical.h): the
// shared memory each host's half runs on (the machine as calibrated, timed_on), and the
// link the per_node blocks of `bytes` cross at once, sharing the host's one link.
struct HostsHierarchy {
  CostParams within, across;
};
HostsHierarchy hosts_hierarchy(const Cluster& c, double bytes, int per_node) {
  const Cluster& host = c.timed_on ? *c.timed_on : c;
  HostsHierarchy h{host.link_at(false, bytes, false), c.link_at(true, bytes / per_node, false)};
  h.across.beta_s_per_byte *= per_node;
  return h;
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
  // Over tcp, a rank a host: one flat collective across the hosts. Several ranks a host: the
  // hosts' hierarchy (coll/hierarchical.h), a reduce-scatter and an all-gather within each
  // host over its shared memory (the machine as calibrated, timed_on), and between them
  // the per_node blocks all-reduced across the hosts at once, sharing the host's link.
  if (!c.shared_memory) {
    if (per_node <= 1) return best_allreduce_s(g.size, bytes, c.link_at(true, bytes, false)) * beyond(c, node_ranks, 2);
    const HostsHierarchy h = hosts_hierarchy(c, bytes, per_node);
    return hierarchical_allreduce_s(g.size / per_node, per_node, bytes, h.within, h.across) * beyond(c, node_ranks, 2);
  }
  return hierarchical_allreduce_s(g.size / per_node, per_node, bytes, c.link_at(false, bytes, false),
                                  c.link_at(true, bytes / per_node, false)) * beyond(c, node_ranks, 2);
}

double lockstep_refill_s(const Cluster& c, int node_ranks, double bytes) {
  if (node_ranks <= c.cores_per_node || c.cores_per_node < 1 || c.elementwise_bps <= 0) return 0;
  const double k = std::ceil(static_cast<double>(node_ranks) / c.cores_per_node);
  return k * k * bytes / c.elementwise_bps;
}

double tcp_message_cpu_s_per_byte(const Cluster& c, int node_ranks, double bytes) {
  if (c.shared_memory || node_ranks <= c.cores_per_node || c.cores_per_node < 1 || bytes <= 0) return -1;
  const double t = c.measured_allreduce_s(node_ranks, bytes);
  if (t <= 0) return -1;
  const double p = node_ranks;
  // The reduce-scatter half sums (p - 1) / p of the buffer on each rank: two operands read
  // and one written, in the element-wise calibration's measure (bytes read and written).
  const double sums_s = c.elementwise_bps > 0 ? (p - 1) * bytes * 3 / c.elementwise_bps : 0;
  const double cpu_s = t * c.cores_per_node - sums_s;
  return cpu_s > 0 ? cpu_s / (2 * (p - 1) * bytes) : -1;
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
  // Over tcp across hosts of several ranks: the hosts' hierarchy (coll/hierarchical.h), the
  // half within each host on its shared memory, then the 1/L blocks' half across the hosts
  // with the host's L flows sharing its link (as allreduce_s prices the all-reduce's).
  const int per_node = std::clamp(rpn / g.stride, 1, g.size);
  if (!c.shared_memory && per_node > 1 && per_node < g.size && g.size % per_node == 0) {
    const HostsHierarchy h = hosts_hierarchy(c, bytes, per_node);
    return (ring(per_node, bytes, h.within) + ring(g.size / per_node, bytes / per_node, h.across)) * beyond(c, node_ranks, 2);
  }
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
CostParams link_of(const Cluster& c, Group g, double bytes, bool p2p, bool one_way) {
  int rpn = c.ranks_per_node > 0 ? c.ranks_per_node : g.size * g.stride;
  return c.link_at(g.size * g.stride > rpn, bytes, p2p, one_way);
}

namespace {

// A timed GPT shape of one unit kind, per item: its work (unit_work), the part of it that is
// not attention (dense: less the 4 x head-dim FLOPs of each attention probability), its
// attention probabilities and head dimension; and its seconds over the items asked for.
struct TimedShape {
  double params = 0, width = 0, work = 0, dense = 0, scores = 0, head_dim = 0;
  Pass t;
};

TimedShape shape_of(const ModelSpec& m, const Unit& u) {
  TimedShape x;
  x.params = u.params, x.width = static_cast<double>(m.width), x.work = unit_work(u), x.scores = u.score_elems;
  x.head_dim = static_cast<double>(m.width) / static_cast<double>(std::max<int64_t>(1, m.heads));
  x.dense = x.work - 4 * x.head_dim * x.scores;
  return x;
}

// Seconds per attention probability, tau0 + tau1 x head_dim, in one direction (dir picks f or
// b): least squares over every pair of timed shapes of one width whose probabilities differ
// (contexts or heads). Two shapes of one width share the dense rate rho, so
//   T_L - T_Q r = tau0 (S_L - S_Q r) + tau1 (S_L hd_L - S_Q hd_Q r),  r = dense_L / dense_Q,
// per item. With pairs of a single head dimension, tau1 = 0. nullopt: no such pair.
std::optional<std::pair<double, double>> attention_rate(const std::vector<TimedShape>& shapes, double Pass::*dir) {
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  std::vector<double> dims;
  for (size_t i = 0; i < shapes.size(); ++i)
    for (size_t j = i + 1; j < shapes.size(); ++j) {
      const TimedShape &L = shapes[i], &Q = shapes[j];
      if (L.width != Q.width || Q.dense <= 0) continue;
      const double r = L.dense / Q.dense, x1 = L.scores - Q.scores * r, x2 = L.scores * L.head_dim - Q.scores * Q.head_dim * r;
      if (std::abs(x1) < 1e-9 * (L.scores + Q.scores) && std::abs(x2) < 1e-9 * (L.scores * L.head_dim + Q.scores * Q.head_dim)) continue;
      const double y = L.t.*dir - Q.t.*dir * r;
      a11 += x1 * x1, a12 += x1 * x2, a22 += x2 * x2, b1 += x1 * y, b2 += x2 * y;
      for (double d : {L.head_dim, Q.head_dim})
        if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
    }
  if (a11 <= 0) return std::nullopt;
  if (dims.size() >= 2)
    if (const auto tau = fit_two_through_origin(a11, a12, a22, b1, b2, 1e-6)) return tau;
  // One head dimension (x2 = hd x1 in every pair): one figure per probability, tau1 = 0.
  return std::pair{b1 / a11, 0.0};
}

}  // namespace

std::optional<Pass> untimed_gpt_rate(const Cluster& c, const std::string& kind, const std::string& spec, double params,
                                     double items) {
  if (spec.rfind("gpt:", 0) != 0 || kind == "gpt_layernorm" || c.units.count(kind + "@" + spec) || items <= 0)
    return std::nullopt;
  // The unit of the timed one-block model that `kind` prices (the ZeRO-3 block is a block).
  const std::string unit_kind = kind == kZero3Block ? "gpt_block" : kind;
  auto unit_in = [&](const ModelSpec& m) {
    return std::find_if(m.units.begin(), m.units.end(), [&](const Unit& x) { return x.kind == unit_kind; });
  };
  std::vector<TimedShape> shapes;
  const std::string prefix = kind + "@";
  for (auto it = c.units.lower_bound(prefix); it != c.units.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    const std::string timed = it->first.substr(prefix.size());
    if (timed.rfind("gpt:", 0) != 0) continue;
    const ModelSpec m = ModelSpec::parse(timed);
    const auto u = unit_in(m);
    if (u == m.units.end() || unit_work(*u) <= 0 || u->params <= 0) continue;
    TimedShape x = shape_of(m, *u);
    const auto [f, b] = it->second.pass(timed, u->params, items, items * x.work);
    x.t = {f / items, b / items};
    shapes.push_back(x);
  }
  const ModelSpec target_model = ModelSpec::parse(spec);
  const auto target_unit = unit_in(target_model);
  if (shapes.empty() || params <= 0 || target_unit == target_model.units.end()) return std::nullopt;
  const TimedShape target = shape_of(target_model, *target_unit);
  // Per direction: the attention's rate where the shapes tell it (else none: every shape's
  // whole work at one rate, as before), the dense rate of each timed width after it,
  // interpolated in log(parameters) (Cluster's beta_at: flat beyond the ends), and the
  // target's seconds back as seconds per unit of its work.
  auto rate = [&](double Pass::*dir) {
    const auto tau = attention_rate(shapes, dir);
    auto per_prob = [&](double hd) { return tau ? std::max(0.0, tau->first + tau->second * hd) : 0.0; };
    std::map<double, std::pair<double, int>> by_params;  // parameters -> (sum of rho, shapes)
    for (const TimedShape& x : shapes) {
      const double base = tau ? x.dense : x.work;
      if (base <= 0) continue;
      auto& [sum, count] = by_params[x.params];
      sum += std::max(0.0, x.t.*dir - x.scores * per_prob(x.head_dim)) / base, ++count;
    }
    std::vector<std::pair<double, double>> rho;
    for (const auto& [p, sc] : by_params) rho.push_back({p, sc.first / sc.second});
    const double dense = beta_at(rho, params, 0) * (tau ? target.dense : target.work);
    return target.work > 0 ? (dense + target.scores * per_prob(target.head_dim)) / target.work : 0.0;
  };
  return Pass{rate(&Pass::f), rate(&Pass::b)};
}

// The layer's shape is what its timed passes depend on: (inputs, outputs, last). Every timed
// model's layers are read, the kind's points for each filed under (model, parameters); a
// model holding two layers of one parameter count (784-1024-1024-1024-10) files both under
// one key, and both are then of one shape unless transposed, which is taken as the same.
std::optional<Pass> untimed_mlp_layer(const Cluster& c, const Unit& u, const std::string& spec, double items) {
  const auto kind = c.units.find("mlp_layer");
  if (spec.rfind("mlp:", 0) != 0 || u.kind != "mlp_layer" || items <= 0 || kind == c.units.end()) return std::nullopt;
  const UnitCost& layers = kind->second;
  if (layers.timed.count({spec, u.params}) || c.units.count("mlp_layer@" + spec)) return std::nullopt;
  const ModelSpec model = ModelSpec::parse(spec);
  const bool last = !model.units.empty() && model.units.back().name == u.name;
  // Where a layer of its role sits among the timed ones: a hidden layer by its narrower side,
  // a last layer (its outputs the classes) by its parameters.
  auto coordinate = [&](const Unit& x) { return last ? x.params : std::min(in_elems(x), x.out_elems); };
  std::map<double, std::pair<Pass, int>> by_coordinate;  // of the same role: (sum of per-work rates, layers)
  for (const auto& [key, points] : layers.timed) {
    if (key.first.rfind("mlp:", 0) != 0) continue;
    const ModelSpec timed = ModelSpec::parse(key.first);
    for (size_t i = 0; i < timed.units.size(); ++i) {
      const Unit& t = timed.units[i];
      if (t.params != key.second || (i + 1 == timed.units.size()) != last) continue;
      const double work = items * unit_work(t);
      const auto [f, b] = layers.pass(key.first, key.second, items, work);
      if (t.out_elems == u.out_elems && in_elems(t) == in_elems(u)) return Pass{f, b};
      auto& [sum, count] = by_coordinate[coordinate(t)];
      sum.f += f / work, sum.b += b / work, ++count;
      break;  // one rate per key (a second layer under it is the same shape)
    }
  }
  if (by_coordinate.empty()) return std::nullopt;
  std::vector<std::pair<double, double>> fwd, bwd;
  for (const auto& [x, sc] : by_coordinate) fwd.push_back({x, sc.first.f / sc.second}), bwd.push_back({x, sc.first.b / sc.second});
  const double work = items * unit_work(u);
  return Pass{beta_at(fwd, coordinate(u), 0) * work, beta_at(bwd, coordinate(u), 0) * work};
}

// One unit's forward and backward seconds over `items`, before any oversubscription slowdown:
// the calibrated line of its kind (calibrate_units.h) at its work, a block's work split over
// tp ranks (an untimed GPT shape or MLP layer: untimed_gpt_rate, untimed_mlp_layer); without
// one, FLOPs at the GEMM rate plus its activations at the element-wise rate, backward twice
// forward.
Pass unit_pass(const Cluster& c, const Unit& u, double items, int tp, const std::string& spec) {
  const double split = u.block ? tp : 1;
  if (const UnitCost* uc = c.unit_for(u.kind, spec)) {
    // An MLP layer of a model not timed: the timed layers of its shape or role.
    if (const std::optional<Pass> layer = untimed_mlp_layer(c, u, spec, items)) return *layer;
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

double products_scratch_b(int64_t rows, const std::vector<std::pair<int64_t, int64_t>>& products) {
  size_t fwd = 0, wgrad = 0;
  for (const auto& [out, in] : products) {
    fwd = std::max(fwd, gemm_small_scratch_bytes(false, true, rows, out, in));
    wgrad = std::max(wgrad, gemm_small_scratch_bytes(true, false, out, in, rows));
  }
  return static_cast<double>(fwd + wgrad);
}

double StepBasics::optimizer_step_s(double params) const {
  return cluster->optimizer_s(params, cluster->optimizer_ns(family, params), optimizer_step_bytes(family));
}

}  // namespace dtrain::plan::sim

#include "plan/simulator.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/error.h"
#include "coll/config.h"
#include "nn/transformer.h"
#include "parallel/fedavg.h"
#include "parallel/model_parallel.h"
#include "parallel/pipeline.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/share_grad.h"
#include "plan/closed_forms.h"
#include "tensor/gemm_small.h"

namespace dtrain::plan {

namespace {

constexpr double kF = 4;  // bytes per float
// The largest call the shared-memory slots carry by default (DTRAIN_SHM_SLOTS_BYTES).
constexpr double kShmSlotsBytes = static_cast<double>(kDefaultShmSlotsBytes);
// The staging the executors keep beside their copies of the model where their messages go
// through a shared-memory path: 0.5 MB, measured for gossip's exchange and the slot
// all-reduce (not traced).
constexpr double kStagingBytes = 512.0 * 1024;

// A group of g ranks whose members are `stride` world ranks apart: the link it uses and, when
// it spans nodes, the hierarchical all-reduce.
struct Group {
  int size = 1, stride = 1;
};

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
double gap_factor(const Cluster& c, int ranks) {
  auto it = c.intra_sizes.gap_factor_by_ranks.find(ranks);
  return it == c.intra_sizes.gap_factor_by_ranks.end() ? 1.0 : it->second;
}

double allreduce_s(const Cluster& c, Group g, double bytes, int node_ranks) {
  if (g.size <= 1 || bytes <= 0) return 0;
  int rpn = c.ranks_per_node > 0 ? c.ranks_per_node : g.size * g.stride;
  int per_node = std::clamp(rpn / g.stride, 1, g.size);
  if (per_node >= g.size) {
    // Measured at this many ranks: the time itself, oversubscription included.
    const double t = c.measured_allreduce_s(g.size, bytes);
    if (t >= 0) return t * gap_factor(c, g.size) * beyond(c, node_ranks, g.size);
    return best_allreduce_s(g.size, bytes, c.link_at(false, bytes, false)) * beyond(c, node_ranks, 2);
  }
  return hierarchical_allreduce_s(g.size / per_node, per_node, bytes, c.link_at(false, bytes, false),
                                  c.link_at(true, bytes / per_node, false)) * beyond(c, node_ranks, 2);
}

// Reduce-scatter and all-gather of `bytes` (the whole buffer) in group g: measured at this
// many ranks on one node when the calibration has them (reducescatter_by_ranks,
// allgather_by_ranks), slowed as allreduce_s slows its figures; else the ring formula on the
// group's link. `measured` is the cluster's figure for the operation (-1: none), `ring` its
// formula.
double half_collective_s(const Cluster& c, Group g, double bytes, int node_ranks,
                         double (Cluster::*measured)(int, double) const, double (*ring)(int, double, const CostParams&)) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const int rpn = c.ranks_per_node > 0 ? c.ranks_per_node : g.size * g.stride;
  const double t = std::clamp(rpn / g.stride, 1, g.size) >= g.size ? (c.*measured)(g.size, bytes) : -1;
  if (t >= 0) return t * gap_factor(c, g.size) * beyond(c, node_ranks, g.size);
  return ring(g.size, bytes, c.link_at(g.size * g.stride > rpn, bytes, false)) * beyond(c, node_ranks, 2);
}
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

// One unit's forward and backward seconds over `items`, before any oversubscription slowdown:
// the calibrated line of its kind (calibrate_units.h) at its work, a block's work split over
// tp ranks; without one, FLOPs at the GEMM rate plus its activations at the element-wise rate,
// backward twice forward.
struct Pass {
  double f = 0, b = 0;
};
Pass unit_pass(const Cluster& c, const Unit& u, double items, int tp, const std::string& spec) {
  const double split = u.block ? tp : 1;
  if (const UnitCost* uc = c.unit_for(u.kind, spec)) {
    const double w = items * unit_work(u) / split;
    const double params = u.params / split;
    // Unsplit, the unit's own timed points where it has them (UnitCost::pass); split, the fit.
    const auto [f, b] = split == 1 ? uc->pass(spec, params, items, w) : std::pair{uc->fwd.at(w, params), uc->bwd.at(w, params)};
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

// Tensor-parallel blocks timed in place (Cluster::tp_blocks, plan/calibrate_tp.h) correct the
// split formula: for the timed block of this degree whose shape is nearest, the ratio of each
// timed point to what the formula gives for that point (unit_pass at its items, slowed by
// the p ranks it ran with, plus its two all-reduces per direction at p ranks), interpolated
// in items (flat beyond the points). The formula's block (compute and all-reduces) is scaled
// by it, so what it adds to the formula -- the replicated work the split misses, the waits at
// each all-reduce, ranks beyond the cores scheduled again at every call -- carries over to
// other item counts, other shapes and layouts where tp ranks share the node with others.
// (Without it, the 6x128 GPT at tp 2 / 4 / 8 on 2 cores was predicted 20 / 22 / 36% short.)
struct TpRatio {
  double f = 1, b = 1;
};
// The ratio of a timed figure's points to the formula for them: unit_pass at each point's
// items, slowed by the `ranks` it was timed among (all computing at once), plus its two
// all-reduces per direction over groups of `tp` with that many ranks on the node;
// interpolated in items, flat beyond the points.
TpRatio figure_ratio(const Cluster& c, const ModelSpec& m, double items, const TpBlockFigure& fig, int tp, int ranks) {
  // The model's own block when the shape is the timed one (the same cost line), else the
  // timed shape's.
  const bool same = fig.heads == m.heads && fig.width == m.width && fig.context == m.context;
  const ModelSpec one = same ? m : ModelSpec::parse(gpt_block_spec(fig.heads, fig.width, fig.context));
  const Unit& blk = one.units[1];
  const double slow = c.compute_slowdown(c.ranks_on_node(ranks));
  std::vector<std::pair<double, TpRatio>> at;
  for (const TpBlockPoint& pt : fig.points) {
    const double n = static_cast<double>(pt.items);
    const Pass ps = unit_pass(c, blk, n, tp, one.unit_spec);
    const double ar = 2 * allreduce_s(c, Group{tp, 1}, n * fig.context * fig.width * kF, c.ranks_on_node(ranks));
    const double pf = ps.f * slow + ar, pb = ps.b * slow + ar;
    if (pf > 0 && pb > 0) at.push_back({n, {pt.fwd_s / pf, pt.bwd_s / pb}});
  }
  if (at.empty()) return {};
  if (items <= at.front().first) return at.front().second;
  for (size_t i = 1; i < at.size(); ++i)
    if (items <= at[i].first) {
      const double w = (items - at[i - 1].first) / (at[i].first - at[i - 1].first);
      return {at[i - 1].second.f + w * (at[i].second.f - at[i - 1].second.f),
              at[i - 1].second.b + w * (at[i].second.b - at[i - 1].second.b)};
    }
  return at.back().second;
}

// job_ranks: the whole job's ranks. Where they outnumber the node's cores, a tp block's waits
// are set by that crowding, not by its own degree alone: every f/g all-reduce waits until its
// partners are scheduled among all the job's ranks. Best, the block of this degree timed
// among the job's ranks (`bench tp-blocks -n R --tp T`: R / T groups at once, as a hybrid
// layout runs them); else (older files) the block timed at the job's rank count (the largest
// timed degree up to it), applied to this degree's formula. Measured on 2 cores, hybrid dp2
// tp2 pp2 at 8 ranks: 90.3 ms, predicted 106.6 with the 8-rank figure and 68.5 with the tp-2
// one (docs/PLANNER.md, eighteenth session).
TpRatio tp_block_ratio(const Cluster& c, const ModelSpec& m, double items, int tp, int job_ranks) {
  if (tp <= 1) return {};
  const int on_node = c.ranks_on_node(job_ranks);
  if (on_node > c.cores_per_node && on_node > tp) {
    if (const TpBlockFigure* crowd = c.tp_block_for(m.heads, m.width, m.context, tp, on_node))
      return figure_ratio(c, m, items, *crowd, tp, on_node);
    for (int d = on_node; d > tp; --d)
      if (const TpBlockFigure* fig = c.tp_block_for(m.heads, m.width, m.context, d)) return figure_ratio(c, m, items, *fig, d, d);
  }
  const TpBlockFigure* fig = c.tp_block_for(m.heads, m.width, m.context, tp);
  return fig ? figure_ratio(c, m, items, *fig, tp, tp) : TpRatio{};
}

// Cut the units into `pieces` contiguous pieces as the executor does for --balance flops
// (parallel/pipeline.h balanced_partition over parallel/model_parallel.h gpt_flops_costs: the
// least possible largest piece); returns the first unit of each piece and the end. (An
// approximation of its own cut the 2-stage interleaved pipeline differently: 4 blocks on one
// stage where the executor put 3, and its memory was predicted 33% high.)
std::vector<int> balance(const ModelSpec& m, int pieces) {
  const int n = static_cast<int>(m.units.size());
  DT_CHECK(pieces <= n, InvalidArgument, pieces << " pipeline pieces but the model has " << n
                                                << " units: use fewer stages or virtual stages");
  return balanced_partition(gpt_flops_costs(GptConfig::parse(m.spec, 65)), pieces);
}

}  // namespace

Prediction simulate(const ModelSpec& m, const Layout& l, const Cluster& c, int64_t batch, double memory_limit_b) {
  const std::string& s = l.strategy;
  DT_CHECK(l.dp >= 1 && l.tp >= 1 && l.pp >= 1 && l.micro >= 1 && l.virtual_stages >= 1, InvalidArgument,
           "layout " << l.describe() << ": every degree must be >= 1");
  bool model_parallel = s == "tp" || s == "pp" || s == "zero" || s == "hybrid";
  DT_CHECK(!model_parallel || m.gpt, InvalidArgument, "--strategy " << s << " needs the GPT (--model gpt:...)");
  DT_CHECK((l.tp == 1 && l.pp == 1) || m.gpt, InvalidArgument, "tp and pp need the GPT (--model gpt:...)");
  DT_CHECK(!m.gpt || m.heads % l.tp == 0, InvalidArgument, "tp " << l.tp << " must divide heads " << m.heads);
  DT_CHECK(l.zero < 3 || (l.tp == 1 && l.pp == 1), InvalidArgument, "ZeRO-3 needs tp = pp = 1");
  const int n = l.ranks();
  // Oversubscription slows the ranks that COMPUTE AT THE SAME TIME: a rank waiting in the
  // transport sleeps (futex) and leaves its core to the others. Data-parallel workers all
  // compute at once; a ps server waits while its workers compute; a pipeline's stages
  // compute only part of the step (below: the slowdown at the average number of computing
  // ranks, solved by iterating the schedule simulation).
  const int computing = s == "ps" ? std::max(1, n - l.servers) : n;
  const double slow = c.compute_slowdown(c.ranks_on_node(computing));
  // Links were calibrated with two ranks on the node, so their alpha/beta already carry the
  // two-rank contention: communication slows only by what more ranks add beyond that.
  const double two = c.compute_slowdown(std::min(2, c.ranks_on_node(n)));
  const double comm_slow = std::max(1.0, c.compute_slowdown(c.ranks_on_node(n)) / two);
  const int node_n = c.ranks_on_node(n);
  // The optimizer's state arrays (AdamW m and v, SGD's momentum, none for plain SGD) and the
  // calibrated rate of its step at the size each rank steps.
  const std::string family = optimizer_family(l.optimizer, m.gpt);
  const double opt_states = optimizer_states(family);
  auto optimizer_step_s = [&](double params) {
    return c.optimizer_s(params, c.optimizer_ns(family, params), optimizer_step_bytes(family));
  };
  Prediction p;

  // Data-parallel strategies of the MLP (and single): each worker computes its share.
  if (!m.gpt) {
    int workers = s == "ps" ? n - l.servers : l.dp;
    DT_CHECK(workers >= 1, InvalidArgument, "ps needs more ranks than --servers");
    // fedavg's clients each train on the whole minibatch (fedavg.h); the others split it.
    const bool fed = s == "fedavg";
    double items = fed ? static_cast<double>(batch) : static_cast<double>(batch) / workers;
    // fedavg's concurrency is the sample's (below): its passes are priced alone here.
    const double pass_slow = fed ? 1.0 : slow;
    std::vector<double> bwd(m.units.size());
    double fwd = 0, bwd_total = 0;
    for (size_t i = 0; i < m.units.size(); ++i) {
      Pass ps = unit_pass(c, m.units[i], items, 1, m.unit_spec);
      fwd += ps.f * pass_slow;
      bwd[i] = ps.b * pass_slow;
      bwd_total += bwd[i];
    }
    p.compute_s = fwd + bwd_total;
    // The step around the units (mlp_step_work), when calibrated.
    const UnitCost* step = c.unit_for("mlp_step", m.unit_spec);
    if (step) {
      // The step less its layers' timed points: negative where the whole step ran faster
      // than its layers timed apart ("mlp_step_of_timed_layers", calibrate_compute.h), but never more than
      // the forward it comes before.
      const double around = step->pass(m.unit_spec, m.params(), items, items * mlp_step_work(m)).first * pass_slow;
      const double added = std::max(around, -fwd);
      p.compute_s += added;
      fwd += added;  // before backward: the batch and the loss come first
    }
    // Gathering the step's rows from the dataset: in the step line itself where it was timed
    // on random rows of a large dataset (Cluster::mlp_step_random_rows); for older files,
    // whose lines gathered the same few hot rows every pass, at the calibrated rate of random
    // rows out of memory. (perf of a 1-rank localsgd run at batch 64: 58 us a step in the
    // gather, of which that rate covered 25.)
    const double input_b = kF * items * in_elems(m.units.front());  // the step's gathered rows
    if (c.gather_bps > 0 && !(step && c.mlp_step_random_rows)) {
      const double gather = input_b / c.gather_bps * pass_slow;
      p.compute_s += gather;
      fwd += gather;
    }
    double P = m.params(), bytes = P * kF;
    // The optimizer's state: ddp's ZeRO 1-2 (fused into its all-reduce, parallel/zero.h)
    // keeps the rank's 1/N slice of it; a parameter server's workers run no optimizer (the
    // servers' slices are counted with their buffers below). Measured with --optimizer
    // momentum / adamw at 2 and 4 ranks, ddp held 0.47 / 1.41 MB of state where the whole
    // model's 0.94 / 1.88 had been predicted (+11..+30%).
    const double state_share = (s == "ddp" && l.zero >= 1 && workers > 1) ? 1.0 / workers : s == "ps" ? 0.0 : 1.0;
    p.weights_b = bytes, p.grads_b = bytes, p.optimizer_b = opt_states * bytes * state_share;
    // Activations: each unit's calibrated high-water heap bytes per item when the cluster has
    // them (else the closed form), plus the gathered input batch.
    double transient = 0;
    for (const auto& u : m.units) {
      const UnitCost* uc = c.unit_for(u.kind, m.unit_spec);
      if (uc && uc->has_memory()) {
        // The graph keeps every node's gradient until it is destroyed: a unit's footprint at
        // the end of backward is its whole high-water mark, not its forward share.
        p.activations_b += uc->peak_b(mem_elems(u)) * items;
      } else {
        p.activations_b += kF * u.act_elems * items;
      }
    }
    p.activations_b += transient + input_b;
    // The small-batch products' packing scratch (tensor/gemm_small.h), which a rank's thread
    // keeps from its first step on: the largest forward's and the largest weight gradient's
    // (a bound: the two share one of their buffers). Counted whatever the CPU, so a plan reads
    // the same everywhere; where no AVX-512 runs them it is a few hundred KiB too many.
    const int64_t rows = static_cast<int64_t>(std::ceil(items));
    size_t fwd_scratch = 0, wgrad_scratch = 0;
    for (const auto& u : m.units) {
      if (u.kind != "mlp_layer") continue;
      const auto d_out = static_cast<int64_t>(u.out_elems), d_in = static_cast<int64_t>(in_elems(u));
      fwd_scratch = std::max(fwd_scratch, gemm_small_scratch_bytes(false, true, rows, d_out, d_in));
      wgrad_scratch = std::max(wgrad_scratch, gemm_small_scratch_bytes(true, false, d_out, d_in, rows));
    }
    p.activations_b += static_cast<double>(fwd_scratch + wgrad_scratch);
    p.optimizer_s = optimizer_step_s(P) * pass_slow;
    // The executors' own copies of the parameters (parallel/*.h): ddp's gradient and scratch
    // buffers (share_grad.h), localsgd's and gossip's gradient, gossip's mean and one inbox per
    // neighbour, fedavg's global model, gradient and sum plus each round's fresh optimizer
    // state, a ps worker's gradient and replies (servers hold their slice only). Each count is
    // one lower than fitted: the model's unused gradient buffer went (2026-11-27, -0.94 MB).
    const int degree = workers <= 2 ? 1 : 2;  // the ring
    double copies = 0;
    // (ddp keeps its one at one rank too: traced, the README's MLP at 1 rank held 23.8 MB
    // beyond weights, gradients and momentum, 2 x its 11.65 MB, one of them the model's unused
    // gradient; its ZeRO 1-2 step is fused into its all-reduce, zero.h: no padded or shard
    // buffers.)
    if (s == "ddp") copies = 1;
    else if (s == "localsgd") copies = 1;  // one model size beyond its gradient, measured
    // gossip: its mean, and two sets of inboxes of a model per neighbour (gossip.cc posts the
    // next step's receives into one set before it waits for the other's).
    else if (s == "gossip") copies = 1 + 2 * degree;
    else if (s == "fedavg") copies = 3;
    else if (s == "single") copies = 0;  // it steps its shard's gradient where it lies (threads.cc)
    // Beyond two ranks the all-reduce's ring keeps a receive buffer of the model's size
    // (measured: +1.4 copies from 2 to 4 ranks, flat from 4 to 8), except where it goes
    // through the shared-memory slots instead, which keep nothing of the model's size
    // (measured 4 and 8 ranks: exactly one copy less, 5.37 -> 4.43 MB): every rank on one
    // node and more ranks than cores, or with a core per rank from the size the calibration
    // saw the executors take them (coll/shm_direct.cc: only where the cores are close).
    // Gossip's neighbour exchange is not an all-reduce (its inboxes are counted above).
    const double call_b = s == "ddp" && l.bucket_mb > 0 ? std::min(bytes, l.bucket_mb * (1 << 20)) : bytes;
    const auto measured_slots = c.intra_sizes.allreduce_slots_from_by_ranks.find(workers);
    const bool slots = c.ranks_on_node(workers) >= workers && call_b <= kShmSlotsBytes &&
                       (c.ranks_on_node(workers) > c.cores_per_node ||
                        (measured_slots != c.intra_sizes.allreduce_slots_from_by_ranks.end() && call_b >= measured_slots->second));
    if (workers > 2 && s != "ps" && s != "single" && s != "gossip" && !slots && !(s == "ddp" && workers > 1 &&
                                                                                 c.ranks_on_node(workers) >= workers))
      copies += 1;
    // Through the slots, ddp's and localsgd's all-reduce keep one model-sized copy less than
    // the cross-memory path's scratch, and 0.5 MB besides (measured at 2 and 4 ranks, not
    // traced: the slot path's leased staging): ddp 5.08 -> 4.55 MB at 2 ranks.
    // ddp on one node keeps its gradient in a shared-memory window that the owners read in
    // place (data_parallel.h): no slot staging, no copy less; with its (default) fused ZeRO
    // the node also holds one shared copy of the parameters, counted on rank 0, the busiest
    // (measured 2 / 4 / 8 ranks: 5.76 / 5.63 / 5.57 MB for the 0.94 MB MLP).
    const bool ddp_window = s == "ddp" && workers > 1 && c.ranks_on_node(workers) >= workers;
    const bool slot_ar = slots && workers > 1 && (s == "localsgd" || (s == "ddp" && !ddp_window));
    if (slot_ar) copies -= 1;
    if (ddp_window && l.zero > 0) copies += 1;
    p.buffers_b = copies * bytes + (slot_ar ? kStagingBytes : 0);
    // gossip's heap holds 0.50 MB more than its copies at 2, 4 and 8 ranks alike (measured,
    // not traced; the size of a 512 KiB staging buffer for its model-sized isend/irecv).
    if (s == "gossip" && workers > 1) p.buffers_b += kStagingBytes;
    if (s == "ps") {
      // The reported memory is the busiest rank's: a worker's gradient and replies, or a
      // server's (param_server.cc), in model-sized copies (the slice's share of them with
      // several servers) plus the transport's staging, as measured for the 0.94 MB MLP at 2 /
      // 4 / 8 ranks once every push's receive was posted before the worker could send it (by
      // timing, 7.07-9.89 MB at 4 ranks before):
      //   sync   w + 3: a push buffer per worker, the summed gradient, and 1 more (4.25 / 6.13 /
      //          9.89 MB); replies go out from the slice itself;
      //   async  2w + 1: a push and a reply snapshot per worker, and 1 more (4.80 / 8.01 /
      //          15.54 MB with the model's unused gradient, 0.94 MB more; 2 ranks +0.5 MB);
      //   and the optimizer's state of the slice (none for plain SGD).
      const double per_worker = l.ps_sync ? 1.0 : 2.0, fixed = l.ps_sync ? 3.0 : 1.0;
      const double server = (per_worker * workers + fixed + opt_states) * bytes / l.servers + kStagingBytes;
      const double worker = p.weights_b + p.grads_b + p.optimizer_b + p.activations_b + bytes;
      p.buffers_b = std::max(worker, server) - (p.weights_b + p.grads_b + p.optimizer_b + p.activations_b);
    }
    Group all{workers, 1};
    if (s == "ddp" && workers > 1) {
      if (node_n <= c.cores_per_node) {
        // One rank per core keeps its caches from step to step, except for the lines its peers
        // touched in the all-reduce: they read (N-1)/N of this rank's gradient in place (the
        // window), which the next backward takes back, and with the fused ZeRO wrote (N-1)/N
        // of the shared parameters, which the next forward fetches from their caches. Priced
        // at the calibrated hand-off rates (plan/calibrate_cache.h; older files: the 2-rank
        // exchange's per byte, both ways). Far-apart vCPUs: ddp's passes ~0.50 ms against
        // localsgd's 0.38; a 16-vCPU VM: the same. With more ranks than cores the co-located
        // ranks' own steps evict the caches anyway, which the slowdown curve charges.
        const double remote = (workers - 1.0) / workers * bytes;
        const double copy = c.link_at(false, remote * (l.zero > 0 ? 2 : 1), true).beta_s_per_byte;
        p.compute_s += remote * (c.handoff_write_s_per_byte >= 0 ? c.handoff_write_s_per_byte : copy);
        if (l.zero > 0) p.compute_s += remote * (c.handoff_read_s_per_byte >= 0 ? c.handoff_read_s_per_byte : copy);
      }
      // Walk the buckets in the order backward produces them (share_grad.h): units last
      // layer first; a bucket's all-reduce starts when its last unit is ready and the
      // previous all-reduce has finished.
      std::vector<GradRange> units;
      int64_t off = static_cast<int64_t>(P);
      for (int i = static_cast<int>(m.units.size()) - 1; i >= 0; --i) {
        off -= static_cast<int64_t>(m.units[i].params);
        units.push_back({off, static_cast<int64_t>(m.units[i].params)});
      }
      // With ZeRO 1-2 (parallel/zero.h, fused) each bucket's all-reduce also carries this
      // rank's optimizer step of its slice (1/N of the bucket's step), on the progress thread,
      // and nothing is left after the last bucket. Without a core beyond one per rank on the
      // node ddp does not overlap (data_parallel.h): the buckets go after backward, one by one.
      GradBuckets buckets(units, static_cast<size_t>(l.bucket_mb * (1 << 20)), 4);
      const bool overlap = node_n < c.cores_per_node;
      const double step_s = p.optimizer_s;  // the whole model's step on one rank
      double t = fwd, comm_end = t;
      std::vector<double> after;  // bucket costs, without overlap
      for (size_t k = 0; k < units.size(); ++k) {
        t += bwd[m.units.size() - 1 - k];
        int b = buckets.on_ready(units[k]);
        if (b < 0) continue;
        double len = static_cast<double>(buckets.buckets()[b].len) * kF;
        const double cost = allreduce_s(c, all, len, node_n) + (l.zero > 0 ? step_s / workers * len / bytes : 0);
        if (overlap) comm_end = std::max(comm_end, t) + cost;
        else after.push_back(cost);
      }
      for (double cost : after) comm_end = std::max(comm_end, t) + cost;
      p.comm_s = std::max(0.0, comm_end - t);
      p.dp_bytes = zero_traffic_elems(0, P, workers) * kF;
      if (l.zero > 0) {
        // ddp's ZeRO (parallel/zero.h) shards the optimizer state and steps inside comm_s
        // above. The memory is predicted as stage 0's: the MLP's terms were fitted as a whole
        // to plain-SGD runs (no optimizer state at all), where the one-state term stands for
        // memory found elsewhere; sharding it under-predicted the fused ZeRO rows by 17-20% at
        // 4-8 ranks (2026-11-25), whose heap equals stage 0's there. With Adam this
        // over-predicts by the state's (1 - 1/N) (measured 4 ranks: +6%).
        p.optimizer_s = 0;
      }
    } else if (s == "ps") {
      // Every worker pushes its gradient and pulls the parameters: the server posts all W
      // receives (and later all W sends) at once and each pair's copies run on the worker's
      // side as well, so the W transfers overlap; measured at W = 1 and 3 the push + pull took
      // about one exchange each way either way (W serial exchanges over-predicted W = 3 by 2.5x).
      double per_server = bytes / l.servers;
      const CostParams lk = c.link_at(false, per_server, true);
      p.comm_s = 2 * (lk.alpha_s + per_server * lk.beta_s_per_byte) * comm_slow;
      // ... unless the server's own side is longer: it copies each of the W pushes out of its
      // ring and each of the W replies into one, one after another on its thread (one copy
      // of an exchange each: half its beta at the server's total, W x the slice), while the
      // workers wait for it: alone on the node, so not slowed by their number.
      const double serial = 2 * workers * per_server * c.link_at(false, workers * per_server, true).beta_s_per_byte / 2;
      p.comm_s = std::max(p.comm_s, serial);
      // Workers run no optimizer. A synchronous server sums W pushes (12 bytes touched per
      // element) and steps its slice while they wait, alone on the node; an asynchronous one
      // (the default) applies each push as its own step and copies a reply snapshot (8 bytes
      // touched per element), one push at a time under its lock: W of them per step.
      p.optimizer_s = l.ps_sync ? (P * c.sgd_ns_per_param * 1e-9 + workers * P * 12 / c.elementwise_bps) / l.servers
                                : workers * (P * c.sgd_ns_per_param * 1e-9 + P * 8 / c.elementwise_bps) / l.servers;
      p.dp_bytes = 2 * bytes;
    } else if (s == "localsgd") {
      // Parameters averaged every sync_every steps.
      p.comm_s = allreduce_s(c, all, bytes, node_n) / std::max(1, l.sync_every);
      p.dp_bytes = zero_traffic_elems(0, P, workers) * kF / std::max(1, l.sync_every);
    } else if (fed) {
      // A round: the sample's m clients each train their share of the data at the whole
      // minibatch, client k on rank k mod workers, one after another on a rank; then one
      // all-reduce. Per minibatch of examples trained, a round costs
      //   (its wall time in client-steps) / m  client-steps.
      // Its wall time shares the cores among the ranks that still have clients to train: while
      // r of them run, each goes at 1 / slowdown(r); the least loaded finish first and the
      // rest speed up (for loads 2, 1, 1 on 2 cores: 1.58 until the two single ones are done,
      // then 1 more alone: 2.58 client-steps). The sample is the executor's own
      // (fedavg_sample), over the run's first rounds (at most 16) less the first when there
      // are more (the measurement leaves out the first, warm-up round: plan_measure.h
      // steady_step_s), as their total wall time over their total clients. The round's all-reduce is spread over every
      // client step of the round (with the default 10 clients per rank, tens of steps each):
      // under 1% of a step, left out of the time; the traffic is the round's.
      const int K = l.clients > 0 ? l.clients : 10 * workers;
      const int64_t rounds = std::clamp<int64_t>(l.rounds, 1, 16);
      double walls = 0, clients = 0;
      for (int64_t r = rounds > 1 ? 1 : 0; r < rounds; ++r) {
        const std::vector<int> sample = fedavg_sample(K, l.client_fraction, l.seed, r);
        std::vector<int> load(static_cast<size_t>(workers), 0);
        for (int k : sample) ++load[static_cast<size_t>(k % workers)];
        std::sort(load.begin(), load.end());
        double wall = 0, done = 0;
        for (size_t i = 0; i < load.size(); ++i) {
          // r ranks on c cores do not share them evenly: the scheduler keeps ceil(r / c) on
          // some core, and the round waits for the ranks there (traced at 8 ranks: five
          // clients on two cores took 30-41 ms each where 2.5 cores' worth is 26). Priced
          // as r / c, the 8-rank row read -26..-39% (2026-11-25).
          const int running = c.ranks_on_node(static_cast<int>(load.size() - i));
          const int cores = std::max(1, c.cores_per_node);
          const int busiest = running > cores ? (running + cores - 1) / cores * cores : running;
          wall += (load[i] - done) * c.compute_slowdown(busiest);
          done = load[i];
        }
        walls += wall;
        clients += static_cast<double>(sample.size());
      }
      const double factor = walls / clients;
      p.compute_s *= factor;
      p.optimizer_s *= factor;
      p.dp_bytes = zero_traffic_elems(0, P, workers) * kF;  // per round
    } else if (s == "gossip" && workers > 1) {
      // Ring gossip: parameters to each neighbour (one at 2 ranks, else both), one calibrated
      // two-way exchange each, and averaged with theirs. (Two exchanges at 2 ranks predicted
      // 0.117 ms of communication a step where 0.035 was measured: +14..+25% on the step.)
      const CostParams lk = c.link_at(false, bytes, true);
      p.comm_s = (degree * (lk.alpha_s + bytes * lk.beta_s_per_byte) + (degree + 1) * bytes / c.elementwise_bps) * comm_slow;
      p.dp_bytes = degree * bytes;
    }
    // More ranks than cores (gossip, ps): the cores run every rank's work in turn, so a step
    // takes at least the node's CPU work over its cores. Besides each rank's compute, that
    // work is copying: a message is copied twice (into the peer's ring, out of it: its share
    // of the 2-rank exchange's beta, taken at the node's working set, n x the model, where
    // the copies fall out of cache), gossip's mix streams deg + 2 models, and an asynchronous
    // server applies every push as its own optimizer step and copies a reply snapshot. The
    // rates at a core per rank do not see this: at 8 ranks on 2 cores the measured steps were
    // 2.2x (gossip) and 1.9x (ps) what they predicted, and perf put a third of the CPU in memcpy.
    if ((s == "gossip" || s == "ps") && workers > 1 && node_n > c.cores_per_node) {
      const double per_byte = c.link_at(false, bytes * node_n, true).beta_s_per_byte;
      const double penalty = c.compute_slowdown(node_n) * c.cores_per_node / node_n;
      double node_cpu = 0;
      if (s == "gossip") {
        // Since every receive is posted before its message can come (gossip.cc), a model
        // crosses at the exchange's own rate, not at the rate of the node's working set
        // (which priced the transport's extra heap copy: 4 and 8 ranks +47% after the change).
        // A rank's share of its degree exchanges is the exchange's time (each of the two
        // cores of a 2-rank exchange copies one message into a ring and one out). The mix
        // is element-wise (x = (x + inboxes) / (deg + 1): deg + 1 models read), as in the
        // step above; priced as deg + 2 copies at half the exchange's rate it over-predicted
        // the 4- and 8-rank rows by 46-48% (2026-11-25, dv-y3).
        const double msg_byte = c.link_at(false, bytes, true).beta_s_per_byte;
        const double own = (p.compute_s + p.optimizer_s) / slow;
        node_cpu = n * (own + degree * bytes * msg_byte + (degree + 1) * bytes / c.elementwise_bps);
      } else {
        const double own = p.compute_s / slow;
        const double server = l.ps_sync ? P * c.sgd_ns_per_param * 1e-9 + workers * P * 12 / c.elementwise_bps
                                        : workers * (P * c.sgd_ns_per_param * 1e-9 + bytes * per_byte / 2);
        node_cpu = workers * (own + 2 * bytes * per_byte) + server;
      }
      const double floor = node_cpu * node_n / n / c.cores_per_node * std::max(1.0, penalty);
      const double step = p.compute_s + p.comm_s + p.optimizer_s;
      if (floor > step) p.comm_s += floor - step;  // the copies, exposed
    }
    p.step_s = p.compute_s + p.comm_s + p.optimizer_s;
    return p;
  }

  // The GPT on dp x tp x pp: pipeline simulation over the executor's schedule.
  DT_CHECK(batch % (static_cast<int64_t>(l.dp) * l.micro) == 0, InvalidArgument,
           "batch " << batch << " must be a multiple of dp x micro-batches = " << l.dp * l.micro);
  const double items = static_cast<double>(batch) / l.dp / l.micro;  // per micro-batch
  const int V = l.pp > 1 ? l.virtual_stages : 1;
  std::string kind = l.pp > 1 ? l.schedule : "gpipe";
  PipeSchedule sched = make_schedule(kind, l.pp, l.micro, V);
  std::vector<int> cut = balance(m, l.pp * V);
  Group tpg{l.tp, 1}, ppg{l.pp, l.tp}, dpg{l.dp, l.tp * l.pp};
  const double act_bytes = items * m.context * m.width * kF;
  const double tp_ar = allreduce_s(c, tpg, act_bytes, node_n);
  // f, b: forward and backward compute before any slowdown; fc, bc: the tp all-reduces in them.
  struct Piece {
    double f = 0, b = 0, fc = 0, bc = 0, params = 0, act = 0, out = 0, transient = 0;
  };
  // dtrain's ZeRO-3 (parallel/zero3.h) re-runs each unit's forward in backward, keeping unit
  // inputs only: activation recompute, whatever --recompute says.
  const bool recompute = l.recompute || l.zero >= 3;
  const TpRatio tpr = tp_block_ratio(c, m, items, l.tp, l.dp * l.tp * l.pp);
  std::vector<Piece> pieces(cut.size() - 1);
  for (size_t k = 0; k + 1 < cut.size(); ++k) {
    Piece& pc = pieces[k];
    for (int u = cut[k]; u < cut[k + 1]; ++u) {
      const Unit& x = m.units[u];
      Pass ps = unit_pass(c, x, items, l.tp, m.unit_spec);
      const double rf = x.block ? tpr.f : 1, rb = x.block ? tpr.b : 1;
      const UnitCost* z3 = l.zero >= 3 && x.block ? c.unit_for(kZero3Block, m.unit_spec) : nullptr;
      if (z3) {
        // ZeRO-3's block as timed the way it runs (calibrate_units.h): a forward that records
        // nothing, and the re-run forward with the backward on the activations it just wrote.
        // (Charged as the stacked block's f + b + f, the 2- and 4-rank gpt-zero3 rows read
        // +17% and +15%: its 18.1 ms a block measured against ~21 predicted.)
        const auto [f, b] = z3->pass(m.unit_spec, x.params, items, items * unit_work(x));
        pc.f += f;
        pc.b += b;
      } else {
        pc.f += ps.f * rf;
        pc.b += ps.b * rb + (recompute && x.block ? ps.f * rf : 0);
      }
      pc.fc += x.block ? 2 * tp_ar * rf : 0;
      pc.bc += x.block ? 2 * tp_ar * rb : 0;
      pc.params += x.block ? x.params / l.tp : x.params;
      // Kept activations: calibrated heap bytes per item (a block's scaled by the closed
      // form's tp share), or the closed form; with recompute a block keeps its input only.
      const UnitCost* uc = c.unit_for(x.kind, m.unit_spec);
      const bool measured = uc && uc->has_memory();
      const double me = mem_elems(x);
      const double closed = x.block ? block_activation_elems(m.context, 1, m.width, m.heads, l.tp, recompute) : x.act_elems;
      if (measured && x.block && recompute) {
        // Inputs kept; in backward one unit at a time is re-run and holds its high-water mark.
        pc.act += kF * items * closed;
        pc.transient = std::max(pc.transient, uc->peak_b(me) * items);
      } else if (measured) {
        // A tensor-parallel block keeps much of what it keeps unsplit (the f/g copies, the
        // replicated LayerNorm and residual tensors and their gradients), and more than a
        // tp-1 block would: measured here on the 6x128 GPT (docs/PLANNER.md's gpt-tp rows),
        // the activation heap at tp 2 / 4 / 8 is 92.2 / 76.5 / 68.8 MB, i.e. 60.8 + 62.8 / tp,
        // against 106.3 calibrated at tp 1 (so the line's 123.6 at tp = 1 is 16% above it).
        // As shares of the calibrated footprint: 0.572 + 0.591 / tp from tp 2 on, exact at
        // the three rows. (A share of 0.65 + 0.35 / tp, which is 1 at tp 1, put them at -4.4 /
        // +3.0 / +7.9%, and tp 2 inside a pipeline, the gpt-hybrid-tp rows, at -4.9 / -7.6%.)
        constexpr double kTpKept = 0.572, kTpSplit = 0.591;
        const double share = x.block && l.tp > 1 ? kTpKept + kTpSplit / l.tp : 1.0;
        pc.act += uc->act_b(me) * items * share;
        // Gradients of the activations stay until the graph goes: the live micro-batch in
        // backward holds the whole high-water mark.
        pc.transient += (uc->peak_b(me) - uc->act_b(me)) * items * share;
      } else {
        pc.act += kF * items * closed;
      }
      pc.out = x.out_elems * items * kF;
      if (x.block) p.tp_bytes += 4 * 2 * (l.tp - 1.0) / l.tp * act_bytes * l.micro;
    }
  }
  // Per-rank memory: the worst stage. Activations are walked along the stage's own
  // instruction list (what the executor runs): a forward of (micro, chunk) adds that chunk's
  // kept activations, its backward frees them; the high-water mark of that sum, plus the
  // largest backward transient. (Chunks of an interleaved stage keep different amounts: the
  // largest chunk's times the micro-batches in flight over-predicted it by 13-18%.)
  // Plus parallel/pipeline.cc's own tensors, one micro-batch's activation (act_bytes) each:
  // the received input of every (micro, chunk) in flight on a piece that receives, kept for
  // its backward (the unit timings measure a unit's activations without its input), and the
  // receives posted ahead (kPostedAhead). Sent tensors are freed as each send completes.
  constexpr double kPostedAhead = 2;
  double stage_params = 0, stage_act = 0;
  for (int st = 0; st < l.pp; ++st) {
    double par = 0, transient = 0;
    for (int ch = 0; ch < V; ++ch) {
      const Piece& pc = pieces[sched.piece(st, ch)];
      par += pc.params, transient = std::max(transient, pc.transient);
    }
    double live = 0, peak = 0;
    for (const PipeInstr& in : sched.per_stage[st]) {
      const int piece = sched.piece(st, in.chunk);
      const double kept = pieces[piece].act + (l.pp > 1 && piece > 0 ? act_bytes : 0);
      if (in.op == PipeOp::kForward) peak = std::max(peak, live += kept);
      if (in.op == PipeOp::kBackward) live -= kept;
    }
    stage_params = std::max(stage_params, par);
    stage_act = std::max(stage_act, peak + transient + (l.pp > 1 ? kPostedAhead * act_bytes : 0));
  }
  auto z = zero_bytes(l.zero, stage_params, l.dp, kF, kF, opt_states * kF);
  p.weights_b = z.weights, p.grads_b = z.grads, p.optimizer_b = z.optimizer, p.activations_b = stage_act;
  if (l.zero >= 3) p.weights_b += stage_params * kF / m.units.size() * 2;  // one gathered unit (+ prefetch)
  if ((l.zero == 1 || l.zero == 2) && l.dp > 1) {
    // parallel/zero.cc's own buffers: the shard's gradient and parameters (P/N each), and the
    // padded reduce-scatter copy of the one bucket (the whole gradient) with its receive slice.
    p.buffers_b = 2 * stage_params * kF / l.dp + stage_params * kF * (1 + 1.0 / l.dp);
  }
  // Memory does not depend on the timing below: a layout over the caller's limit stops here
  // (the planner drops it; most of a large model's layouts are, and the schedule's
  // simulation is the expensive part).
  if (p.memory_b() > memory_limit_b) {
    p.over_memory = true;
    return p;
  }
  const CostParams pl = link_of(c, ppg, act_bytes, true);
  // The stages' slowdown. A stage computes only part of the step, so fewer than n ranks
  // share the cores at any moment, and how many changes through the step: one stage in the
  // fill, up to min(P, M) in 1F1B's steady state. Each forward and backward is slowed by the
  // slowdown of the ranks computing WHILE it runs: the time-average, over its interval in the
  // previous round's simulation, of the stages computing, times the ranks per stage on the
  // node (dp x tp pipelines side by side); the schedule is re-simulated to a fixed point (a
  // few rounds settle it; pp = 1 stays at every rank). The curve is convex (here 1.0 at 2
  // ranks on 2 cores, 2.1 at 4), so slowing every instruction by the slowdown of the step's
  // AVERAGE count, as this did first, under-charged the steady state: pipelines at 4 and 8
  // ranks were predicted 10-17% short. Sends keep the step's average.
  double stage_slow = slow, send_slow = comm_slow;
  // One slowdown per forward and backward, indexed by (stage, chunk, micro-batch, direction);
  // 0 = not simulated yet (the step's average applies).
  std::vector<double> instr_slow(static_cast<size_t>(l.pp) * V * l.micro * 2, 0.0);
  auto key = [&](int stage, const PipeInstr& in) {
    return ((static_cast<size_t>(stage) * V + in.chunk) * l.micro + in.micro) * 2 + (in.op == PipeOp::kBackward);
  };
  auto slow_of = [&](int stage, const PipeInstr& in) {
    const double v = instr_slow[key(stage, in)];
    return v > 0 ? v : stage_slow;
  };
  auto cost = [&](int stage, const PipeInstr& in) -> double {
    const Piece& pc = pieces[sched.piece(stage, in.chunk)];
    switch (in.op) {
      case PipeOp::kForward: return pc.f * slow_of(stage, in) + pc.fc;
      case PipeOp::kBackward: return pc.b * slow_of(stage, in) + pc.bc;
      case PipeOp::kSendAct:
      case PipeOp::kSendGrad: return (pl.alpha_s + act_bytes * pl.beta_s_per_byte) * send_slow;
      default: return 0;
    }
  };
  auto computes = [](const PipeInstr& in) { return in.op == PipeOp::kForward || in.op == PipeOp::kBackward; };
  // Ranks outnumbering the node's cores (simulate_on_cores): the cores are a resource that
  // each forward and backward holds while it runs, at the curve's cost of time-sharing (its
  // slowdown at the node's ranks over the share of a core each gets: 2.17 / 2 for 4 ranks on
  // 2 cores here); a stage's replicas and tp shards on the node take as many cores at once
  // (all of them at most, and then slowed by the rest). Why not a share of every core among
  // all the stages computing: a rank that wakes keeps its core while its forward or backward
  // runs (1-2 ms here; CFS slices are longer) and the others queue for one. Traced on 2
  // cores (4 ranks, 1f1b pp4 m8 of the 6x128 GPT), the middle stages' forwards took
  // 1.04-1.10x their solo time, not the curve's 2.2x, while the ranks waited for each other
  // the rest of the step; the CPU a step was one rank's (129 against 130 ms) and the cores
  // were busy 85-92% of it; the even share had predicted 63.6 ms against 70-78 measured for
  // pp4 m16. Sends keep the step's slowdown of
  // communication: a send wakes its receiver, which then waits for a core (traced, 4 ranks
  // on 2 cores: a forward started 0.27 ms after its input's sender finished, median, against
  // 0.095 with a core each; priced at the cost of sharing, the 8-rank plan chose a 32
  // micro-batch pipeline 21% slower than the best measured). The fixed point below is for a
  // core per rank.
  const int rpn = c.ranks_on_node(n), cores = std::max(1, c.cores_per_node);
  const bool shared_cores = l.pp > 1 && rpn > cores;
  const int stage_ranks = std::max(1, rpn / l.pp);
  if (shared_cores) {
    const double cost_of_sharing = std::max(1.0, c.compute_slowdown(rpn) * cores / rpn);
    const double crowded = static_cast<double>(stage_ranks) / std::min(stage_ranks, cores);
    std::fill(instr_slow.begin(), instr_slow.end(), cost_of_sharing * crowded);
  }
  SimResult r = shared_cores ? simulate_on_cores(sched, cost, stage_ranks, cores) : simulate(sched, cost);
  DT_CHECK(r.ok, Error, "pipeline simulation failed: " << r.error);
  const double per_stage = std::max(1.0, static_cast<double>(c.ranks_on_node(n)) / l.pp);
  for (int round = 0; round < 4 && l.pp > 1 && !shared_cores && r.makespan > 0; ++round) {
    double busy = 0;
    for (double b : r.busy) busy += b;
    const double active = std::max(1.0, c.ranks_on_node(n) * busy / (l.pp * r.makespan));
    stage_slow = c.compute_slowdown(active);
    send_slow = std::max(1.0, stage_slow / two);
    // The number of stages computing, k(t), is a step function of the compute intervals'
    // ends; its running integral at each interval end, in one sorted sweep, gives every
    // interval's stage-seconds as a difference of two (not every pair of intervals: a deep
    // pipeline has thousands). The integral up to an event does not depend on the order of
    // events at the same time.
    struct Event {
      double t;
      int delta;      // +1 start, -1 end
      size_t edge;    // 2 x key + (0 start, 1 end)
      bool operator<(const Event& o) const { return t < o.t; }
    };
    std::vector<Event> events;
    events.reserve(instr_slow.size() * 2);
    for (int st = 0; st < l.pp; ++st)
      for (size_t i = 0; i < sched.per_stage[st].size(); ++i)
        if (computes(sched.per_stage[st][i]) && r.end[st][i] > r.start[st][i]) {
          const size_t k = key(st, sched.per_stage[st][i]);
          events.push_back({r.start[st][i], 1, 2 * k});
          events.push_back({r.end[st][i], -1, 2 * k + 1});
        }
    std::sort(events.begin(), events.end());
    std::vector<double> edge_area(instr_slow.size() * 2, 0.0);
    double area = 0;
    for (size_t e = 0, k = 0; e < events.size(); ++e) {
      if (e) area += static_cast<double>(k) * (events[e].t - events[e - 1].t);
      edge_area[events[e].edge] = area;
      k = static_cast<size_t>(static_cast<int>(k) + events[e].delta);
    }
    for (int st = 0; st < l.pp; ++st)
      for (size_t i = 0; i < sched.per_stage[st].size(); ++i) {
        const PipeInstr& in = sched.per_stage[st][i];
        const double a = r.start[st][i], b = r.end[st][i];
        if (!computes(in) || b <= a) continue;
        const size_t k = key(st, in);
        const double stages = (edge_area[2 * k + 1] - edge_area[2 * k]) / (b - a);  // includes the instruction itself
        instr_slow[k] = c.compute_slowdown(std::max(1.0, stages * per_stage));
      }
    const double before = r.makespan;
    r = simulate(sched, cost);
    DT_CHECK(r.ok, Error, "pipeline simulation failed: " << r.error);
    if (std::abs(r.makespan - before) <= 1e-4 * before) break;  // settled
  }
  double busiest = *std::max_element(r.busy.begin(), r.busy.end());
  p.compute_s = busiest;
  p.bubble_s = r.makespan - busiest;
  p.optimizer_s = optimizer_step_s(stage_params / (l.zero >= 1 ? l.dp : 1)) * slow;
  // Data-parallel sync after the pipeline: one bucket, the stage's whole gradient
  // (parallel/model_parallel.cc builds its ZeroOptimizer without buckets).
  if (l.dp > 1) {
    double bytes = stage_params * kF, cap = bytes, t = 0;
    for (double left = bytes; left > 0; left -= cap) {
      double b = std::min(left, cap);
      if (l.zero == 0) t += allreduce_s(c, dpg, b, node_n) / comm_slow;  // slowed once, below
      else t += (reduce_scatter_s(c, dpg, b, node_n) + allgather_s(c, dpg, b, node_n)) / comm_slow;
    }
    if (l.zero >= 3) t += allgather_s(c, dpg, bytes, node_n) / comm_slow * l.micro;  // gathers in forward
    if (l.zero == 1 || l.zero == 2) {
      // parallel/zero.cc's unfused step (the GPT's, one bucket) also passes over the stage's
      // parameters: it zero-fills the padded gradient and copies the gradient into it (12
      // bytes a parameter), scales its slice out of the receive buffer and copies its shard
      // of the parameters out and back (24 / dp); ZeRO-2 zero-fills the re-bound gradient
      // (4). With the trainers' default clipping (--clip 1) the shards' squared norm is one
      // more, 8-byte, all-reduce over dp. Measured in plan_quality sweeps (4 ranks, dp2 pp2,
      // three interleaved runs): the ZeRO-1/2 twins of a layout 4-6% slower than ZeRO 0,
      // its "optimizer" span 5-6 ms against 3.2-3.4; predicted 0.5 ms faster before this.
      const double pass_b = stage_params * (12 + 24.0 / l.dp + (l.zero == 2 ? 4 : 0));
      p.optimizer_s += pass_b / c.elementwise_bps * slow;
      t += allreduce_s(c, dpg, 8, node_n) / comm_slow;
    }
    p.comm_s = t * comm_slow;
    p.dp_bytes = zero_traffic_elems(l.zero, stage_params, l.dp) * kF;
  }
  p.pp_bytes = l.pp > 1 ? 2.0 * l.micro * V * act_bytes : 0;
  p.step_s = r.makespan + p.comm_s + p.optimizer_s;
  return p;
}

}  // namespace dtrain::plan

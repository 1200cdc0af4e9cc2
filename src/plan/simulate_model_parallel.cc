// plan/simulate_model_parallel.cc — simulate() for the GPT on dp x tp x pp: the executor's
// pipeline schedule simulated with each stage's forward and backward (tp-split blocks,
// corrected by the blocks timed in place), its sends and the tp all-reduces, the
// data-parallel sync after it (ZeRO 0-3), and each rank's memory walked along its stage's
// instruction list.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "nn/transformer.h"
#include "parallel/model_parallel.h"
#include "parallel/pipeline.h"
#include "parallel/pipeline_schedule.h"
#include "plan/closed_forms.h"
#include "plan/sim_costs.h"
#include "plan/unit_memory.h"

namespace dtrain::plan::sim {

namespace {

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
// one (docs/history/planner.md, eighteenth session).
// Over tcp (plan/fabric.cc) the blocks' excess is the one they showed on the shared memory
// they were timed over (Cluster::timed_on); it scales the formula on the job's own link.
TpRatio tp_block_ratio(const Cluster& job, const ModelSpec& m, double items, int tp, int job_ranks) {
  if (tp <= 1) return {};
  const Cluster& c = job.timed_on ? *job.timed_on : job;
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

// (sim_costs.h)
double gpt_scratch_b(const ModelSpec& m, int tp, int64_t rows, bool blocks, bool head) {
  const int64_t w = m.width;
  std::vector<std::pair<int64_t, int64_t>> products;  // (outputs, inputs)
  if (blocks) products = {{3 * w / tp, w}, {w, w / tp}, {4 * w / tp, w}, {w, 4 * w / tp}};
  if (head)
    for (const Unit& u : m.units)
      if (u.kind == "gpt_head") products.push_back({std::llround(u.fwd_flops / (2.0 * m.context * w)), w});
  return products_scratch_b(rows, products);
}

Prediction simulate_model_parallel(const ModelSpec& m, const Layout& l, const Cluster& c, int64_t batch,
                                   double memory_limit_b, const StepBasics& b) {
  const int n = b.n, node_n = b.node_n;
  const double slow = b.slow, two = b.two, comm_slow = b.comm_slow, opt_states = b.opt_states;
  Prediction p;
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
  // Over tcp the blocks' ratio (tp_block_ratio) scales what they were timed with, the shared
  // memory's all-reduce; what the job's own link adds beyond that is added as it is. (Scaled
  // too, the ratio's waits at shared-memory speed charged the 1 Gbit/s link's transfers
  // again: gpt-tp across two hosts +79%, scripts/validate_hosts.sh.)
  const double tp_ar_timed = c.timed_on ? std::min(tp_ar, allreduce_s(*c.timed_on, tpg, act_bytes, node_n)) : tp_ar;
  // f, b: forward and backward compute before any slowdown; fc, bc: the tp all-reduces in them.
  struct Piece {
    double f = 0, b = 0, fc = 0, bc = 0, params = 0, act = 0, out = 0, transient = 0;
    bool blocks = false, head = false;  // what products it runs (gpt_scratch_b)
  };
  // dtrain's ZeRO-3 (parallel/zero3.h) re-runs each unit's forward in backward, keeping unit
  // inputs only: activation recompute, whatever --recompute says.
  const bool recompute = l.recompute || l.zero >= 3;
  const TpRatio tpr = tp_block_ratio(c, m, items, l.tp, l.dp * l.tp * l.pp);
  std::vector<Piece> pieces(cut.size() - 1);
  // The blocks are alike: each kind's pass is worked out once (an untimed shape's pricing
  // reads every timed shape's spec).
  std::map<std::string, Pass> passes;
  std::optional<std::optional<Pass>> zero3_rate;  // outer: worked out yet
  for (size_t k = 0; k + 1 < cut.size(); ++k) {
    Piece& pc = pieces[k];
    for (int u = cut[k]; u < cut[k + 1]; ++u) {
      const Unit& x = m.units[u];
      auto known = passes.find(x.kind);
      if (known == passes.end()) known = passes.emplace(x.kind, unit_pass(c, x, items, l.tp, m.unit_spec)).first;
      const Pass ps = known->second;
      const double rf = x.block ? tpr.f : 1, rb = x.block ? tpr.b : 1;
      const UnitCost* z3 = l.zero >= 3 && x.block ? c.unit_for(kZero3Block, m.unit_spec) : nullptr;
      if (z3) {
        // ZeRO-3's block as timed the way it runs (calibrate_units.h): a forward that records
        // nothing, and the re-run forward with the backward on the activations it just wrote.
        // (Charged as the stacked block's f + b + f, the 2- and 4-rank gpt-zero3 rows read
        // +17% and +15%: its 18.1 ms a block measured against ~21 predicted.) The pipeline's
        // recompute runs its blocks the same way since the sixtieth session, but priced by
        // this timing its gpt-pp-recompute rows read 1-2 points further over than by the
        // stacked f + b + f (dv-r1 repriced: +18.9 / +16.6 / +22.6% at 2 / 4 / 8 ranks,
        // against +17.2 / +15.0 / +21.6%), so it keeps the stacked charge (below).
        const double w = items * unit_work(x);
        if (!zero3_rate) zero3_rate = untimed_gpt_rate(c, kZero3Block, m.unit_spec, x.params, items);
        const std::optional<Pass>& rate = *zero3_rate;
        const auto [f, b] = rate ? std::pair{rate->f * w, rate->b * w} : z3->pass(m.unit_spec, x.params, items, w);
        pc.f += f;
        pc.b += b;
      } else {
        pc.f += ps.f * rf;
        pc.b += ps.b * rb + (recompute && (x.block || l.zero < 3) ? ps.f * rf : 0);  // the re-run forward
      }
      pc.fc += x.block ? 2 * (tp_ar_timed * rf + tp_ar - tp_ar_timed) : 0;
      pc.bc += x.block ? 2 * (tp_ar_timed * rb + tp_ar - tp_ar_timed) : 0;
      pc.params += x.block ? x.params / l.tp : x.params;
      pc.blocks |= x.block, pc.head |= x.kind == "gpt_head";
      // Kept activations: the unit's heap bytes per item (calibrated, or plan/unit_memory.h's
      // defaults; a block's scaled by its tp share), or the closed form for an unknown kind.
      const UnitCost* uc = unit_memory_for(c, x.kind, m.unit_spec);
      const bool measured = uc != nullptr;
      const double me = mem_elems(x);
      const double closed = x.block ? block_activation_elems(m.context, 1, m.width, m.heads, l.tp, recompute) : x.act_elems;
      if (measured) {
        // A tensor-parallel block keeps much of what it keeps unsplit (the f/g copies, the
        // replicated LayerNorm and residual tensors and their gradients), and more than a
        // tp-1 block would: measured here on the 6x128 GPT (docs/history/planner.md's gpt-tp rows),
        // the activation heap at tp 2 / 4 / 8 is 92.2 / 76.5 / 68.8 MB, i.e. 60.8 + 62.8 / tp,
        // against 106.3 calibrated at tp 1 (so the line's 123.6 at tp = 1 is 16% above it).
        // As shares of the calibrated footprint: 0.572 + 0.591 / tp from tp 2 on, exact at
        // the three rows. (A share of 0.65 + 0.35 / tp, which is 1 at tp 1, put them at -4.4 /
        // +3.0 / +7.9%, and tp 2 inside a pipeline, the gpt-hybrid-tp rows, at -4.9 / -7.6%.)
        constexpr double kTpKept = 0.572, kTpSplit = 0.591;
        const double share = x.block && l.tp > 1 ? kTpKept + kTpSplit / l.tp : 1.0;
        const double kept = uc->act_b(me, x.score_elems) * items * share;
        const double peak = uc->peak_b(me, x.score_elems) * items * share;
        if (recompute && l.zero >= 3 && x.block) {
          // ZeRO-3 keeps each block's input and re-runs one block at a time in backward,
          // which holds that block's high-water mark.
          pc.act += kF * items * closed;
          pc.transient = std::max(pc.transient, peak);
        } else if (recompute && l.zero < 3) {
          // The pipeline's recompute (parallel/pipeline.cc) checkpoints every unit's input
          // and re-runs one unit at a time in backward. The piece's first unit's input is the
          // received activation (the walk below adds it), or the tokens; the others' are one
          // activation each. (Until the sixtieth session the executor re-ran the whole piece
          // on one graph, which saved nothing on a stage with one micro-batch in flight.)
          if (u > cut[k]) pc.act += act_bytes;
          pc.transient = std::max(pc.transient, peak);
        } else {
          pc.act += kept;
          // Gradients of the activations stay until the graph goes: the live micro-batch in
          // backward holds the whole high-water mark.
          pc.transient += peak - kept;
        }
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
  // And the messages that arrive before their receive is posted: the transport keeps each in
  // an early buffer in the receiver's heap (comm/transport.h) until the receive comes. A
  // neighbour can be ahead by its micro-batches in flight, less the receives posted: the
  // activations from the stage before, the gradients from the stage after. (Without them
  // the 8-stage pipelines read -4.3% (1F1B, GPipe) and -8.9% (recompute, whose smaller
  // footprint shows the same 0.6-0.8 MB), dv-r1.)
  constexpr double kPostedAhead = 2;
  std::vector<int> in_flight(static_cast<size_t>(l.pp), 0);
  for (int st = 0; st < l.pp; ++st) {
    int now = 0;
    for (const PipeInstr& in : sched.per_stage[st]) {
      if (in.op == PipeOp::kForward) in_flight[st] = std::max(in_flight[st], ++now);
      if (in.op == PipeOp::kBackward) --now;
    }
  }
  auto early_from = [&](int st, int d) {  // from stage st + d (d = -1 activations, +1 gradients)
    const int from = st + d;
    const bool wraps = from < 0 || from >= l.pp;
    if (l.pp == 1 || (wraps && V == 1)) return 0.0;  // only interleaved chunks wrap around
    return std::max(0.0, in_flight[(from + l.pp) % l.pp] - kPostedAhead) * act_bytes;
  };
  const auto rows = static_cast<int64_t>(std::ceil(items)) * m.context;
  double stage_params = 0, stage_act = 0;
  for (int st = 0; st < l.pp; ++st) {
    double par = 0, transient = 0;
    bool blocks = false, head = false;
    for (int ch = 0; ch < V; ++ch) {
      const Piece& pc = pieces[sched.piece(st, ch)];
      par += pc.params, transient = std::max(transient, pc.transient);
      blocks |= pc.blocks, head |= pc.head;
    }
    transient += gpt_scratch_b(m, l.tp, rows, blocks, head);
    double live = 0, peak = 0;
    for (const PipeInstr& in : sched.per_stage[st]) {
      const int piece = sched.piece(st, in.chunk);
      const double kept = pieces[piece].act + (l.pp > 1 && piece > 0 ? act_bytes : 0);
      if (in.op == PipeOp::kForward) peak = std::max(peak, live += kept);
      if (in.op == PipeOp::kBackward) live -= kept;
    }
    stage_params = std::max(stage_params, par);
    const double early = early_from(st, -1) + early_from(st, +1);
    stage_act = std::max(stage_act, peak + transient + (l.pp > 1 ? kPostedAhead * act_bytes : 0) + early);
  }
  auto z = zero_bytes(l.zero, stage_params, l.dp, kF, kF, opt_states * kF);
  p.weights_b = z.weights, p.grads_b = z.grads, p.optimizer_b = z.optimizer, p.activations_b = stage_act;
  if (l.zero >= 3) p.weights_b += stage_params * kF / m.units.size() * 2;  // one gathered unit (+ prefetch)
  if ((l.zero == 1 || l.zero == 2) && l.dp > 1) {
    // parallel/zero.cc's own buffers: the shard's gradient and parameters (P/N each), and the
    // padded reduce-scatter copy of the one bucket (the whole gradient) with its receive slice.
    p.buffers_b = 2 * stage_params * kF / l.dp + stage_params * kF * (1 + 1.0 / l.dp);
    // Across hosts of several data-parallel ranks each, the reduce-scatter and all-gather are
    // the hosts' hierarchy (coll/hierarchical.h), which keeps its packed copy of the buffer
    // and the host's 1/L share of it between calls.
    const int per_host = std::clamp(c.ranks_on_node(n) / (l.tp * l.pp), 1, l.dp);
    if (!c.shared_memory && per_host > 1 && per_host < l.dp) p.buffers_b += stage_params * kF * (1 + 1.0 / per_host);
  }
  // Memory does not depend on the timing below: a layout over the caller's limit stops here
  // (the planner drops it; most of a large model's layouts are, and the schedule's
  // simulation is the expensive part).
  if (p.memory_b() > memory_limit_b) {
    p.over_memory = true;
    return p;
  }
  // A send goes one way: a stage's activation forward or its gradient back (LinkSizes::send).
  const CostParams pl = link_of(c, ppg, act_bytes, true, true);
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
  // Ranks outnumbering the node's cores (simulate_on_cores): the kernel time-shares the cores
  // among the stages computing, a slice (scheduler_slice_s) at a time to those that have
  // computed least in the step, each instruction at the curve's cost of time-sharing (its
  // slowdown at the node's ranks over the share of a core each gets: 2.17 / 2 for 4 ranks on 2
  // cores here); a stage's replicas and tp shards on the node take as many cores at once (all of
  // them at most, and then slowed by the rest). Not an even share of every core among all the
  // stages computing: traced on 2 cores (4 ranks, 1f1b pp4 m8 of the 6x128 GPT), the light outer
  // stages' forwards and backwards ran at their solo time while the middle stages' stretched up
  // to 2.5x, and the even share had predicted 63.6 ms against 70-78 measured for pp4 m16. Not
  // first come, first served with each instruction holding its core to the end either (this
  // model until 2026-11-30): the middle stages' backwards do not keep their core, and pp4 at 4
  // ranks read -9..-23% in all six validations of the forty-first session (1f1b m8: 69.0 ms
  // against a median of 79.2 over 15 runs; now 73.3). Sends keep the step's slowdown of
  // communication: a send wakes its receiver, which then waits for a core (traced, 4 ranks on 2
  // cores: a forward started 0.27 ms after its input's sender finished, median, against 0.095
  // with a core each; priced at the cost of sharing, the 8-rank plan chose a 32 micro-batch
  // pipeline 21% slower than the best measured). The fixed point below is for a core per rank.
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
  p.optimizer_s = b.optimizer_step_s(stage_params / (l.zero >= 1 ? l.dp : 1)) * slow;
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
  // Ranks beyond the cores meet at every micro-batch (the pipeline's sends) or unit (ZeRO's
  // gathers) and finish the compute between meetings one core at a time: the cores'
  // imbalance (Cluster::meeting_penalty) on the pipeline's time and the step. Tensor-parallel
  // blocks are timed across their ranks, imbalance included (calibrate_tp.h). Without it the
  // forty-ninth and fiftieth sessions' validations read the pipelines, ZeRO and hybrid at 4
  // and 8 ranks on 2 cores 13-21% short (dv-u1) and the 8-rank plan-quality sweep 8-28%
  // (pq-t1).
  // How much compute lies between two meetings sets how much of the imbalance is left
  // (Cluster::meeting_penalty): the kernel's balancer evens out a long stretch. A pipeline's
  // ranks meet at every forward and backward of a micro-batch, ZeRO-3's at every unit's gather
  // in either pass, the others once a step: the data-parallel GPT at 4 ranks on 2 cores, a
  // 53 ms stretch, had been charged the 600 us gap's 0.21 and read +20..+31% in two
  // plan-quality sweeps (pq-z1, pq-a1), gpt-zero1 at 8 ranks +27% (dv-z2).
  if (l.tp == 1) {
    int meetings = 1;
    if (l.pp > 1) meetings = 2 * l.micro * V;
    if (l.zero >= 3)
      meetings = std::max(meetings, 2 * l.micro * std::max(1, static_cast<int>(m.units.size()) / l.pp));
    const double a = c.meeting_penalty(c.ranks_on_node(n), p.compute_s / meetings);
    r.makespan *= 1 + a;
    p.compute_s *= 1 + a;
    p.bubble_s *= 1 + a;
    p.optimizer_s *= 1 + a;
  }
  p.step_s = r.makespan + p.comm_s + p.optimizer_s;
  return p;
}

}  // namespace dtrain::plan::sim

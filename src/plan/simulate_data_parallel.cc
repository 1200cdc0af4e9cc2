// plan/simulate_data_parallel.cc — simulate() for the MLP's data-parallel strategies (ddp,
// ps, localsgd, gossip, fedavg, single): every worker computes its share of the minibatch;
// what differs is how they agree (bucketed all-reduce overlapped with backward, a server's
// push and pull, an average every few steps, neighbours' exchanges, a round of clients).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "base/error.h"
#include "parallel/batch_split.h"
#include "parallel/data_parallel.h"
#include "parallel/fedavg.h"
#include "parallel/share_grad.h"
#include "plan/closed_forms.h"
#include "plan/sim_costs.h"
#include "plan/unit_memory.h"

namespace dtrain::plan::sim {

namespace {

// Gathering a step's rows from the dataset, where the step line carries it (timed on random
// rows of a large dataset: Cluster::mlp_step_random_rows); 0 where it does not.
double gather_in_line_s(const Cluster& c, const ModelSpec& m, double items) {
  if (!c.mlp_step_random_rows || c.gather_bps <= 0 || m.units.empty()) return 0;
  return kF * items * in_elems(m.units.front()) / c.gather_bps;
}

// The input gradients of an MLP's layers: every layer but the first also computes the
// gradient of its input in backward (dX = dY x W, as many FLOPs as its forward), which the
// calibration's units do not (a layer is timed alone, on an input that needs no gradient),
// priced as the layer's forward pass. Per layer, 0 for the first, and 0 for a layer without
// a calibrated line (unit_pass's formula already charges backward twice the forward).
// `passes`: each layer's unit_pass at the items asked for.
std::vector<double> input_grads_s(const Cluster& c, const ModelSpec& m, const std::vector<Pass>& passes) {
  std::vector<double> out(m.units.size(), 0.0);
  for (size_t i = 1; i < m.units.size(); ++i)
    if (c.unit_for(m.units[i].kind, m.unit_spec)) out[i] = passes[i].f;
  return out;
}

std::vector<Pass> layer_passes(const Cluster& c, const ModelSpec& m, double items) {
  std::vector<Pass> out;
  for (const Unit& u : m.units) out.push_back(unit_pass(c, u, items, 1, m.unit_spec));
  return out;
}

double sum_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// What an MLP's step spends around its layers beyond their input gradients and the gather of
// its rows, for a model the calibration did not time itself: the timed models' figure at
// these items (their step less their layers, input gradients and gather), interpolated in
// log(parameters) between the two on either side of the model (beyond them, the nearest
// one's).
//
// Before (to 2026-12-01), an untimed model took the timed one's whole step-around-layers as
// a time. That figure is mostly the input gradients, which grow with the layers: at 128
// examples, 784-256-128-10's step spent 0.21 ms around its layers, 784-1024-1024-10's 2.03
// ms, of which its 1024x1024 layer's input gradient is ~1.5. The 784-1024-1024-1024-10 MLP
// at 1 rank, batch 128, was priced -19% with the two timed, and its 2-rank ddp at batch 256
// -24% with the small one alone; the 784-2048-10 one, with one hidden layer and so almost no
// input gradient to pay, +17%. What is left once the input gradients and the gather are
// taken out is 0.1-0.3 ms a step for MLPs from 784-64-10 to 784-512-512-10 and grows less
// than their layers (1-rank runs against one calibration, docs/PLANNER.md, fifty-third
// session).
double rest_untimed_s(const Cluster& c, const UnitCost& step, const ModelSpec& m, double items) {
  std::vector<std::pair<double, double>> rests;  // (parameters, seconds)
  for (const auto& [key, ts] : step.timed) {
    const ModelSpec s = ModelSpec::parse(key.first);
    if (s.gpt || s.units.empty()) continue;
    const double around = step.pass(key.first, key.second, items, items * mlp_step_work(s)).first;
    rests.push_back({key.second, around - gather_in_line_s(c, s, items) - sum_of(input_grads_s(c, s, layer_passes(c, s, items)))});
  }
  std::sort(rests.begin(), rests.end());
  return beta_at(rests, m.params(), 0);  // in log(parameters), flat beyond the ends; none timed: 0
}

}  // namespace

Prediction simulate_data_parallel(const ModelSpec& m, const Layout& l, const Cluster& c, int64_t batch,
                                  const StepBasics& b) {
  const std::string& s = l.strategy;
  const int n = b.n, node_n = b.node_n;
  const double slow = b.slow, comm_slow = b.comm_slow, opt_states = b.opt_states;
  Prediction p;
  int workers = s == "ps" ? n - l.servers : l.dp;
  DT_CHECK(workers >= 1, InvalidArgument, "ps needs more ranks than --servers");
  // fedavg's clients each train on the whole minibatch (fedavg.h); the others split it.
  const bool fed = s == "fedavg";
  double items = fed ? static_cast<double>(batch) : static_cast<double>(batch) / workers;
  // ddp's busiest rank (Layout::batch_split): what its memory holds, and with fixed weights
  // what its step computes. The cut rounds to the nearest item: up to half of one more.
  double mem_items = items;
  if (s == "ddp" && workers > 1) {
    const BatchSplitMode mode = l.batch_split < 0  ? BatchSplitMode::kAuto
                                : l.batch_split ? BatchSplitMode::kMeasured
                                                : BatchSplitMode::kEven;
    // (Deterministic runs come as batch_split 0: the Layout does not know the mode.)
    const bool measured = l.batch_share_max <= 0 && split_measures(mode, false, node_n > c.cores_per_node);
    const double share = l.batch_share_max > 0 ? l.batch_share_max : measured ? (1 + kMeasuredSpread) / workers : 0;
    if (share > 0) mem_items = std::min(static_cast<double>(batch), std::ceil(static_cast<double>(batch) * share + 0.5));
    if (l.batch_share_max > 0) items = mem_items;
  }
  // fedavg's concurrency is the sample's (below): its passes are priced alone here.
  const double pass_slow = fed ? 1.0 : slow;
  std::vector<double> bwd(m.units.size());
  const std::vector<Pass> passes = layer_passes(c, m, items);
  const std::vector<double> dx = input_grads_s(c, m, passes);
  double fwd = 0, bwd_total = 0;
  for (size_t i = 0; i < m.units.size(); ++i) {
    const Pass& ps = passes[i];
    fwd += ps.f * pass_slow;
    bwd[i] = (ps.b + dx[i]) * pass_slow;
    bwd_total += bwd[i];
  }
  p.compute_s = fwd + bwd_total;
  // The step around the units (mlp_step_work), when calibrated: this model's own points less
  // the input gradients now in its backward, or for a model not timed, what the timed ones
  // spent beyond theirs (rest_untimed_s) and the gather of its own rows.
  const UnitCost* step = c.unit_for("mlp_step", m.unit_spec);
  if (step) {
    // The step less its layers' timed points: negative where the whole step ran faster
    // than its layers timed apart ("mlp_step_of_timed_layers", calibrate_compute.h), but never more than
    // the forward it comes before. A line with no points (a cluster file's fit) is taken as
    // this model's own.
    const bool own = step->timed.empty() || step->timed.count({m.unit_spec, m.params()}) > 0;
    const double around =
        (own ? step->pass(m.unit_spec, m.params(), items, items * mlp_step_work(m)).first - sum_of(dx)
             : gather_in_line_s(c, m, items) + rest_untimed_s(c, *step, m, items)) *
        pass_slow;
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
  const double input_mem_b = kF * mem_items * in_elems(m.units.front());
  if (c.gather_bps > 0 && !(step && c.mlp_step_random_rows)) {
    const double gather = input_b / c.gather_bps * pass_slow;
    p.compute_s += gather;
    fwd += gather;
  }
  double P = m.params(), bytes = P * kF;
  // A synchronous ps server's sum, bytes per element and push: the push read from where the
  // worker wrote it, the running sum read and written. The sum (the server's slice) stays in
  // cache while it takes at most half the last-level cache (Cluster::optimizer_s's rule), and
  // then only the push's 4 bytes come from beyond it: at 4 and 8 ranks on the 2-vCPU Xeon the
  // server's update took 0.34 and 0.62 ms a step (its trace, 2026-11-29), where 12 bytes a
  // push priced 0.89 and 1.89 ms.
  const double sum_bytes = bytes / std::max(1, l.servers) <= c.llc_bytes / 2 ? 4.0 : 12.0;
  // The optimizer's state: ddp's ZeRO 1-2 (fused into its all-reduce, parallel/zero.h)
  // keeps the rank's 1/N slice of it; a parameter server's workers run no optimizer (the
  // servers' slices are counted with their buffers below). Measured with --optimizer
  // momentum / adamw at 2 and 4 ranks, ddp held 0.47 / 1.41 MB of state where the whole
  // model's 0.94 / 1.88 had been predicted (+11..+30%).
  const double state_share = (s == "ddp" && l.zero >= 1 && workers > 1) ? 1.0 / workers : s == "ps" ? 0.0 : 1.0;
  p.weights_b = bytes, p.grads_b = bytes, p.optimizer_b = opt_states * bytes * state_share;
  // Activations: each unit's high-water heap bytes per item, calibrated or the code's own
  // figures (plan/unit_memory.h; the closed form for a kind without them), plus the gathered
  // input batch.
  double transient = 0;
  for (const auto& u : m.units) {
    const UnitCost* uc = unit_memory_for(c, u.kind, m.unit_spec);
    if (uc) {
      // The graph keeps every node's gradient until it is destroyed: a unit's footprint at
      // the end of backward is its whole high-water mark, not its forward share.
      p.activations_b += uc->peak_b(mem_elems(u), u.score_elems) * mem_items;
    } else {
      p.activations_b += kF * u.act_elems * mem_items;
    }
  }
  p.activations_b += transient + input_mem_b;
  // The small-batch products' packing scratch (sim_costs.h products_scratch_b), which a
  // rank's thread keeps from its first step on, of the busiest rank's rows.
  std::vector<std::pair<int64_t, int64_t>> products;
  for (const auto& u : m.units)
    if (u.kind == "mlp_layer") products.push_back({static_cast<int64_t>(u.out_elems), static_cast<int64_t>(in_elems(u))});
  p.activations_b += products_scratch_b(static_cast<int64_t>(std::ceil(mem_items)), products);
  p.optimizer_s = b.optimizer_step_s(P) * pass_slow;
  // The executors' own copies of the parameters (parallel/*.h): ddp's gradient and scratch
  // buffers (share_grad.h), localsgd's and gossip's gradient, gossip's mean and one inbox per
  // neighbour, fedavg's global model, gradient and sum plus each round's fresh optimizer
  // state, a ps worker's gradient and replies (servers hold their slice only). Each count is
  // one lower than fitted: the model's unused gradient buffer went (2026-11-27, -0.94 MB).
  const int degree = workers <= 2 ? 1 : 2;  // the ring
  // gossip on one host exchanges through a shared-memory window (gossip.h), not messages.
  const bool gossip_window = s == "gossip" && workers > 1 && c.shares_memory(workers);
  // Models of memory traffic in gossip's mix (below), and its rate (Cluster::mix_bps),
  // looked up where the node's slots match the calibration's in all: it timed two ranks' four
  // slots of a model, and n ranks on the node hold 2n (8 ranks on 2 cores: 15 MB of slots for
  // the 0.94 MB model, past the two cores' 2 MiB L2 each).
  const double mix_models = degree + (gossip_window ? 3.0 : 2.0);
  // Through the window on a complete graph (the ring at 2 and 3 ranks) each rank computes
  // 1/workers of the one mix every rank would make, into every rank's next slot, and a second
  // word closes it (gossip.cc mix_window): a rank's share of the traffic, one word more. Traced
  // at 2 ranks on the 2-vCPU Xeon: the mix 203 -> 102 us a step, the second word 3 us.
  const bool mix_shared = gossip_window && degree + 1 == workers;
  const double mix_share = mix_shared ? 1.0 / workers : 1.0;
  // The shared mix is timed apart (plan/calibrate_mix.h: it crosses cores differently).
  const double mix_size = bytes * std::max(2, node_n) / 2;
  double mix_bps = mix_shared ? c.mix_shared_bps(mix_size) : c.mix_bps(mix_size);
  // The far verdict's rate is a cross-core rate: the calibration's mix writes the slot the
  // other core's thread read one exchange before and reads the slot it just wrote (perf of
  // gossip at 8 ranks on the EPYC VM, the cores far: the mix's output pass, `scale`, 33% of
  // the CPU, its reads, `add`, 24%). A rank with no ring neighbour on another core mixes at
  // the close rate. With more ranks than cores the scheduler keeps ring neighbours together
  // (a word wakes its neighbour on the waker's core): each core's ranks form arcs of the
  // ring, and only the ranks at an arc's end, 2 a core, have a neighbour across. Twelve
  // samples of the ranks' cores during an 8-rank run on 2 cores: 2.8 crossing edges on
  // average against 4.6 for placement at random; the runs of 25 validations (dv-j1 to
  // dv-p8): far minus close, 0.86 ms a step at 4 ranks and 0.79 at 8, where the whole mix
  // at the far rate priced 0.88 and 1.7; the mix's share of a far run's CPU at 8 ranks, 0.33
  // ms a mix, is the close rate's 0.13 plus half the far rate's extra 0.40. So the far rate
  // applies to a share min(1, 2 cores / ranks on the node) of the mixes.
  if (c.cores_verdict == "far" && gossip_window && !mix_shared && node_n > c.cores_per_node) {
    const double across = std::min(1.0, 2.0 * c.cores_per_node / node_n);
    const double close_bps = c.mix_bps_under("close", mix_size);
    mix_bps = 1.0 / ((1.0 - across) / close_bps + across / mix_bps);
  }
  // So does a synchronous parameter server (param_server.h), its servers with the workers.
  const bool ps_window = s == "ps" && l.ps_sync && c.shares_memory(n);
  double copies = 0;
  // (ddp keeps its one at one rank too: traced, the README's MLP at 1 rank held 23.8 MB
  // beyond weights, gradients and momentum, 2 x its 11.65 MB, one of them the model's unused
  // gradient; its ZeRO 1-2 step is fused into its all-reduce, zero.h: no padded or shard
  // buffers.)
  if (s == "ddp") copies = 1;
  else if (s == "localsgd") copies = 1;  // one model size beyond its gradient, measured
  // gossip: its mean, and on one host its two slots of the shared-memory window (gossip.h);
  // across hosts two sets of inboxes of a model per neighbour (gossip.cc posts the next
  // step's receives into one set before it waits for the other's). Measured, 4 and 8 ranks:
  // 7.19 / 7.14 MB with inboxes, 5.31 / 5.26 through the window.
  else if (s == "gossip") copies = 1 + 2 * (gossip_window ? 1 : degree);
  // fedavg: its global model and the round's sum (a third, fitted when the model was 0.94 MB,
  // was its clients' partition and the epoch's order, 0.96 MB of Fashion-MNIST's rows: at
  // 0.2 and 0.94 MB models and 20,000 and 60,000 rows, the heap was 1.9 copies + 16 bytes a
  // row, 2026-12-02).
  else if (s == "fedavg") copies = 2;
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
  const bool one_node = c.shares_memory(workers);  // the shared-memory paths (not over tcp)
  const bool slots = one_node && call_b <= kShmSlotsBytes &&
                     (c.ranks_on_node(workers) > c.cores_per_node ||
                      (measured_slots != c.intra_sizes.allreduce_slots_from_by_ranks.end() && call_b >= measured_slots->second));
  // Elsewhere on one node, with a core per rank, the all-reduce reads the peers' buffers in
  // place (coll/shm_direct.cc reduce_slice): no ring and no model-sized buffer, but a piece
  // of scratch per peer, (N - 1) x min(256 KiB, the rank's slice). Measured on a 16-core
  // Xeon (2026-11-27, localsgd): 3.06 / 3.30 / 3.34 MB at 2 / 4 / 8 ranks, where the ring's
  // copy had predicted 3.11 / 3.98 / 3.90 (+21% at 4 ranks).
  const bool reads = one_node && !slots && workers > 1 && c.ranks_on_node(workers) <= c.cores_per_node;
  // ddp on one node reduces from its gradient window (below) on either path.
  const bool ddp_window = s == "ddp" && workers > 1 && one_node;
  if (workers > 2 && s != "ps" && s != "single" && s != "gossip" && !slots && !reads && !ddp_window) copies += 1;
  // Through the slots, ddp's and localsgd's all-reduce keep one model-sized copy less than
  // the cross-memory path's scratch (measured at 2 and 4 ranks: ddp 5.08 -> 4.55 MB at 2
  // ranks; the 0.5 MB beside it, once taken for the slot path's staging, is the epoch's
  // order, counted below).
  // ddp on one node keeps its gradient in a shared-memory window that the owners read in
  // place (data_parallel.h): no slot staging, no copy less; with its (default) fused ZeRO
  // and the shared copy of the parameters below, counted on rank 0, the busiest (measured
  // 2 / 4 / 8 ranks: 5.76 / 5.63 / 5.57 MB for the 0.94 MB MLP with --shared-params on).
  const bool slot_ar = slots && workers > 1 && (s == "localsgd" || (s == "ddp" && !ddp_window));
  if (slot_ar) copies -= 1;
  // Ranks that read each other's buffers (above) keep no model-sized copy either, but the
  // same staging and the pieces of scratch. Measured, localsgd at 2 ranks: reads 2.85 MB,
  // slots 2.59 (the 256 KiB apart). fedavg's all-reduce keeps the pieces too (the Xeon:
  // 5.62 / 6.05 / 6.17 MB at 2 / 4 / 8 ranks).
  const bool reads_ar = reads && (s == "localsgd" || (s == "ddp" && !ddp_window));
  if (reads_ar) copies -= 1;
  // The window is the gradient (share_grad.h place_grad releases the process's own buffer):
  // no model-sized copy beyond it. With its (default) fused ZeRO, a model
  // of kSharedParamsMinBytes or more also keeps one copy of the parameters for the node
  // (data_parallel.h), counted on rank 0, and a 256 KiB piece; below that size each rank
  // keeps its own and copies the owners' slices out of the slots, which keeps nothing more.
  // Measured on the Xeon (2026-11-29, --batch 64, 2 ranks; 0.41 / 0.94 / 2.14 MB MLPs):
  // with their own parameters 1.49 / 2.88 / 5.52 MB, i.e. 2 models + activations + 0.44-0.56
  // MB, at every stage (zero 0-2); shared 0.67 / 1.20 / 2.34 MB more; 4 and 8 ranks the same
  // 1.20 MB apart.
  const bool shared_params =
      ddp_window && l.zero > 0 && (l.shared_params < 0 ? bytes >= kSharedParamsMinBytes : l.shared_params == 1);
  if (ddp_window) copies -= 1;
  if (shared_params) copies += 1;
  // Two ranks with a core each time both paths as calls go and take the faster per size class
  // (DTRAIN_SHM_TIMED_PATHS, on by default: coll/shm_context.h), so a run that takes the slots
  // has read through the pieces too: its high-water mark holds both. On the EPYC VM localsgd
  // at 2 ranks kept 3.06 MB in 18 runs, the cores close (the slots) or far (the reads),
  // where the slots alone priced 2.85 (2026-11-30). Ranks beyond the cores time both paths
  // too (ShmContext::count_decision): localsgd kept 3.30 / 3.34 MB at 4 / 8 ranks on the
  // EPYC VM's 2 cores, where the slots alone priced 2.63 / 2.54 (2026-11-30, dv-m3).
  const bool timed_paths = slot_ar && ((workers == 2 && c.ranks_on_node(workers) <= c.cores_per_node) ||
                                       c.ranks_on_node(workers) > c.cores_per_node);
  const bool read_pieces = reads_ar || timed_paths || (reads && s == "fedavg");
  // Two ranks with a core each whose cores are far apart reduce and step each piece of their
  // block in the call's scratch and stream it into the slot (coll/shm_slots.cc
  // apply_and_share, ShmContext::streams_to_peers): one piece more, up to a slot (256 KiB) of
  // the rank's half of a bucket; the pool keeps it once taken. Measured on the EPYC VM
  // (2026-12-01, the 0.94 MB MLP at 2 ranks, DTRAIN_SHM_CORES forcing each verdict): 2.94 MB
  // close, 3.21 far, which dv-s1 priced 2.97 in all six far runs of ddp and ddp-zero2
  // (-7.7%). (Under the shared parameters the piece above is the same buffer.)
  const bool streamed_piece = ddp_window && !shared_params && workers == 2 &&
                              c.ranks_on_node(workers) <= c.cores_per_node && c.cores_verdict == "far";
  // Over tcp (no shared memory: plan/fabric.cc) the ring all-reduce reduces in place through a
  // window of scratch segments (coll/call.cc flow, up to kReduceWindowBytes): one chunk, 1/N
  // of the call, where the model-sized copy counted above stands for the shared-memory paths'
  // (fedavg's two copies are its own). Since the transport leaves an early payload of 64 KiB
  // or more in the kernel until its receive is posted or a wait must read past it
  // (comm/transport.cc), ranks that fit the cores keep no chunk early: the 0.94 MB MLP over
  // loopback tcp at 2 ranks read ddp 3.43-3.45 MB, localsgd 3.27 and fedavg 6.09 in 7 of 7,
  // 7 of 7 and 4 of 4 runs (2026-12-04, dv-t4 and mt1), the chunk priced 3.40 / 3.27 / 6.08.
  // (Until then a chunk came early in nearly every run, and the worst case 2(N-1)/N of a
  // model stood for it: +13%, +15% and +8% over that day.)
  // Beyond the cores a rank's waits sleep, and a wait that sleeps reads every stream: the
  // chunks its peers sent meanwhile come early, more the more ranks share a core. Measured,
  // model copies above the chunk at R ranks a core (2 cores; 4 runs at 4 ranks, 3 at 8):
  //   ddp       R = 2: 0.16-0.66 (median 0.41)   R = 4: 1.21-1.58 (1.46)
  //   localsgd  R = 2: 0.01-0.50 (0.01)          R = 4: 0.77-1.15 (1.02)
  //   fedavg    R = 2: 0.50-0.75 (0.50)          R = 4: 0.78-1.16 (1.04)
  // priced as half a model per extra rank on a core for ddp, whose buckets go out while its
  // peers are still in backward, and a third for the averages every rank reaches at one
  // point, up to the worst case 2(N-1)/N (the old price was that worst case: +19..+50%).
  // ddp's fused ZeRO falls back over tcp to a reduce-scatter of a padded copy and an
  // all-gather (coll/collectives.cc allreduce_apply): 1.5 model copies above --zero 0's heap,
  // measured 1.53 / 1.51 / 1.35 at 2 / 4 / 8 ranks (the copy, and half a model not yet traced
  // to its buffer; two copies before the early chunks stayed in the kernel).
  // Across hosts of several ranks each the all-reduce is the hosts' hierarchy
  // (coll/hierarchical.h): only the peers' all-reduce of a 1/L block crosses tcp, beside
  // the block itself (measured, 2 hosts of 2 over 1 Gbit/s, ddp: 3.98 MB, priced 4.09 so;
  // before the early payloads stayed in the kernel, not measured since).
  if (!c.shared_memory && workers > 1 && (s == "ddp" || s == "localsgd" || fed)) {
    const int per_host = std::clamp(c.ranks_on_node(workers), 1, workers), hosts = workers / per_host;
    if (per_host > 1 && hosts > 1) {
      copies += (2.0 * (hosts - 1) / hosts + 1) / per_host;
    } else {
      const double window = std::min(call_b / workers, static_cast<double>(kReduceWindowBytes));
      copies += window / bytes - (fed ? 0 : 1);
      const double per_core = static_cast<double>(c.ranks_on_node(workers)) / std::max(1, c.cores_per_node);
      if (per_core > 1)
        copies += std::min(2.0 * (workers - 1) / workers, (s == "ddp" ? 0.5 : 1.0 / 3) * (per_core - 1));
    }
    if (s == "ddp" && l.zero > 0) copies += 1.5;
  }
  p.buffers_b = copies * bytes +
                (read_pieces ? (workers - 1) * std::min(kReadPieceBytes, bytes / workers) : 0) +
                (shared_params ? kReadPieceBytes : 0) +
                (streamed_piece ? std::min(kReadPieceBytes, call_b / workers) : 0);
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
    //   sync on one host, through the window: no push buffers, its slot in their place: 4
    //          copies whatever w (4.25 MB at 2, 4 and 8 ranks).
    const double per_worker = l.ps_sync ? 1.0 : 2.0, fixed = l.ps_sync ? 3.0 : 1.0;
    const double pushes = ps_window ? 1.0 : per_worker * workers;
    const double server = (pushes + fixed + opt_states) * bytes / l.servers;
    // A worker's replies land in its parameters; through the window its gradient is its slot.
    // (Async workers keep no reply beside their parameters: at 0.2 and 0.94 MB models the
    // 2-rank heap read 0.8 copies under what one more priced, 2026-12-02.)
    const double worker =
        p.weights_b + p.grads_b + p.optimizer_b + p.activations_b + (ps_window || !l.ps_sync ? 0 : bytes);
    p.buffers_b = std::max(worker, server) - (p.weights_b + p.grads_b + p.optimizer_b + p.activations_b);
  }
  // (Over tcp with more ranks than cores, gossip and sync ps were charged one more message of
  // the model's size waiting in the transport's buffers, from dv-b1 (2026-12-01: 8.35 / 7.18
  // MB at 4 ranks on 2 cores over loopback, against 7.29 / 6.12 without it). Since every
  // receive is posted before its message can come, 23 of 24 runs at 4 ranks in four
  // validations (dv-s2 to dv-t1, 2026-12-03/04) read 7.30 and 6.13 MB, which that message
  // over-priced by 13% and 15%; one gossip run read 7.70, a partial chunk, not a model.)
  // The epoch's order of the training set (sim_costs.h kOrderBytesPerRow), and fedavg's
  // partition of it among its clients.
  const double train_rows = static_cast<double>(l.train_rows > 0 ? l.train_rows : kDefaultTrainRows);
  p.buffers_b += kOrderBytesPerRow * train_rows * (s == "fedavg" ? 2 : 1);
  Group all{workers, 1};
  // What rewriting a buffer a peer core read last costs a byte, where the buffer is zeroed or
  // copied into whole (ddp's gradient, ps's slots): Cluster::handoff_overwrite_s_per_byte.
  const double overwrite = c.handoff_overwrite_s_per_byte();
  if (s == "ddp" && workers > 1) {
    if (node_n <= c.cores_per_node && c.shared_memory) {
      // One rank per core keeps its caches from step to step, except for the lines its peers
      // touched in the all-reduce: they read (N-1)/N of this rank's gradient in place (the
      // window), which the next backward takes back, and with the fused ZeRO wrote (N-1)/N
      // of the shared parameters, which the next forward fetches from their caches (with a
      // copy per rank: the owners' slices, which the copy out of the slots fetches). Priced
      // at the calibrated hand-off rates (plan/calibrate_cache.h; older files: the 2-rank
      // exchange's per byte, both ways). Far-apart vCPUs: ddp's passes ~0.50 ms against
      // localsgd's 0.38; a 16-vCPU VM: the same. With more ranks than cores the co-located
      // ranks' own steps evict the caches anyway, which the slowdown curve charges.
      // Where the all-reduce itself is priced by a timed window all-reduce, the rewrite is in
      // that figure already: back to back in place, each call writes the lines the peers read
      // in the one before, as backward does in a step, and in a step the all-reduce then
      // writes lines backward just took back. Both charged, ddp at 2 ranks with the cores far
      // read +10..+25% in all fifteen such runs of twelve validations (2026-11-30; 0.79-0.90 ms
      // against 0.98-1.00 in the last three, the hand-off 0.16 of it); without the second,
      // eight of the twelve priced again read a lower median error, one a higher.
      const double remote = (workers - 1.0) / workers * bytes;
      const double copy = c.link_at(false, remote * (l.zero > 0 ? 2 : 1), true).beta_s_per_byte;
      const bool timed_window = ddp_window && c.measured_allreduce_window_s(workers, remote) >= 0;
      // (Backward zeroes the gradient first: the overwrite's rate.)
      if (!timed_window) p.compute_s += remote * (overwrite >= 0 ? overwrite : copy);
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
    // More ranks than cores: the step's forward and backward end one core at a time at the
    // buckets (Cluster::meeting_penalty), and the buckets' all-reduces are priced back to back
    // rather than with the calibration's gap factor, which took the same imbalance as a
    // multiple of the call. The gap sweep found the excess growing with the compute, not with
    // the calls; repriced over five validations (dv-u2, dv-u1, dv-t3, dv-t1, dv-t2) ddp at 8
    // ranks read +18.0 / +2.2 / +17.2 / +18.3 / +3.5% where the gap factor read +27.4 / +21.9 /
    // +4.6 / +5.6 / -8.0%, the rows beyond 25% of the five tables 5 -> 3. (Without the refill
    // below as well, every 4- and 8-rank row read -17..-34%: the penalty does not count it.)
    const double meet = c.meeting_penalty(node_n);
    const bool penalised = meet > 0;
    if (penalised) p.compute_s *= 1 + meet;
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
      // On one host the bucket is reduced in place in the gradient's window (ddp_window),
      // timed as such where the calibration has it (sim_costs.h window_allreduce_s).
      const double ar = ddp_window ? window_allreduce_s(c, all, len, node_n, !penalised)
                                   : allreduce_s(c, all, len, node_n, !penalised);
      const double cost = ar + (l.zero > 0 ? step_s / workers * len / bytes : 0);
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
    // (Each of them one way: LinkSizes::send where the link has it; between hosts where the
    // job spans them.)
    const CostParams lk = link_of(c, Group{n, 1}, per_server, true, true);
    p.comm_s = 2 * (lk.alpha_s + per_server * lk.beta_s_per_byte) * comm_slow;
    // ... unless the server's own side is longer: it takes the W pushes and sends the W
    // replies one after another on its thread, each a one-way transfer of its slice, while
    // the workers wait for it: alone on the node, so not slowed by their number. (Priced
    // before as one copy of an exchange each, half the exchange's beta at W slices: over
    // loopback tcp at 4 ranks, 0.42 ms where the server's trace showed 3 pushes and 3
    // replies of 0.94 MB in 0.97 ms, each near a one-way transfer's 90-150 us, 2026-12-04.)
    const double serial = 2 * workers * (lk.alpha_s + per_server * lk.beta_s_per_byte);
    p.comm_s = std::max(p.comm_s, serial);
    // Through the window (sync, one host) a worker's gradient is computed in its slot; it
    // copies the slices out of the servers' slots, a server its slice into its slot (each
    // copy reads and writes its bytes); words go each way. (Before the gradient was placed
    // in the slot, this charged one copy's bytes once for the three copies: the 2-rank push +
    // pull took 0.35-0.48 ms where it predicted 0.24, server's step included.)
    if (ps_window) {
      const CostParams word = c.link_at(false, 1, true);
      p.comm_s = (2 * word.alpha_s + 2 * (bytes + per_server) / c.elementwise_bps) * comm_slow;
    }
    // Workers run no optimizer. A synchronous server sums W pushes and steps its slice while
    // they wait, alone on the node (sum_bytes per element and push, below); an asynchronous
    // one (the default) applies each push as its own step and copies a reply snapshot (8 bytes
    // touched per element), one push at a time under its lock: W of them per step.
    p.optimizer_s = l.ps_sync ? (P * c.sgd_ns_per_param * 1e-9 + workers * P * sum_bytes / c.elementwise_bps) / l.servers
                              : workers * (P * c.sgd_ns_per_param * 1e-9 + P * 8 / c.elementwise_bps) / l.servers;
    // Through the window with a core per rank, each side rewrites lines the other read last
    // step: a worker's backward its gradient slot (the servers summed it), a server's step
    // its slice (the workers pulled it), at the calibrated hand-off rate (as ddp's window,
    // above; older files have none and pay nothing here). On the EPYC VM with its cores far
    // apart (0.31-0.35 ns/B) a 2-rank step took 1.6 ms against 0.93 close (dv-i2, 2026-11-30).
    // With more ranks than cores the same rewrites lie on the step's path, where the reader
    // ran on another core: a worker's slot was summed by its server, on another core with
    // probability 1 - 1/cores, and written while the workers share the cores (slowed as
    // their passes are); a server's slice was pulled by every worker, some of them on
    // another core unless all W shared its own (1 - (1/cores)^W), and written while the
    // workers wait. When they were priced only in the node's floor below (the CPU work over
    // the cores), sync ps at 4 ranks read -40% in every run whose cores were far apart (ten runs of
    // four validations, 2026-11-30: 1.48-1.76 ms against 0.98-1.04): the floor is a bound on
    // the node's throughput, while these rewrites wait on each other step by step (perf of
    // such a run: the weight gradient into the slot 2.0x, the copies 2.8x, the server's sum
    // 2.1x their CPU with the cores close).
    // Both sides overwrite whole lines (the worker zeroes its slot before backward, the server
    // copies its slice into its slot): the store rate where the calibration has it
    // (calibrate_cache.h). With the rewrite's rate (0.41 ns/B far) sync ps at 2 and 4 ranks
    // read +76..+108% in every far run of dv-s1 and dv-s2 (2026-12-01), where the store rate
    // read 0.02.
    if (ps_window && overwrite >= 0) {
      const bool beyond = node_n > c.cores_per_node;
      const double inv = 1.0 / c.cores_per_node;
      const double worker_share = beyond ? (1 - inv) * pass_slow : 1.0;
      const double server_share = beyond ? 1 - std::pow(inv, workers) : 1.0;
      p.compute_s += worker_share * bytes * overwrite;
      p.optimizer_s += server_share * per_server * overwrite;
    }
    p.dp_bytes = 2 * bytes;
  } else if (s == "localsgd") {
    // Parameters averaged every sync_every steps.
    p.comm_s = allreduce_s(c, all, bytes, node_n) / std::max(1, l.sync_every);
    // With more ranks than cores the H steps between averages end one core at a time
    // (Cluster::meeting_penalty): dv-t3 and dv-u1 read localsgd at 4 and 8 ranks -22..-32%
    // without it.
    const double a = c.meeting_penalty(node_n);
    p.compute_s *= 1 + a;
    p.optimizer_s *= 1 + a;
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
        // The ranks still training meet at the round's end, their cores unevenly loaded
        // (Cluster::meeting_penalty): fedavg at 4 and 8 ranks read -11..-36% without it
        // (2026-12-01, 16-round runs and dv-u1).
        const int active = static_cast<int>(load.size() - i);
        wall += (load[i] - done) * c.compute_slowdown(c.busiest_core_ranks(active)) * (1 + c.meeting_penalty(c.ranks_on_node(active)));
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
    // Through the window (one host) the model is trained in this rank's slot and a one-byte
    // word goes each way per neighbour (the exchange's latency); the mix reads the
    // neighbours' slots where they lie and writes the rank's other slot.
    // The mix reads deg + 1 models and writes one, in the element-wise calibration's measure
    // (bytes read and written): deg + 2 models in place (the inboxes' path), deg + 3 through
    // the window, whose output is the other slot, in no cache yet (the write allocates its
    // lines first). Priced as the deg + 1 models read, the window's mix took 2.4x its
    // prediction at 2 ranks on the EPYC VM (252 us a step, traced) and 2-2.8x at 4 ranks on a
    // 16-core Xeon (240-280 us).
    // The rate: the calibration's timing of this very mix, two ranks at once on a model of
    // this size (Cluster::mix_bps, plan/calibrate_mix.h), where the file has it; else the
    // element-wise rate over 16 MiB arrays, which a model of a few MB, whose slots stay in
    // the caches, beats by ~2x (the 2-vCPU Xeon: 12.2 GB/s element-wise, the mix of the
    // validation's 0.94 MB model 22-27 GB/s).
    const CostParams lk = link_of(c, all, gossip_window ? 1 : bytes, true);
    const double move = gossip_window ? (mix_shared ? 2 : 1) * degree * lk.alpha_s
                                      : degree * (lk.alpha_s + bytes * lk.beta_s_per_byte);
    p.comm_s = (move + mix_share * mix_models * bytes / mix_bps) * comm_slow;
    p.dp_bytes = degree * bytes;
  }
  // Ranks that meet every step and share a core refill their caches each time they get it
  // back (sim_costs.h lockstep_refill_s): ddp, gossip and a synchronous parameter server's
  // workers. Local SGD meets every H steps and an asynchronous server's workers never wait
  // for each other: neither is charged. (Sync ps at 8 ranks, once its hand-offs were priced
  // at the store rate: -21% and -33% in dv-t2 and dv-s2 without the refill, +9% and -13%
  // with it.)
  if (s == "ddp" || s == "gossip" || (s == "ps" && l.ps_sync))
    p.comm_s += lockstep_refill_s(c, workers > 1 ? node_n : 1, bytes);
  // More ranks than cores (gossip, ps): the cores run every rank's work in turn, so a step
  // takes at least the node's CPU work over its cores. Besides each rank's compute, that
  // work is copying: a message is copied twice (into the peer's ring, out of it: its share
  // of the 2-rank exchange's beta, taken at the node's working set, n x the model, where
  // the copies fall out of cache), gossip's mix streams deg + 2 models, and an asynchronous
  // server applies every push as its own optimizer step and copies a reply snapshot. The
  // rates at a core per rank do not see this: at 8 ranks on 2 cores the measured steps were
  // 2.2x (gossip) and 1.9x (ps) what they predicted, and perf put a third of the CPU in memcpy.
  // The memory-bound part (gossip's mix, the window's copies, a server's sums: priced per
  // byte at elementwise_bps) is not spread over the cores at one core's rate each: the
  // cores share the memory bandwidth, so it takes its bytes over the node's rate with every
  // core streaming (Cluster::node_stream_bps; on the EPYC VM the peers' triad ran 10.1 GB/s
  // on one core and 12.2 on both). perf of gossip at 8 ranks: the mix's kernels 32% of the
  // CPU, at 11.5 GB/s a core where one core alone streams 20. The time-sharing penalty is a
  // compute effect and is not applied to it.
  if ((s == "gossip" || s == "ps") && workers > 1 && node_n > c.cores_per_node) {
    const double per_byte = c.link_at(false, bytes * node_n, true).beta_s_per_byte;
    const double penalty = c.compute_slowdown(node_n) * c.cores_per_node / node_n;
    // Over tcp a message's CPU at this many ranks a core, where the calibration timed the
    // tcp all-reduce at node_n ranks (sim_costs.h tcp_message_cpu_s_per_byte): a message
    // waits in the socket until its reader is switched in, and both of its copies run then.
    const double tcp_msg = tcp_message_cpu_s_per_byte(c, node_n, bytes);
    double node_cpu = 0, node_stream_b = 0, node_mix_s = 0;
    if (s == "gossip") {
      // Since every receive is posted before its message can come (gossip.cc), a model
      // crosses at the exchange's own rate, not at the rate of the node's working set
      // (which priced the transport's extra heap copy: 4 and 8 ranks +47% after the change).
      // A rank's share of its degree exchanges is the exchange's time (each of the two
      // cores of a 2-rank exchange copies one message into a ring and one out). The mix
      // is element-wise (x = (x + inboxes) / (deg + 1): deg + 1 models read); priced as deg
      // + 2 copies at half the exchange's rate it over-predicted the 4- and 8-rank rows by
      // 46-48% (2026-11-25, dv-y3). Here the reads alone, not the step's deg + 3 with the
      // write (above): over the 4- and 8-rank rows of two validations on 2 cores (dv-z3, dv-z4)
      // deg + 3 read +14 / +1% and +37 / +33%, deg + 1 -9 / -23% and +6 / -0.4%. (With more
      // ranks than cores every slot of the node stays in the shared cache, which the node's
      // streaming rate, measured through memory, does not see; not traced.)
      // With the mix timed by the calibration (Cluster::mix_points) the node's mixes take
      // their whole traffic (mix_models, as above) at that rate on every core at once: the
      // two-thread timing on `cores` cores, but not beyond the node's streaming rate scaled
      // by what the caches gave two threads over one core's stream. On the 2-vCPU Xeon the
      // 4- and 8-rank steps measured gossip's cost beyond localsgd's at 0.37-0.57 and
      // 0.69-1.0 ms (five validations), which the reads-only rule priced at 0.86-0.99 and
      // 1.64-1.85 ms from the streaming rate; the whole traffic at the timed mix's 23 GB/s a
      // core is 0.41 and 0.82 ms.
      // Through the window a rank copies nothing (it trains in its slot).
      const double msg_byte = tcp_msg > 0 ? tcp_msg : c.link_at(false, bytes, true).beta_s_per_byte;
      const double own = (p.compute_s + p.optimizer_s) / slow;
      const double copying = gossip_window ? 0.0 : degree * bytes * msg_byte;
      node_cpu = n * (own + copying);
      if (c.mix_points.empty()) {
        node_stream_b = mix_share * n * (degree + 1) * bytes;
      } else {
        const double node_mix_bps = std::min(c.cores_per_node * mix_bps,
                                             std::max(2 * mix_bps, c.node_stream_bps() * mix_bps / c.elementwise_bps));
        node_mix_s = mix_share * n * mix_models * bytes / node_mix_bps;
      }
    } else {
      const double own = p.compute_s / slow;
      const double server = l.ps_sync ? P * c.sgd_ns_per_param * 1e-9
                                      : workers * (P * c.sgd_ns_per_param * 1e-9 + bytes * per_byte / 2);
      if (l.ps_sync) node_stream_b += workers * P * sum_bytes;
      // A worker's copies: its push and pull through the rings, or its pull out of the
      // window (read and written).
      node_cpu = workers * (own + (ps_window ? 0.0 : 2 * bytes * (tcp_msg > 0 ? tcp_msg : per_byte))) + server;
      if (ps_window) node_stream_b += workers * 2 * bytes;
      // Through the window each side rewrites lines the other read last step (a worker its
      // gradient slot, a server its slice), at the calibrated hand-off rate, where the
      // reader ran on another core: with the ranks spread over the cores, a share 1 - 1/cores
      // of them (as with a core per rank above; the close verdict's rate is ~0). On the EPYC
      // VM with the cores far apart, sync ps at 4 and 8 ranks took 1.13-1.75 ms and 1.67-2.17
      // where half or more of the run's samples read far, against 0.89-1.07 and 1.16-1.51
      // with a fifth or fewer (the forty-first and forty-second sessions' validations), and
      // this cost was priced nowhere.
      if (ps_window && overwrite > 0) node_cpu += (1.0 - 1.0 / c.cores_per_node) * (workers + 1) * bytes * overwrite;
    }
    const double share = static_cast<double>(node_n) / n;  // of the job's work on this node
    const double floor = node_cpu * share / c.cores_per_node * std::max(1.0, penalty) +
                         node_stream_b * share / c.node_stream_bps() + node_mix_s * share;
    const double step = p.compute_s + p.comm_s + p.optimizer_s;
    if (floor > step) p.comm_s += floor - step;  // the copies, exposed
  }
  p.step_s = p.compute_s + p.comm_s + p.optimizer_s;
  return p;
}

}  // namespace dtrain::plan::sim

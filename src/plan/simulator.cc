#include "plan/simulator.h"

#include <algorithm>

#include "base/error.h"
#include "plan/sim_costs.h"

namespace dtrain::plan {

Prediction blend_times(const Prediction& a, const Prediction& b, double w_b) {
  const double w = std::clamp(w_b, 0.0, 1.0);
  Prediction p = a;
  p.step_s = (1 - w) * a.step_s + w * b.step_s;
  p.compute_s = (1 - w) * a.compute_s + w * b.compute_s;
  p.comm_s = (1 - w) * a.comm_s + w * b.comm_s;
  p.bubble_s = (1 - w) * a.bubble_s + w * b.bubble_s;
  p.optimizer_s = (1 - w) * a.optimizer_s + w * b.optimizer_s;
  // The heap's high-water mark holds what either verdict's path kept (a call's scratch stays
  // in the communicator's pool once taken).
  if (w > 0) p.buffers_b = std::max(a.buffers_b, b.buffers_b);
  return p;
}

// The checks and what both kinds of model share (sim::StepBasics), then the MLP's
// data-parallel strategies (simulate_data_parallel.cc) or the GPT on dp x tp x pp
// (simulate_model_parallel.cc).
Prediction simulate(const ModelSpec& m, const Layout& l, const Cluster& c, int64_t batch, double memory_limit_b) {
  const std::string& s = l.strategy;
  DT_CHECK(l.dp >= 1 && l.tp >= 1 && l.pp >= 1 && l.micro >= 1 && l.virtual_stages >= 1, InvalidArgument,
           "layout " << l.describe() << ": every degree must be >= 1");
  bool model_parallel = s == "tp" || s == "pp" || s == "zero" || s == "hybrid";
  DT_CHECK(!model_parallel || m.gpt, InvalidArgument, "--strategy " << s << " needs the GPT (--model gpt:...)");
  DT_CHECK((l.tp == 1 && l.pp == 1) || m.gpt, InvalidArgument, "tp and pp need the GPT (--model gpt:...)");
  DT_CHECK(!m.gpt || m.heads % l.tp == 0, InvalidArgument, "tp " << l.tp << " must divide heads " << m.heads);
  DT_CHECK(l.zero < 3 || (l.tp == 1 && l.pp == 1), InvalidArgument, "ZeRO-3 needs tp = pp = 1");
  sim::StepBasics b;
  b.cluster = &c;
  b.n = l.ranks();
  // Oversubscription slows the ranks that COMPUTE AT THE SAME TIME: a rank waiting in the
  // transport sleeps (futex) and leaves its core to the others. Data-parallel workers all
  // compute at once; a ps server waits while its workers compute; a pipeline's stages
  // compute only part of the step (simulate_model_parallel: the slowdown at the average
  // number of computing ranks, solved by iterating the schedule simulation).
  // Where the ranks meet every step (ddp's all-reduce, a synchronous server's push and pull,
  // gossip's neighbours) and more of them compute than there are cores, the step waits for
  // the busiest core: a step's compute (a few hundred us) is shorter than the scheduler's
  // time slice, so the ranks do not share the cores evenly but run to their next wait one
  // after another, ceil(r / c) on some core (fedavg's rounds in simulate_data_parallel.cc
  // say the same). Traced for sync ps at 4 ranks (3 workers) on the EPYC VM: two workers'
  // gradients ran together in ~300 us and the third's after them (~310 us), a 660 us phase
  // where r / c priced 0.40 ms; ps at 4 ranks read -23..-35% in every validation and ddp at
  // 3 ranks -27..-31% (2026-11-30). Asynchronous servers, Local SGD between its averages and
  // the pipeline keep the even share.
  const int computing = s == "ps" ? std::max(1, b.n - l.servers) : b.n;
  const bool lockstep = s == "ddp" || s == "gossip" || (s == "ps" && l.ps_sync);
  b.slow = c.compute_slowdown(lockstep ? c.busiest_core_ranks(computing) : c.ranks_on_node(computing));
  // Links were calibrated with two ranks on the node, so their alpha/beta already carry the
  // two-rank contention: communication slows only by what more ranks add beyond that.
  b.two = c.compute_slowdown(std::min(2, c.ranks_on_node(b.n)));
  b.comm_slow = std::max(1.0, c.compute_slowdown(c.ranks_on_node(b.n)) / b.two);
  b.node_n = c.ranks_on_node(b.n);
  // The optimizer's state arrays (AdamW m and v, SGD's momentum, none for plain SGD) and the
  // calibrated rate of its step at the size each rank steps (StepBasics::optimizer_step_s).
  b.family = optimizer_family(l.optimizer, m.gpt);
  b.opt_states = optimizer_states(b.family);
  return m.gpt ? sim::simulate_model_parallel(m, l, c, batch, memory_limit_b, b)
               : sim::simulate_data_parallel(m, l, c, batch, b);
}

std::optional<UnitExtrapolation> extrapolated_unit(const ModelSpec& m, const Cluster& c, double factor) {
  std::optional<UnitExtrapolation> worst;
  for (const Unit& u : m.units) {
    const UnitCost* uc = c.unit_for(u.kind, m.unit_spec);
    if (!uc || uc->timed.count({m.unit_spec, u.params})) continue;
    double largest = 0;
    for (const auto& [key, points] : uc->timed) largest = std::max(largest, key.second);
    if (!(largest > 0) || u.params <= factor * largest) continue;
    if (!worst || u.params / largest > worst->params / worst->largest_timed_params)
      worst = UnitExtrapolation{u.name, u.kind, u.params, largest};
  }
  return worst;
}

}  // namespace dtrain::plan

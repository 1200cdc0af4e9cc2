// plan/calibrate_compute.h — measure the compute side of the machine model.
//
// Contract
// - measure_compute(seconds) times, on the calling thread with one BLAS thread:
//     GEMMs at the shapes the models run (the MLP's 784-256-128-10 layers at a 32-row
//     micro-batch, the GPT's qkv/fc/proj/head products at 768 tokens x width 128) -> GFLOP/s
//     per shape, and gemm_gflops = their median;
//     an element-wise a = a * b + c over 16 MiB arrays -> GB/s of bytes touched;
//     one optimizer step (sgd with momentum, adamw) over 1M parameters -> ns per parameter;
//     the executors' units (calibrate_units.h): forward/backward of an MLP layer (three MLPs,
//     784-256-128-10, kWideMlp and kNarrowMlp) and of the GPT's embedding, block and head at a few
//     shapes, fitted per kind (plus `extra_specs`), each point the same share of `seconds`;
//     the MLP executors' whole step (parallel/share_grad.h ShareGradient::compute, the call
//     ddp/localsgd/gossip/fedavg/ps make, on a synthetic 256 MiB dataset of the model's
//     shape, minibatches of rows drawn at random as training draws them) at 8, 16, 64 and
//     128 items, less its layers timed at those items right beside it (step_around_layers):
//     what the step costs around its layers (gathering the batch from memory, the loss,
//     scaling and handing off the gradient), kind "mlp_step", points in items x
//     mlp_step_work (simulator.h), signed (a whole step may run faster than its layers timed
//     apart); the layer lines alone
//     predicted a 1-rank ddp step of the MLP 784-256-128-10 20-25% short; the section says
//     "mlp_step_random_rows": true (the line carries the gather; older files timed hot rows)
//     and "mlp_step_of_timed_layers": true (older files subtracted the fitted layer lines and
//     clamped at 0; Cluster's loader re-bases them);
//     oversubscription: 1, 2, 4, ... up to cores, and 2 x cores forked PROCESSES each running
//     a fixed number of GPT-block passes; slowdown = the mean pass while all of them run /
//     one process's (the curve the simulator interpolates; run_processes' steady_pass_s), and penalty = slowdown at 2 x cores / 2 (>= 1: worse than fair
//     sharing);
//     gossip's mix at 256 KiB-16 MiB models, two threads on two CPUs (calibrate_mix.h).
//   Each measurement runs about `seconds` (the median repetition: the typical cost a run pays).
// - compute_json / apply_compute move the figures to and from the "compute" section of the
//   calibration file (versioned: cluster.h kCalibrationVersion) that this_machine() reads.
// Thread-safety: starts and joins its own threads; call from one thread.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/calibrate_cache.h"
#include "plan/calibrate_mix.h"
#include "plan/calibrate_units.h"

namespace dtrain::plan {

struct ComputeRates {
  std::vector<std::pair<std::string, double>> gemm_by_shape;  // "MxNxK" -> GFLOP/s
  double gemm_gflops = 0, elementwise_gbps = 0;
  // The same element-wise loop on every core at once, each on its own arrays: the node's
  // total (0 on one core). Memory bandwidth is shared: on the 2-vCPU EPYC VM two cores
  // streamed 1.2-1.55x one core's bytes, not 2x (peers' membw: triad 10.1 -> 12.2 GB/s).
  double elementwise_node_gbps = 0;
  // Copying whole rows picked at random from a buffer far larger than the caches (256 MiB of
  // 3 KiB rows): what gathering a minibatch's examples from a dataset costs a step.
  double gather_gbps = 0;
  double adamw_ns_per_param = 0, sgd_ns_per_param = 0;  // AdamW / SGD with momentum at 1M parameters
  // Each optimizer family's step at 64K, 256K, 1M and 4M parameters: (parameters, ns per parameter).
  std::map<std::string, std::vector<std::pair<double, double>>> optimizer_rates;
  double oversub_penalty = 1;
  int cores = 1;
  std::vector<std::pair<double, double>> slowdown;  // (processes on the node, wall / one process's)
  double probe_pass_s = 0;  // one process's GPT-block pass in the slowdown measurement, start-up included
  // speed_probe() right before the unit timings and right after the MLP step's, the geometric
  // mean of the two: the pace the unit lines were taken at ("speed_probe_s").
  double speed_probe_s = 0;
  CacheHandoff handoff;     // cross-core hand-off per byte (plan/calibrate_cache.h)
  // Gossip's mix timed as two ranks run it (plan/calibrate_mix.h): (model bytes, bytes/s in
  // the simulator's measure), "mix_gbps_by_size", and by the cores' distance,
  // "mix_gbps_by_cores"; empty on one CPU.
  MixRates mix;
  std::vector<UnitPoint> unit_points;
  std::map<std::string, UnitCost> units;
};

ComputeRates measure_compute(double seconds, const std::vector<std::string>& extra_specs = {});
// The "mlp_step" points of one MLP spec (see above); none for a GPT spec. Each item count is
// timed in kStepRounds rounds, each the whole step and then each layer at that count, about
// `seconds` for the step's timings and as much for each layer's.
std::vector<UnitPoint> mlp_step_points(const std::string& spec, double seconds);
// The step around its layers from rounds that timed both back to back: the median of the
// rounds' (step - layers), signed. This VM changes speed by 1.3-1.8x within minutes: a step
// timed in a fast minute less layer lines fitted in a slow one read -25 to -193 us (a whole
// 784-256-128-10 step at 8-128 items is 125-500 us), and the MLP rows of a validation ran
// 30-60% short of their runs (2026-11-29, dv-p2). A round's two terms share its minute.
double step_around_layers(const std::vector<double>& step_s, const std::vector<double>& layers_s);
// The oversubscription curve alone (three rounds of 1, cores, 2 x cores processes, each
// running a fixed 12 passes of a 4-block GPT stack; the median round per k): what `dtrain
// bench calibrate --slowdown-only` refreshes beside a run. pass_s (optional): one process's
// seconds per pass, start-up included, the machine's present speed (comparable between calls
// because the pass count is fixed).
std::vector<std::pair<double, double>> measure_slowdown(int cores, double* pass_s = nullptr);
// The speed probe: seconds of one warm forward+backward pass of a GPT block (width 128, four
// 64-token sequences) on the calling thread, one BLAS thread, the median pass over about
// `seconds`. What the machine's compute pace is now, comparable between a full calibration
// and `bench calibrate --probe-only` beside a run: both time the same warm passes in-process
// (measure_slowdown's pass_s counts a forked process's start-up and its first touch of every
// buffer, and read 1.5-2x slower alone than inside a calibration whose parent heap was warm).
double speed_probe(double seconds);
// The speed probe on each CPU this thread may run on, one after another: the thread pinned to
// each in turn (its affinity restored after), `seconds_each` a CPU. The passes in CPU order
// (empty where the affinity cannot be read). On the 2-vCPU VM one vCPU at a time ran 25-35%
// slow for minutes (2026-12-05: in a 2-rank run one rank computed 1.01 s against the other's
// 0.80), which an unpinned probe sees or misses by where the scheduler puts it.
std::vector<double> speed_probe_each_cpu(double seconds_each);
// The pass that `ranks` ranks stepping in lockstep compute at, from the passes by CPU: at best
// the ranks take the min(ranks, CPUs) fastest CPUs, and each step waits for the slowest of
// those; with more ranks than CPUs every CPU carries some, and the slowest sets the pace.
// 0 for no passes.
double lockstep_probe(std::vector<double> passes, int ranks);
// The process counts the curve is measured at besides 1: every power of two below the cores,
// the cores, and twice the cores (2 cores: 2 and 4; 16: 2, 4, 8, 16 and 32).
std::vector<int> slowdown_process_counts(int cores);
// A warning for the user where the curve says the cores were not free while it was measured:
// two processes (on a host of 2 cores or more) ran more than kBusySlowdown times one
// process's pace: another job, or a VM whose vCPUs got less than a core each (this 2-vCPU VM
// read 1.55x once, 1.04-1.15x otherwise; the 16-vCPU host 1.03-1.13x). Every prediction
// from that file would be priced at that load. More processes may slow down more on a free
// host (the 16-vCPU host: 1.28-1.72x at 16, shared memory bandwidth and clocks), so only the
// pair is judged. "" when it looks free.
constexpr double kBusySlowdown = 1.3;
std::string slowdown_warning(const std::vector<std::pair<double, double>>& curve, int cores);
// The compute section's "handoff" object ({} when not measured): bytes and both rates in ns
// per byte, and under "by_cores" the same from the rounds of each verdict seen ({"close":
// {..., "rounds": n}}); Cluster::handoff_* read it back.
nlohmann::json handoff_json(const CacheHandoff& h);
// The compute section's "mix_gbps_by_size": [[model bytes, GB/s], ...] ([] when not measured).
nlohmann::json mix_json(const std::vector<std::pair<double, double>>& by_size);
// Its "mix_gbps_by_cores": {"close": [[model bytes, GB/s], ...], "far": ...}, the verdicts seen.
nlohmann::json mix_by_cores_json(const std::map<std::string, std::vector<std::pair<double, double>>>& by_cores);
// `procs` forked processes each running `passes` forward+backward passes of `p` concurrently
// (throws Error when a process cannot be started or fails). wall_s: from the first fork to
// the last exit. steady_pass_s: the mean wall time of a pass while every process was in its
// timed passes (the window from the last process's first timed pass to the first process's
// last), which leaves out the start-up, the warm-up and the tail where fewer run; 0 when no
// pass fell inside that window.
struct ProcessRun {
  double wall_s = 0, steady_pass_s = 0;
  int steady_passes = 0;
};
ProcessRun run_processes(const UnitPoint& p, int procs, int passes);
nlohmann::json compute_json(const ComputeRates& r);
// The rank counts `dtrain bench calibrate` times the collectives at (processes, shm): 2, 4 and
// 8, then every larger power of two up to the host's cores, at most 64. On 2 cores that is
// 2, 4 and 8 (ranks beyond the cores); on a 16-core host also 16, where before a 16-rank plan
// took the 8-rank figures scaled by the formula.
std::vector<int> calibrated_rank_counts(int cores);

}  // namespace dtrain::plan

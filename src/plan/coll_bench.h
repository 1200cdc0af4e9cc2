// plan/coll_bench.h — measuring collectives: the engine behind `dtrain bench collectives` and
// the collective part of `dtrain bench calibrate`.
//
// Contract
// - run_collective_bench(comm, cfg) is collective over comm: every rank calls it with the same
//   config. For each op x algorithm x size it warms up (and with cfg.settle_s keeps making
//   untimed calls while the shared-memory path choice still learns that op and size), agrees
//   on an iteration count (rank 0
//   decides from a trial run so each point takes about cfg.seconds), times the loop on every
//   rank and reduces the per-iteration time with max over ranks (the nccl-tests convention).
//   With cfg.check it then runs the collective once more on closed-form inputs and counts
//   wrong elements over all ranks. With cfg.passes > 1 all of that is repeated in passes over
//   every row in order, and a row reports its median pass (time and prediction) with the
//   fastest and slowest pass's time: a single pass on a shared VM agrees with a repeat minutes
//   later within 15% in about half the rows (docs/PLANNER.md).
// - Sizes are bytes of the whole buffer as nccl-tests counts them: the all-reduce/broadcast/
//   reduce buffer, the all-gather/gather output, the reduce-scatter/scatter/all-to-all input;
//   counts are rounded down to a multiple of the group size where the op needs it (and to at
//   least one element per rank).
// - Rank 0 prints one row per point in nccl-tests columns (size, count, type, redop, root,
//   algo, time us, algbw, busbw, #wrong) plus the prediction and its error, and the rows are
//   returned on every rank (rank 0's values). The prediction is the calibration's own
//   measurement where it has one for the shape (ranks as processes, the default path,
//   float32 sum, broadcast from rank 0; over shm "links_by_size"."intra" by rank count, over
//   tcp with every rank on this host "links_by_size"."inter" by rank count, as plan::over_fabric
//   prices a training job; interpolated in log-log between its sizes), column src "cal";
//   else the cost model's formula, src "model".
//   The formulas have no term for ranks beyond the cores or for the shared-memory paths'
//   switch points; the calibrated tables are what a prediction can be held to there.
// - bench_collectives_threads(nproc, kind, cfg) runs the same in-process with ranks as
//   threads (for tests and for machines without the launcher).
// Thread-safety: one call per communicator at a time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "coll/communicator.h"
#include "coll/types.h"
#include "plan/cluster.h"

namespace dtrain {

struct CollBenchConfig {
  std::vector<CollOp> ops{CollOp::kAllreduce};
  std::vector<std::string> algos{"auto"};  // names, "auto" or "all"
  DType dtype = DType::kFloat32;
  ReduceOp redop = ReduceOp::kSum;
  int root = 0;
  std::vector<size_t> sizes;
  double seconds = 0.2;
  int max_iters = 1000000;
  int warmup = 2;
  // After the warm-up, untimed calls while the shared-memory context's timed path choice is
  // still learning the row's op and size (ShmContext::paths_exploring), up to this many
  // seconds (0: none): a row is then timed on the path a long run settles on, not on the
  // trial of the other (coll/path_tuner.h: a first try comes after 64 calls or 1 GiB, more
  // than a 0.2 s row of 4-16 MiB calls holds with ranks beyond the cores). The calls it took
  // are the row's settle_calls.
  double settle_s = 0;
  // Every row is timed this many times, in passes over all rows in order (a row's passes are
  // seconds to minutes apart, as the machine's moods are), and reported as its median pass
  // with the fastest and slowest beside it. 1: one pass, printed as it goes.
  int passes = 1;
  bool check = false;
  bool in_place = false;
  bool deterministic = false;
  size_t segment_bytes = 0;
  bool shm_context = false;  // pass a ShmContext (shared-memory fast paths) on the shm transport
  bool print = true;
  bool ranks_are_threads = false;  // bench_collectives_threads sets it (no calibrated prediction)
  // CPU seconds each rank computes before every timed call (as between a training step's
  // collectives); the row's time includes it, and its prediction is 0 (none).
  double gap_s = 0;
  // The all-reduce as ddp runs it on one host (parallel/data_parallel.cc): the buffer in a
  // shared-memory window (coll/shm_context.h ShmWindow), reduced in place by allreduce_apply
  // reading every rank's buffer where it lies; the row's algo is "window/<algorithm>". float32,
  // every rank on one host.
  bool window = false;
  // With window: every size is timed twice, as above and as ddp's lockstep step around the
  // call (row algo "window+touch/<algorithm>"): before each call the rank writes its gradient
  // into the window from private parameters of the same size (read the parameters, write the
  // gradient: backward's last touch of both), after it applies the sum to the parameters
  // (the optimizer: read both, write the parameters). Such a row's touch_us is the touches'
  // own time, each rank alone in turn (thread CPU time, the fastest of repeats, the slowest
  // rank's), so that, with more ranks than cores, the row's time less the plain row's and
  // less k touches (k ranks a core) is what the ranks pay for refilling their caches after
  // their core's other ranks ran: a probe of what plan/sim_costs.h lockstep_refill_s prices
  // (docs/history/planner.md, the sixty-eighth session: too noisy a difference to calibrate it from).
  bool touch = false;
  // The counts {close, far} of a sampler of the cores running beside the job
  // (cli/cores_sampler.h), read by rank 0 before and after each row's timed calls; empty:
  // none. A row with no verdict of its own (more ranks than two) is priced with each
  // verdict's tables in the share of far samples (far_share): those taken during its timed
  // calls where they are 3 or more, else the latest 3 or more before its end (far_share_from
  // "recent"); where the sampler has not taken 3, with the mixed tables.
  std::function<std::pair<int64_t, int64_t>()> cores_samples;
};

struct CollBenchRow {
  std::string op, algo, transport, type, redop;
  // shm_direct's path: "slots" (the context's shared-memory slots) or "reads" (cross-memory
  // reads of the peers' buffers), coll/shm_context.h shm_direct_takes_slots; "" otherwise.
  std::string path;
  // Two ranks whose distance is re-probed (ShmContext::after_call): the share of the row's
  // timed calls made under the "far" verdict; more ranks, with cores_samples: the share of
  // the samples taken during its timed calls that read "far" (rank 0's rows only); -1 where
  // no verdict was counted.
  double far_share = -1;
  // With cores_samples: "calls" (the samples during its timed calls), "recent" (the latest 3
  // or more before its end, under 3 during them), "" (not priced by samples).
  std::string far_share_from;
  int world_size = 0, root = -1;
  size_t size_bytes = 0, count = 0;
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0, predicted_us = 0;
  std::string predicted_from = "model";  // "cal": the calibration's measurement; "model": the formula
  int64_t wrong = -1;  // -1: not checked
  int64_t iters = 0;
  double touch_us = 0;  // CollBenchConfig::touch rows: the touches' time, each rank alone (0: not one)
  int64_t settle_calls = 0;  // untimed calls while the path choice settled (CollBenchConfig::settle_s)
  // CollBenchConfig::passes: how many passes timed the row (time_us and predicted_us are the
  // median pass's), and the fastest and slowest pass's time.
  int passes = 1;
  double time_min_us = 0, time_max_us = 0;
};

std::vector<size_t> parse_size_range(const std::string& spec, int factor);
double bus_factor(CollOp op, int p);
// The calibration's measured seconds for one call of this shape (see the contract), or -1
// where it has none: `cal` holds the tables of the job's fabric in its intra-host tables (the
// file's own for shm; plan::over_fabric's for tcp on one host), `tables` says they apply
// (false: tcp across hosts, which no table of this host prices).
double calibrated_seconds(const plan::Cluster& cal, CollOp op, int p, double bytes, const CollBenchConfig& cfg,
                          Algorithm requested, bool tables);

std::vector<CollBenchRow> run_collective_bench(Communicator& comm, const CollBenchConfig& cfg);
std::vector<CollBenchRow> bench_collectives_threads(int nproc, TransportKind kind, const CollBenchConfig& cfg);
std::string rows_to_json(const std::vector<CollBenchRow>& rows);

}  // namespace dtrain

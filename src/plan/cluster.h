// plan/cluster.h — the machine a plan is for: nodes, ranks, compute rates, memory, links.
//
// Contract
// - Cluster describes nodes x ranks_per_node ranks. Compute: gemm_flops (FLOP/s one rank gets
//   on the models' matrix products), elementwise_bps (bytes/s for memory-bound ops),
//   optimizer_ns_per_param / sgd_ns_per_param (one AdamW / SGD step per parameter), cores_per_node (ranks beyond it
//   time-share: compute slows by ranks/cores times `oversub_penalty`), memory_gb per rank.
//   Optional: "optimizer_rates" (each optimizer family's step by size, optimizer_ns),
//   "gather_gbps" (random dataset rows gathered into a minibatch), "mlp_step_random_rows"
//   (a boolean: the MLP step line already carries that gather) and "elementwise_node_gbps"
//   (memory-bound bytes/s of the whole host, every core streaming) and "mix_gbps_by_size"
//   (gossip's mix as two ranks run it, by model size), all written by calibrate.
//   Links: intra (inside a node) and inter (between nodes) alpha-beta-gamma (coll/cost_model.h).
// - load_cluster(path) reads a JSON cluster file (docs/clusters/*.json); a missing or
//   malformed field is an InvalidArgument naming the file, the field and what it should be.
// - this_machine(path) describes the machine it runs on: cores from the OS, links from the
//   calibration the collectives use (coll/cost_model.h), compute rates from the "compute"
//   section of the same calibration file when `dtrain bench calibrate` wrote one, else the
//   defaults below (source says which; a run's prediction says "calibrated": false). The speed
//   probe re-measured after calibration ("speed_probe_now_s", bench calibrate --probe-only)
//   scales compute by now / at calibration ("speed_probe_s"), scale_compute. The file's
//   "version": 3 carries the unit timings ("compute"."units"); a version 2 file (GEMM rates
//   only) is read without them and `source` says to calibrate again; a version above 3 is
//   InvalidArgument (written by a newer dtrain).
// - A cluster file may carry "units" in the same format (calibrate_units.h units_json).
// - Links by size: `dtrain bench calibrate` also times, at p ranks, the all-reduce the
//   executors call and a two-way exchange with one peer at 16 KiB .. 16 MiB (the calibration
//   file's "links_by_size": {"intra"|"inter": {"p", "allreduce": [[bytes, s]], "exchange":
//   [[bytes, s]]}}; a cluster file may carry "intra_by_size" / "inter_by_size" alike).
//   link_at(inter, bytes, p2p) is that link's CostParams with beta replaced by the beta the
//   nearest measured sizes imply (the ring formula solved for beta at each all-reduce point;
//   (T - alpha) / bytes for an exchange), interpolated in log(bytes) and held flat beyond the
//   ends; without a table it is the link's own (the 16 MiB beta). measured_allreduce_s gives the
//   time itself where the calibration measured that many ranks ("allreduce_by_ranks": {"4":
//   [[bytes, s]], "8": ...}: what ranks beyond the cores cost, which no formula here has);
//   "inter" carries the same tables over loopback tcp, which a job over tcp on one host is
//   priced from (over_fabric moves them to intra_sizes; its copies are kernel work on the
//   ranks' own cores, so no formula on the 2-rank link holds there either).
// - cluster_to_json writes the same format load_cluster reads.
// Thread-safety: plain values; this_machine reads files.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "coll/cost_model.h"
#include "plan/calibrate_units.h"

namespace dtrain::plan {

// Cluster::meeting_penalty's shape in the stretch of compute between meetings: the calibrated
// alpha up to the knee (about the kernel's scheduling period on 2 cores: a sweep of the gap,
// 2026-12-02, read no decay up to 4.8 ms at 4 ranks and 0.21 -> 0.13 from 2.4 to 9.6 ms at 8),
// then down with this exponent (the same sweep: 0.5 at 8 ranks from 40 to 200 ms, 0.3 at 4).
inline constexpr double kMeetingKneeS = 0.010;
inline constexpr double kMeetingTailExponent = 0.5;

// The largest cache sysfs lists for CPU 0 ("32768K"), in bytes; 0 when it cannot tell.
double sysfs_llc_bytes();

// The calibration file version `dtrain bench calibrate` writes and this_machine reads.
// 2: collectives + GEMM/element-wise/optimizer rates; 3: + unit timings ("compute"."units").
constexpr int kCalibrationVersion = 3;

struct LinkSizes {
  int p = 2;  // ranks the all-reduce points were measured with
  std::vector<std::pair<double, double>> allreduce, exchange;  // (bytes, seconds), bytes increasing
  // A one-way transfer to one peer (bytes, seconds; "send"), timed where it differs from
  // half an exchange: over tcp the kernel copies both ways on the two cores, and a two-way
  // exchange of 1 MiB on loopback took 581 us where one way took 290-310 (2026-12-02). A
  // shared-memory calibration times none (each side copies its own half: an exchange is
  // one way's time), and one-way transfers take the exchange's figures.
  std::vector<std::pair<double, double>> send;
  // All-reduce (bytes, seconds) measured at other rank counts (the ranks may outnumber the cores).
  std::map<int, std::vector<std::pair<double, double>>> allreduce_by_ranks;
  // Reduce-scatter and all-gather (bytes = the whole buffer, seconds) by rank count, 2 included:
  // ZeRO's sync. Their shared-memory paths differ from the all-reduce's (the context's slots up
  // to 16 MiB), so half an all-reduce is not their cost.
  std::map<int, std::vector<std::pair<double, double>>> reducescatter_by_ranks, allgather_by_ranks;
  // Broadcast from rank 0 (bytes = the buffer, seconds) by rank count: what `dtrain bench
  // collectives` predicts a calibrated broadcast from.
  std::map<int, std::vector<std::pair<double, double>>> broadcast_by_ranks;
  // The all-reduce as ddp runs it on one host (bytes, seconds) by rank count
  // ("allreduce_window_by_ranks"; `bench collectives --window`): the gradient in a
  // shared-memory window, each owner reducing its block from every rank's buffer where it lies.
  // On the 2-vCPU EPYC VM it took 118 against 253 us at 1 MiB on 4 ranks, 226 against 422 on 8
  // (2026-11-30), and ddp's step at 8 ranks ran 1.00-1.13 ms against 1.21-1.28 with
  // --no-window.
  std::map<int, std::vector<std::pair<double, double>>> allreduce_window_by_ranks;
  // By rank count: what a collective costs when every rank computes between calls, as in
  // training, over what it costs back to back (the tables above), >= 1 ("gap_factor_by_ranks":
  // {"8": 1.3}). Ranks that outnumber the cores arrive at a call in their time slices' order.
  std::map<int, double> gap_factor_by_ranks;
  // By rank count beyond the cores: the cores' imbalance between meetings ("meeting_penalty_by_
  // ranks": {"4": 0.12, "8": 0.30}), the median over the calibration's gap passes of what a
  // call with compute before it costs beyond the compute spread evenly over the cores and the
  // call back to back, per second of that compute on the node: alpha = (t - g p / c - t0) /
  // (g p / c). Ranks that meet only after a stretch of compute finish it one core at a time:
  // the kernel rarely holds the same number of them on every core, and the last core's
  // stretch sets the meeting. The gap sweep (1 MiB all-reduce, g = 150-2400 us, three rounds,
  // the EPYC VM, 2026-12-01) put that excess at 9-17% of g p / c at 4 ranks and 20-31% at
  // 8 (the rounds' medians), the excess growing with g, where free-running processes share the cores evenly (the slowdown
  // curve: 2.0-2.2 at 4 processes on 2 cores). Cluster::meeting_penalty reads it.
  // Timed with g = 600 us (cli/bench_calibrate_jobs.h kGapUs). The kernel's balancer evens
  // out a long stretch, so its share shrinks (Cluster::meeting_penalty's stretch).
  std::map<int, double> meeting_penalty_by_ranks;
  // By rank count: the smallest all-reduce, in bytes, from which every measured size went
  // through the shared-memory context's slots ("allreduce_slots_from_by_ranks": {"2": 262144};
  // a rank count absent: none did). With a core per rank the executors take the slots only
  // where the context's probe found the cores close (coll/shm_direct.cc), which the planner
  // cannot know but from this; the slots keep one model-sized buffer less.
  std::map<int, double> allreduce_slots_from_by_ranks;
  // The 2-rank tables again, split by the verdict of the context's round-trip probe in the
  // job that measured them ("two_rank_by_cores": {"close": {...}, "far": {...}}, each with
  // "allreduce", "reducescatter", "allgather", "broadcast" points and "allreduce_slots_from"
  // bytes, 0 = none). On a VM whose two vCPUs move, consecutive jobs probe close (the slots,
  // fast) or far apart (cross-memory reads), and the tables above mix the two; a run that
  // knows its verdict prices its own path (with_core_distance).
  // Each verdict may also hold "allreduce_window": ddp's all-reduce in its window
  // (allreduce_window_by_ranks), whose 1 MiB call took 252 us close and 440-457 far at 2
  // ranks in one calibration (2026-11-30, 09:20), and a 2-rank ddp step 0.46-0.50 ms close
  // against 0.76-0.87 far in the validations before it.
  struct VerdictTables {
    std::vector<std::pair<double, double>> allreduce, reducescatter, allgather, broadcast, allreduce_window;
    double allreduce_slots_from = 0;
    double gap_factor = 0;  // 0: none measured under this verdict (with_core_distance then applies none)
  };
  std::map<std::string, VerdictTables> two_rank_by_cores;
  // The same for more ranks than the 2 ("by_cores_by_ranks": {"4": {"close": {...}, "far":
  // {...}}}), each also with its "gap_factor". The calibration times the cores' round trip
  // from its own process right before and after each job, and files a pass under a verdict
  // only where both agree. On the 2-vCPU EPYC VM 4 ranks' 1 MiB all-reduce took 230-300 us
  // back to back with the cores close and 840-880 far (2026-11-30).
  std::map<int, std::map<std::string, VerdictTables>> by_cores_by_ranks;
};
LinkSizes link_sizes_from_json(const nlohmann::json& j, const std::string& where);
// allreduce_slots_from_by_ranks' entry from one rank count's measured all-reduces (bytes ->
// whether the call took the slots): the smallest size from which every larger one did, 0
// where the largest did not.
double slots_from_sizes(const std::map<double, bool>& took_slots);
nlohmann::json link_sizes_json(const LinkSizes& t);
// The beta (s/byte) each measured point implies: all-reduce points through the ring formula
// at t.p ranks with `base`'s alpha and gamma, exchange points as (T - alpha) / bytes; clamped
// to >= 1e-12. Empty when the table is.
// one_way: a p2p transfer one way, from the "send" points where the table has them.
std::vector<std::pair<double, double>> implied_betas(const LinkSizes& t, const CostParams& base, bool p2p,
                                                     bool one_way = false);
// Interpolates (bytes, beta) points in log(bytes); flat beyond the ends; `fallback` if empty.
double beta_at(const std::vector<std::pair<double, double>>& betas, double bytes, double fallback);

// One tensor-parallel block timed in place (plan/calibrate_tp.h): seconds per block of one
// rank's shard over `items` sequences, all-reduces and their waits included.
struct TpBlockPoint {
  int64_t items = 0;
  double fwd_s = 0, bwd_s = 0;
};
// A block shape at one tensor-parallel degree, its points by increasing items. In the
// calibration file (compute.tp_blocks) and a cluster file ("tp_blocks"): rows
// {"spec": "gpt:...", "tp": p, "items": n, "fwd_s": s, "bwd_s": s[, "ranks": r]}, as `bench
// tp-blocks` writes them. ranks: the job's ranks the block was timed among, r / p groups of p
// timing it at once (`bench tp-blocks -n r --tp p`); absent, p (one group, the whole job).
struct TpBlockFigure {
  int64_t heads = 0, width = 0, context = 0;
  int tp = 1;
  std::vector<TpBlockPoint> points;
  int ranks = 1;  // the job's ranks it was timed among: tp when the group was the whole job
};
std::vector<TpBlockFigure> tp_blocks_from_json(const nlohmann::json& rows, const std::string& where);
nlohmann::json tp_blocks_json(const std::vector<TpBlockFigure>& figures);

struct Cluster {
  std::string name = "this-machine";
  int nodes = 1;
  int ranks_per_node = 0;  // 0: as many as the job asks for (one node)
  int cores_per_node = 2;
  // Uncalibrated defaults: about half what the project's EPYC VM calibrates (GEMM 124-134
  // GFLOP/s, element-wise 53-71 GB/s, AdamW 0.34-0.38 ns and SGD 0.09-0.10 ns a parameter),
  // so that an older core is not off by much more. (8 GFLOP/s, from a scalar-era build,
  // predicted 288 ms for a 21 ms ddp step of the README's MLP.)
  double gemm_flops = 60e9;
  double elementwise_bps = 25e9;
  // The node's memory-bound bytes/s with every core streaming at once (calibrate:
  // "elementwise_node_gbps"; a cluster file may set it); 0 = not measured: taken as
  // cores_per_node x elementwise_bps. What ranks sharing the cores stream in a step (copies,
  // gossip's mix, a server's sums) is priced at it (simulate_data_parallel).
  double elementwise_node_bps = 0;
  double node_stream_bps() const {
    return elementwise_node_bps > 0 ? elementwise_node_bps : cores_per_node * elementwise_bps;
  }
  // Bytes/s of gathering random dataset rows into a minibatch (calibrate: "gather_gbps");
  // 0 = not measured: the MLP's steps then carry no gather term.
  double gather_bps = 0;
  // The "mlp_step" line was timed on random rows of a dataset larger than the caches, so it
  // carries the gather itself (calibrate: "mlp_step_random_rows"); the gather term above is
  // then not added to it. False for older files, whose step line gathered hot rows.
  bool mlp_step_random_rows = false;
  double optimizer_ns_per_param = 0.7;  // AdamW (the GPT)
  double sgd_ns_per_param = 0.2;        // SGD with momentum
  // Optimizer steps timed by family ("sgd", "momentum", "adamw"; optimizer_family) and size:
  // (parameters, ns per parameter) points, parameters increasing. A step's rate depends on
  // whether its arrays stay in cache (plain SGD on this machine's Xeon: 0.12 ns a parameter
  // at 235K, 0.27 at 1M), so optimizer_ns interpolates them in log(parameters); a family
  // without points falls back to the scalars above (plain SGD: momentum's at 12/20 of the
  // bytes).
  std::map<std::string, std::vector<std::pair<double, double>>> optimizer_rates;
  double oversub_penalty = 1.15;
  // Measured (ranks on the node, slowdown) points, increasing; when present compute_slowdown
  // interpolates them (and extrapolates the last one's slowdown per rank) instead of the
  // penalty formula.
  std::vector<std::pair<double, double>> slowdown;
  // Gossip's mix through the window, timed by the calibration as two ranks run it
  // (plan/calibrate_mix.h; "mix_gbps_by_size", a cluster file may carry it too): (model
  // bytes, seconds per byte of the mix's traffic) points, sizes increasing. Empty: priced at
  // elementwise_bps, as before the calibration timed it.
  std::vector<std::pair<double, double>> mix_points;
  // Bytes/s of gossip's mix for a model of `model_bytes` (its traffic counted as the
  // simulator counts it: deg + 3 models through the window): the measured points
  // interpolated in log(size), flat beyond the ends; elementwise_bps without points.
  double mix_bps(double model_bytes) const;
  // The complete graph's shared mix (every graph at 2 ranks: each rank averages 1/p of the
  // elements into every rank's next slot; "mix_shared_gbps_by_size", plan/calibrate_mix.h),
  // in the same measure; mix_shared_bps falls back to mix_bps where the file has none.
  std::vector<std::pair<double, double>> mix_shared_points;
  double mix_shared_bps(double model_bytes) const;
  // Cross-core cache hand-off, seconds per byte (plan/calibrate_cache.h; compute "handoff"):
  // rewriting lines a peer core just read, reading lines a peer core just wrote. < 0: not
  // measured (the simulator then prices a hand-off at the 2-rank exchange's rate per byte).
  double handoff_write_s_per_byte = -1, handoff_read_s_per_byte = -1;
  // Overwriting whole lines a peer core just read (memset, memcpy: "store_after_read"), as
  // sync ps writes its window; < 0 where the file has none (ps then takes the rewrite's rate).
  double handoff_store_s_per_byte = -1;
  // What overwriting a buffer a peer read costs per byte: the store rate where measured, else
  // the rewrite's (older files), else < 0.
  double handoff_overwrite_s_per_byte() const {
    return handoff_store_s_per_byte >= 0 ? handoff_store_s_per_byte : handoff_write_s_per_byte;
  }
  // Both again by the cores' distance ("mix_gbps_by_cores"; the handoff's "by_cores"): from
  // the calibration's rounds whose cache-line round trip ShmContext would call "close" or
  // "far". On the 2-vCPU EPYC VM the hand-off cost 0.02 ns/B close and 0.35-0.45 far. A
  // 2-rank run that knows its verdict is priced with its own (with_core_distance).
  std::map<std::string, std::vector<std::pair<double, double>>> mix_points_by_cores, mix_shared_points_by_cores;
  // mix_bps from the points of the verdict `verdict` where the file has them, else mix_bps().
  double mix_bps_under(const std::string& verdict, double model_bytes) const;
  // "close" or "far" where with_core_distance chose that verdict's figures; "" otherwise.
  std::string cores_verdict;
  struct HandoffByCores {
    double write_s_per_byte = -1, read_s_per_byte = -1, store_s_per_byte = -1;  // store: < 0 in older files
  };
  std::map<std::string, HandoffByCores> handoff_by_cores;
  double memory_gb = 8;
  CostParams intra, inter;
  LinkSizes intra_sizes, inter_sizes;  // empty: cost every size from intra/inter's beta
  // Whether a node's ranks reach each other through shared memory (ddp's gradient window,
  // the collectives' slots and in-place reads, gossip's and sync ps's windows, the cores'
  // cache hand-offs). False for a job whose transfers all go through the network stack (a
  // run over tcp, on one host or several: over_fabric).
  bool shared_memory = true;
  // A job of n ranks whose ranks all share one node's memory: the executors' window paths.
  bool shares_memory(int n) const { return shared_memory && ranks_on_node(n) >= n; }
  // The tcp link between hosts as a calibration run across hosts timed it (the file's
  // "links_by_size"."hosts"; `dtrain run --nnodes H ... -- dtrain bench calibrate --transport
  // tcp --no-compute`); without it (hosts_calibrated false) over_fabric prices between hosts
  // as this host's loopback tcp, and says so.
  CostParams hosts_link;
  LinkSizes hosts_sizes;
  bool hosts_calibrated = false;
  // over_fabric's machine before it swapped the links (null otherwise): the tensor-parallel
  // blocks were timed on its shared memory, so their excess over the formula is worked out
  // against its all-reduces (simulate_model_parallel.cc tp_block_ratio).
  std::shared_ptr<const Cluster> timed_on;
  // Calibrated forward/backward cost lines of the executors' units, by kind (calibrate_units.h);
  // a kind missing here is costed from gemm_flops and elementwise_bps.
  std::map<std::string, UnitCost> units;
  // Tensor-parallel blocks timed in place, by shape and degree (empty: none calibrated).
  std::vector<TpBlockFigure> tp_blocks;
  std::string source = "default";
  // The calibration's speed probe (plan/calibrate_compute.h speed_probe; 0: none) and the
  // pace at_compute_pace has put every compute figure at (1: as calibrated).
  double speed_probe_s = 0, compute_scale = 1;

  // The last-level cache one rank's optimizer state competes for (this_machine reads it from
  // sysfs; a cluster file may set "llc_mb").
  double llc_bytes = 32.0 * (1 << 20);
  // Seconds of one optimizer step over `params` parameters: the calibrated rate per parameter
  // (timed with its arrays in cache), or, where the arrays it walks (`bytes_per_param` each
  // parameter: 20 for SGD with momentum, 28 for AdamW) exceed half the last-level cache, what
  // streaming them at elementwise_bps takes if that is longer. (The README's MLP, 2.9 M
  // parameters: 0.26 ms predicted from the in-cache rate, 0.88-1.0 ms measured a step.)
  double optimizer_s(double params, double ns_per_param, double bytes_per_param) const;
  // The calibrated line for units of `kind` in the model `spec`: the one fitted on that very
  // model ("kind@spec", when the calibration timed it: `dtrain bench calibrate --models`),
  // else the kind's, else nullptr.
  const UnitCost* unit_for(const std::string& kind, const std::string& spec) const;
  // The timed tensor-parallel block of degree tp whose width is nearest (in ratio) to
  // `width`, the exact shape first, among those within 2x of its width and context; nullptr
  // when there is none.
  // ranks: the figure timed among that many of the job's ranks (0: the group alone).
  const TpBlockFigure* tp_block_for(int64_t heads, int64_t width, int64_t context, int tp, int ranks = 0) const;
  // Ranks on one node for a job of n ranks.
  int ranks_on_node(int n) const;
  // The node's ranks of a job of n as the busiest core sees them when each runs to its next
  // wait before another takes the core: ceil(r / cores) x cores where r outnumbers the cores
  // (3 ranks on 2 cores: 4, two on one of them), else r.
  int busiest_core_ranks(int n) const;
  // How much slower compute runs on a node where r ranks compute at once (r >= 1, may be
  // fractional: the average number computing over a step).
  double compute_slowdown(double ranks_on_node) const;
  // Of compute that ends at a meeting of the node's ranks (LinkSizes::meeting_penalty_by_ranks
  // of the intra-node tables): alpha at r ranks on the node, 0 where r fits the cores or the
  // calibration has none, linear between calibrated counts (and from 0 at the cores), the
  // largest count's beyond them.
  // Such compute costs (1 + alpha) x its time-shared time.
  // stretch_s > 0: the node's time-shared compute between two meetings (a rank's CPU between
  // them x ranks / cores), and alpha follows it: the calibrated alpha up to kMeetingKneeS,
  // then alpha x (knee / stretch)^kMeetingTailExponent.
  double meeting_penalty(int ranks_on_node, double stretch_s = 0) const;
  // ns per parameter of one step of `family` over `params` parameters (see optimizer_rates).
  double optimizer_ns(const std::string& family, double params) const;
  // The measured seconds of an all-reduce of `bytes` among p ranks inside a node, when the
  // calibration timed p ranks (allreduce_by_ranks, or the 2-rank points): log-log
  // interpolation, the smallest size's time below it, linear in bytes beyond the largest;
  // -1 when p was not measured.
  double measured_allreduce_s(int p, double bytes) const;
  // The same for a reduce-scatter or all-gather of `bytes` (the whole buffer) among p ranks
  // inside a node, from reducescatter_by_ranks / allgather_by_ranks; -1 when not measured.
  double measured_reducescatter_s(int p, double bytes) const;
  double measured_allgather_s(int p, double bytes) const;
  double measured_broadcast_s(int p, double bytes) const;
  double measured_allreduce_window_s(int p, double bytes) const;  // allreduce_window_by_ranks
  // The link's alpha-beta-gamma for a transfer of `bytes` (see LinkSizes above); one_way: a
  // p2p transfer in one direction (LinkSizes::send where timed).
  CostParams link_at(bool inter_node, double bytes, bool p2p, bool one_way = false) const;
};

Cluster load_cluster(const std::string& path);
// A link's alpha-beta-gamma as cluster and calibration files write it: {"alpha_us",
// "beta_gbps", "gamma_gbps"}.
nlohmann::json link_json(const CostParams& c);
Cluster cluster_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json cluster_to_json(const Cluster& c);

// The optimizer families the models price: "sgd" (plain), "momentum" (SGD with momentum or
// Nesterov), "adamw" (Adam or AdamW), from a `dtrain train --optimizer` name; "" gives the
// model's default as dtrain train has it (AdamW for the GPT, plain SGD for the MLP). An
// unknown name is InvalidArgument.
std::string optimizer_family(const std::string& name, bool gpt);
// The state arrays a family keeps per parameter (0, 1, 2) and the bytes its step touches per
// parameter (parameter, gradient and state reads, parameter and state writes: 12, 20, 28).
int optimizer_states(const std::string& family);
double optimizer_step_bytes(const std::string& family);
// The optimizer_rates section of a calibration or cluster file: {"family": [[parameters, ns],
// ...]}, parameters increasing, ns > 0.
std::map<std::string, std::vector<std::pair<double, double>>> optimizer_rates_from_json(const nlohmann::json& j,
                                                                                       const std::string& where);
// The "mix_gbps_by_size" array of a calibration or cluster file ([[model bytes, GB/s], ...],
// bytes increasing, both > 0) as Cluster::mix_points; InvalidArgument naming `where` else.
std::vector<std::pair<double, double>> mix_points_from_json(const nlohmann::json& j, const std::string& where);
// The optional "mix_gbps_by_cores" object of the same file section `j` ({"close": [...],
// "far": [...]}, each as mix_gbps_by_size) as Cluster::mix_points_by_cores; empty if absent.
std::map<std::string, std::vector<std::pair<double, double>>> mix_points_by_cores_from_json(
    const nlohmann::json& j, const std::string& where, const char* key = "mix_gbps_by_cores");
// c with every compute figure (unit lines and timings, tensor-parallel blocks, GEMM,
// element-wise, gather, optimizer and gossip mix rates) at `pace` times the calibration's time, whatever
// pace c was at before (compute_scale); pace is clamped to [0.25, 4] (a probe beyond that
// measured something else), and source says so. Links are left alone.
Cluster at_compute_pace(Cluster c, double pace);
// calibration_path: the calibration file (Settings::calibration_path() at the entry point).
Cluster this_machine(const std::string& calibration_path);
// The machine `c` as a job on `transport` ("shm", "tcp"; "" or "auto": shm on one host) over
// `hosts` hosts of `ranks_per_host` ranks each sees it. Over tcp every transfer takes the tcp
// link: intra becomes the calibration's tcp link and its tables (on one host, loopback), and
// shared_memory is false, so no window, slot or hand-off of the shared-memory paths is
// priced, nor their gap factors; the meeting penalty (the cores' imbalance) stays, and
// timed_on keeps the machine as calibrated for the tensor-parallel blocks timed on it,
// and a one-way send takes LinkSizes::send. Over several hosts
// (always tcp), nodes = hosts and ranks_per_node = ranks_per_host, and the link between
// nodes is hosts_link where a calibration timed it, else this host's loopback tcp; source
// says which. hosts <= 1 and shm: c unchanged.
Cluster over_fabric(Cluster c, const std::string& transport, int hosts, int ranks_per_host);
// One collective's table under a verdict: the verdict's own points; beyond the sizes they
// span, the mixed table's points as they are; within their span, at a size the verdict lacks,
// the mixed point scaled by the verdict's ratio to the mixed table at its neighbouring points
// (interpolated in log size). Sorted by size. mixed empty: the verdict's points alone.
std::vector<std::pair<double, double>> verdict_points_over_mixed(const std::vector<std::pair<double, double>>& verdict,
                                                                 const std::vector<std::pair<double, double>>& mixed);
// c with the 2-rank intra-node tables of the verdict "close" or "far" (a 2-rank job's
// ShmContext::cores_far()) in place of the mixed ones, where the calibration measured that
// verdict (LinkSizes::two_rank_by_cores), merged with the mixed ones by
// verdict_points_over_mixed, and the verdict's cache hand-off and gossip mix rates in place of
// the mixed ones where it has them; c unchanged otherwise. The same for each larger rank
// count the verdict has tables of (by_cores_by_ranks), with its gap factor, or none where it
// timed none. *used (optional) says whether it replaced anything.
Cluster with_core_distance(Cluster c, bool far, bool* used = nullptr);

}  // namespace dtrain::plan

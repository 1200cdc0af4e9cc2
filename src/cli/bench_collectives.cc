// dtrain bench collectives — every collective x algorithm x size, in nccl-tests columns.
//
//   dtrain bench collectives -n 4 --op allreduce,allgather --algo all --transport shm
//       --type float32 --sizes 8:256M --check --json rows.json
//
// Outside a job it relaunches itself as -n ranks through the launcher (or, with --threads,
// runs the ranks as threads of this process); inside a rank it builds one communicator per
// transport asked for over the job's store and runs cli/bench_coll_runner.h on it.
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <memory>

#include "base/env.h"
#include "base/error.h"
#include "cli/bench.h"
#include "cli/cores_sampler.h"
#include "plan/cluster.h"
#include "plan/coll_bench.h"
#include "cli/flags.h"
#include "launch/launch.h"
#include "coll/communicator.h"

namespace dtrain::cli {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= s.size();) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

// Whether the calibration file (DTRAIN_CALIBRATION or the default) holds the collectives'
// tables of both placements of the cores for n ranks (LinkSizes::by_cores_by_ranks).
bool calibrated_by_placement(int n) {
  try {
    const plan::Cluster cal = plan::this_machine(Settings::process().calibration_path());
    const auto& by = cal.intra_sizes.by_cores_by_ranks;
    const auto it = by.find(n);
    return it != by.end() && it->second.count("close") && it->second.count("far");
  } catch (const Error&) {
    return false;  // no file, or one the rows' prediction cannot read either
  }
}

}  // namespace

int bench_collectives(const Args& args) {
  Flags f("bench collectives", args);
  int n = static_cast<int>(f.get_int("nproc", 2, 1, 1024, "ranks to start", "n"));
  std::string ops = f.get_string("op", "allreduce",
                                 "comma list: allreduce, allgather, reducescatter, broadcast, reduce, gather, scatter, "
                                 "alltoall, barrier");
  std::string algos = f.get_string("algo", "auto", "algorithm name(s), auto, or all");
  std::string transport = f.get_string("transport", "shm", "shm, tcp, or both (shm,tcp)");
  std::string type = f.get_string("type", "float32", "element type", "t");
  std::string redop = f.get_string("redop", "sum", "sum, avg, prod, min or max", "o");
  int root = static_cast<int>(f.get_int("root", 0, 0, 1023, "root of rooted collectives", "r"));
  std::string sizes = f.get_string("sizes", "8:256M", "buffer sizes MIN:MAX (x --factor) or a list 8,64K,1M (K, M, G suffixes)");
  int factor = static_cast<int>(f.get_int("factor", 4, 2, 1024, "size multiplier between rows"));
  double seconds = f.get_double("seconds", 0.2, 1e-4, 3600, "target time per row");
  int warmup = static_cast<int>(f.get_int("warmup", 2, 0, 1000000, "untimed calls per row", "w"));
  double settle = f.get_double("settle", 2, 0, 3600,
                               "after the warm-up, untimed calls while the shared-memory path choice still learns the "
                               "row's op and size, up to this many seconds (0: none; JSON settle_calls)");
  int passes = static_cast<int>(f.get_int("passes", 1, 1, 1000,
                                          "time every row this many times, in passes over all rows, and report the median "
                                          "pass with the fastest and slowest (spread)"));
  bool check = f.get_bool("check", "verify every result against closed-form values (#wrong)");
  bool in_place = f.get_bool("inplace", "in-place all-reduce");
  bool deterministic = f.get_bool("deterministic", "rank-ordered reduction (bit-identical across algorithms)");
  std::string segment_text = f.get_string("segment", "0", "pipelining segment in bytes, K/M suffixes (0 = default 1 MiB)");
  bool shm_context = f.get_bool("shm-context", "pass a separately built ShmContext on shm (the default path already uses the communicator's own; DTRAIN_SHM_CONTEXT=0 turns that off)");
  bool threads = f.get_bool("threads", "run the ranks as threads of this process instead of processes");
  std::string json = f.get_string("json", "", "write the rows as JSON to FILE");
  double timeout = f.get_double("timeout", 300, 0.1, 1e6, "seconds any blocking call may wait");
  double gap_us = f.get_double("gap-us", 0, 0, 1e6,
                               "CPU microseconds each rank computes before every timed call, as training does between "
                               "collectives (time then includes it; no prediction)");
  bool window = f.get_bool("window", "the all-reduce as ddp runs it on one host: the buffer in a shared-memory window, "
                                     "reduced in place where it lies (float32, shm)");
  bool touch = f.get_bool("touch", "with --window: each size also as ddp's lockstep step around the call (gradient "
                                   "from private parameters before it, the sum into them after; algo window+touch, "
                                   "JSON touch_us the touches' time, each rank alone)");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("-n N [--op allreduce,...] [--algo ring|tree|...|auto|all] [--transport shm|tcp] "
                                  "[--type float32] [--sizes 8:256M] [--check] [--json FILE]")
                          .c_str());
    return 0;
  }
  f.finish();

  CollBenchConfig cfg;
  cfg.ops.clear();
  for (const auto& o : split_list(ops)) cfg.ops.push_back(parse_coll_op(o));
  cfg.algos = split_list(algos);
  for (const auto& a : cfg.algos)
    if (a != "all") parse_algorithm(a);  // reject typos before starting ranks
  cfg.dtype = parse_dtype(type);
  cfg.redop = parse_reduce_op(redop);
  cfg.root = root;
  cfg.sizes = parse_size_range(sizes, factor);
  cfg.seconds = seconds;
  cfg.warmup = warmup;
  cfg.settle_s = settle;
  cfg.passes = passes;
  cfg.check = check;
  cfg.in_place = in_place;
  cfg.deterministic = deterministic;
  cfg.shm_context = shm_context;
  cfg.gap_s = gap_us * 1e-6;
  cfg.window = window;
  cfg.touch = touch;
  DT_CHECK(!touch || window, InvalidArgument, "--touch times ddp's step around its window all-reduce: add --window");
  DT_CHECK(!window || (cfg.dtype == DType::kFloat32 && cfg.redop == ReduceOp::kSum && transport == "shm" && !in_place &&
                       !deterministic && !threads),
           InvalidArgument,
           "--window times ddp's in-place all-reduce: it needs --type float32, --redop sum, --transport shm, processes "
           "(not --threads) and neither --inplace nor --deterministic");
  cfg.segment_bytes = static_cast<size_t>(std::max<int64_t>(0, parse_size(segment_text, "--segment")));
  std::vector<TransportKind> kinds;
  for (const auto& k : split_list(transport)) {
    TransportKind kind = parse_transport_kind(k);
    DT_CHECK(kind != TransportKind::kAuto, InvalidArgument, "--transport: name shm or tcp, not auto");
    kinds.push_back(kind);
  }
  DT_CHECK(!kinds.empty(), InvalidArgument, "--transport: name at least one of shm, tcp");

  std::vector<CollBenchRow> rows;
  if (threads) {
    DT_CHECK(n >= 1, InvalidArgument, "-n must be >= 1");
    DT_CHECK(root >= 0 && root < n, InvalidArgument, "--root " << root << " outside 0.." << n - 1);
    for (TransportKind kind : kinds) {
      auto got = bench_collectives_threads(n, kind, cfg);
      rows.insert(rows.end(), got.begin(), got.end());
    }
  } else if (!launch::inside_launched_rank()) {
    DT_CHECK(n >= 1, InvalidArgument, "-n must be >= 1");
    launch::LaunchOptions o;
    o.nproc = n;
    o.timeout_s = timeout;
    o.tag_output = false;
    // More ranks than two on shm have no verdict of the cores' distance of their own (two
    // ranks' context re-probes it as calls go): the launcher, idle while they run, samples it
    // (cli/cores_sampler.h) and rank 0 prices each row by what its samples read. On the EPYC
    // VM the 4- and 8-rank rows run 2-4x slower far apart, and a job flips within seconds.
    // Only where the calibration has tables of each placement for this many ranks: elsewhere
    // the samples would price nothing, and a benchmark is left undisturbed by the probes.
    auto job = [&] { return launch::relaunch_command(o, {"bench", "collectives"}, args); };
    const bool shm = std::find(kinds.begin(), kinds.end(), TransportKind::kShm) != kinds.end();
    return shm && n > 2 && calibrated_by_placement(n) ? run_sampled_job(job, kRowSampleEvery) : job();
  } else {
    WorldInfo info = world_from_env();
    DT_CHECK(root >= 0 && root < info.size, InvalidArgument, "--root " << root << " outside 0.." << info.size - 1);
    std::shared_ptr<void> keepalive;
    auto store = open_world_store(info, &keepalive);
    cfg.print = info.rank == 0;
    if (info.rank == 0) cfg.cores_samples = launcher_samples(Settings::process());
    for (TransportKind kind : kinds) {
      TransportOptions t = info.transport;
      t.kind = kind;
      t.timeout_s = timeout;
      // The collectives' settings as any job reads them (DTRAIN_ALGO, DTRAIN_SHM_*, the
      // calibration file behind the pred column): the threads path had them, this one built
      // its communicator with the defaults and ignored them all.
      Communicator world(store, info.rank, info.size, t, std::string("collbench-") + transport_kind_name(kind), {},
                         coll_config_from(Settings::process()));
      auto got = run_collective_bench(world, cfg);
      rows.insert(rows.end(), got.begin(), got.end());
      world.barrier();
    }
    if (info.rank != 0) return 0;
  }
  if (!json.empty()) {
    std::ofstream out(json);
    DT_CHECK(out.good(), IoError, "cannot write --json file " << json);
    out << rows_to_json(rows);
  }
  int64_t wrong = 0;
  for (const auto& r : rows) wrong += r.wrong > 0 ? r.wrong : 0;
  if (wrong > 0) std::fprintf(stderr, "dtrain bench collectives: %lld wrong elements\n", static_cast<long long>(wrong));
  return wrong > 0 ? 1 : 0;
}

}  // namespace dtrain::cli

#include "plan/coll_bench.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/aligned.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "base/large_blocks.h"
#include "base/median.h"
#include "base/settings.h"
#include "coll/call.h"
#include "coll/collectives.h"
#include "coll/cost_model.h"
#include "coll/shm_context.h"
#include "plan/cluster.h"

namespace dtrain {
namespace {

// Closed-form inputs for --check: small integers, exact in every type for up to 8 ranks.
double value(int r, size_t i, ReduceOp op) {
  if (op == ReduceOp::kProd) return (r + i) % 3 == 0 ? 2 : 1;
  return 1 + static_cast<double>((r + i) % 4);
}
void put(DType t, void* p, size_t i, double v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(p)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_fp16(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(static_cast<int64_t>(v) & 0xff); break;
  }
}
double get(DType t, const void* p, size_t i) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat64: return static_cast<const double*>(p)[i];
    case DType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kUInt8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}
double reduced(int p, size_t i, ReduceOp op, DType t) {
  double acc = value(0, i, op);
  for (int r = 1; r < p; ++r) {
    double v = value(r, i, op);
    if (op == ReduceOp::kSum || op == ReduceOp::kAvg) acc += v;
    if (op == ReduceOp::kProd) acc *= v;
    if (op == ReduceOp::kMin) acc = std::min(acc, v);
    if (op == ReduceOp::kMax) acc = std::max(acc, v);
  }
  if (op == ReduceOp::kAvg) {
    bool integer = t == DType::kInt32 || t == DType::kInt64 || t == DType::kUInt8;
    acc = integer ? std::floor(acc / p) : acc / p;
  }
  if (t == DType::kUInt8) acc = static_cast<double>(static_cast<int64_t>(acc) & 0xff);
  return acc;
}
bool close_enough(double got, double want, DType t) {
  double tol = (t == DType::kFloat16 || t == DType::kBFloat16) ? 1e-2 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

struct Point {
  CollOp op;
  size_t per_rank, total, in_elems, out_elems;
};

Point shape(CollOp op, size_t bytes, size_t es, int p) {
  size_t n = std::max<size_t>(1, bytes / es);
  switch (op) {
    case CollOp::kAllgather:
    case CollOp::kGather: {
      size_t per = std::max<size_t>(1, n / p);
      return {op, per, per * p, per, per * p};
    }
    case CollOp::kReduceScatter:
    case CollOp::kScatter:
    case CollOp::kAlltoall: {
      size_t per = std::max<size_t>(1, n / p);
      return {op, per, per * p, per * p, op == CollOp::kAlltoall ? per * p : per};
    }
    default: return {op, n, n, n, n};
  }
}

// --window: the all-reduce's buffer in a shared-memory window, as ddp's gradient, and the
// blocks its owners reduce (made once per row, not per call).
struct WindowBuffer {
  std::unique_ptr<ShmWindow> window;
  std::vector<size_t> counts;
};

Algorithm run_once(Communicator& c, const Point& pt, Algorithm a, const CollBenchConfig& cfg, char* in, char* out,
                   ShmContext* ctx, const WindowBuffer* window = nullptr) {
  CollOptions o;
  o.shm = ctx;
  o.algorithm = a;
  o.segment_bytes = cfg.segment_bytes;
  o.deterministic = cfg.deterministic;
  DType t = cfg.dtype;
  switch (pt.op) {
    case CollOp::kAllreduce:
      if (window) {
        // ddp's bucket on one host: in place in the window, each owner reducing its block
        // from every rank's buffer where it lies (parallel/data_parallel.cc), nothing applied.
        float* f = reinterpret_cast<float*>(in);
        return allreduce_apply(c, f, f, window->counts, [](size_t, float*, size_t) { return false; }, AllreduceOptions{o},
                               window->window.get());
      }
      return allreduce(c, in, cfg.in_place ? in : out, pt.total, t, cfg.redop, AllreduceOptions{o});
    case CollOp::kBroadcast: return broadcast(c, in, pt.total, t, cfg.root, BroadcastOptions{o});
    case CollOp::kReduce: return reduce(c, in, out, pt.total, t, cfg.redop, cfg.root, ReduceOptions{o});
    case CollOp::kAllgather: return allgather(c, in, out, pt.per_rank, t, AllgatherOptions{o});
    case CollOp::kReduceScatter: return reduce_scatter(c, in, out, pt.per_rank, t, cfg.redop, ReduceScatterOptions{o});
    case CollOp::kGather: return gather(c, in, out, pt.per_rank, t, cfg.root, GatherOptions{o});
    case CollOp::kScatter: return scatter(c, in, out, pt.per_rank, t, cfg.root, ScatterOptions{o});
    case CollOp::kAlltoall: return alltoall(c, in, out, pt.per_rank, t, AlltoallOptions{o});
    case CollOp::kBarrier: return barrier(c, BarrierOptions{o});
  }
  return a;
}

// CollBenchConfig::settle_s: untimed calls while rank 0's context still learns which path the
// row's op and size take, for at most settle_s. Only rank 0 knows (its tuner times the
// calls), so before each call it tells the others whether one more comes, point to point:
// a collective would be a call of its own for the tuner to time. Returns the calls made.
int64_t settle_paths(Communicator& c, const Point& pt, CollOp op, Algorithm a, const CollBenchConfig& cfg, char* in,
                     char* out, ShmContext* ctx, const WindowBuffer* window) {
  constexpr uint32_t kSettleTag = 0x5e771e;
  const ShmContext* eff = ctx ? ctx : c.shm_context();
  const size_t bytes = pt.total * dtype_size(cfg.dtype);
  const double until = now_seconds() + cfg.settle_s;
  int64_t calls = 0;
  for (;;) {
    char more = 0;
    if (c.rank() == 0) {
      more = eff && eff->paths_exploring(op, bytes) && now_seconds() < until ? 1 : 0;
      for (int q = 1; q < c.size(); ++q) c.send(q, &more, 1, kSettleTag);
    } else {
      c.recv(0, &more, 1, kSettleTag);
    }
    if (!more) return calls;
    run_once(c, pt, a, cfg, in, out, ctx, window);
    ++calls;
  }
}

// Fills inputs, runs once, counts wrong elements on this rank.
int64_t check_once(Communicator& c, const Point& pt, Algorithm a, const CollBenchConfig& cfg, char* in, char* out,
                   ShmContext* ctx, const WindowBuffer* window) {
  const int p = c.size(), me = c.rank();
  const DType t = cfg.dtype;
  const ReduceOp op = cfg.redop;
  for (size_t i = 0; i < pt.in_elems; ++i) put(t, in, i, value(me, i, op));
  run_once(c, pt, a, cfg, in, out, ctx, window);
  const char* res = (cfg.in_place || window) && pt.op == CollOp::kAllreduce ? in : out;
  int64_t wrong = 0;
  auto expect = [&](const void* buf, size_t i, double want) { wrong += !close_enough(get(t, buf, i), want, t); };
  const size_t per = pt.per_rank;
  switch (pt.op) {
    case CollOp::kAllreduce:
      for (size_t i = 0; i < pt.total; ++i) expect(res, i, reduced(p, i, op, t));
      break;
    case CollOp::kBroadcast:
      for (size_t i = 0; i < pt.total; ++i) expect(in, i, value(cfg.root, i, op));
      break;
    case CollOp::kReduce:
      if (me == cfg.root)
        for (size_t i = 0; i < pt.total; ++i) expect(out, i, reduced(p, i, op, t));
      break;
    case CollOp::kAllgather:
      for (int q = 0; q < p; ++q)
        for (size_t j = 0; j < per; ++j) expect(out, q * per + j, value(q, j, op));
      break;
    case CollOp::kGather:
      if (me == cfg.root)
        for (int q = 0; q < p; ++q)
          for (size_t j = 0; j < per; ++j) expect(out, q * per + j, value(q, j, op));
      break;
    case CollOp::kReduceScatter:
      for (size_t j = 0; j < per; ++j) expect(out, j, reduced(p, me * per + j, op, t));
      break;
    case CollOp::kScatter:
      for (size_t j = 0; j < per; ++j) expect(out, j, value(cfg.root, me * per + j, op));
      break;
    case CollOp::kAlltoall:
      for (int q = 0; q < p; ++q)
        for (size_t j = 0; j < per; ++j) expect(out, q * per + j, value(q, me * per + j, op));
      break;
    case CollOp::kBarrier: break;
  }
  return wrong;
}

std::vector<Algorithm> algorithms_for(CollOp op, const std::vector<std::string>& names, bool shm) {
  std::vector<Algorithm> out;
  for (const auto& name : names) {
    if (name == "all") {
      for (Algorithm a : supported_algorithms(op))
        if (a != Algorithm::kHierarchical && !(a == Algorithm::kShmDirect && !shm)) out.push_back(a);
      continue;
    }
    Algorithm a = normalize_algorithm(op, parse_algorithm(name));
    auto sup = supported_algorithms(op);
    if (a == Algorithm::kAuto || std::find(sup.begin(), sup.end(), a) != sup.end()) out.push_back(a);
  }
  return out;
}

}  // namespace

std::vector<size_t> parse_size_range(const std::string& spec, int factor) {
  if (spec.find(',') != std::string::npos) {  // an explicit list: 8,64K,1M
    std::vector<size_t> out;
    for (size_t pos = 0; pos <= spec.size();) {
      size_t comma = spec.find(',', pos);
      if (comma == std::string::npos) comma = spec.size();
      int64_t v = parse_size(spec.substr(pos, comma - pos), "--sizes");
      DT_CHECK(v >= 1, InvalidArgument, "--sizes " << spec << ": sizes must be >= 1");
      out.push_back(static_cast<size_t>(v));
      pos = comma + 1;
    }
    return out;
  }
  auto colon = spec.find(':');
  int64_t lo, hi;
  if (colon == std::string::npos) {
    lo = hi = parse_size(spec, "--sizes");
  } else {
    lo = parse_size(spec.substr(0, colon), "--sizes");
    hi = parse_size(spec.substr(colon + 1), "--sizes");
  }
  DT_CHECK(lo >= 1 && hi >= lo, InvalidArgument, "--sizes " << spec << ": need 1 <= MIN <= MAX");
  DT_CHECK(factor >= 2, InvalidArgument, "--factor must be >= 2");
  std::vector<size_t> out;
  for (int64_t s = lo; s <= hi; s *= factor) out.push_back(static_cast<size_t>(s));
  if (out.back() != static_cast<size_t>(hi)) out.push_back(static_cast<size_t>(hi));
  return out;
}

namespace {
// Burns `seconds` of this thread's CPU time (not wall time: a rank that shares its core with
// others computes as long as a training rank's step would, however long it waits for the core).
void compute_for(double seconds) {
  const double t0 = thread_cpu_seconds();
  volatile double sink = 1.0;
  for (;;) {
    for (int i = 0; i < 256; ++i) sink = sink * 1.0000001 + 1e-9;
    if (thread_cpu_seconds() - t0 >= seconds) return;
  }
}

// The calibration file's tables (plan/cluster.h's this_machine reads them), none when the file
// is missing or unreadable: the prediction then falls back to the formulas.
plan::Cluster calibrated_tables(const std::string& path) {
  try {
    return plan::this_machine(path);
  } catch (const Error&) {
    return plan::Cluster{};
  }
}

// One shape's passes as one row: the median pass's time and prediction (the mean of the middle
// two for an even count), the fastest and slowest pass beside them, and the rest (path, cores'
// share) from the pass nearest the median. One pass is itself.
CollBenchRow median_pass(const std::vector<CollBenchRow>& of_shape) {
  std::vector<CollBenchRow> sorted = of_shape;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.time_us < b.time_us; });
  CollBenchRow row = sorted[(sorted.size() - 1) / 2];
  std::vector<double> times, preds;
  for (const CollBenchRow& r : of_shape) {
    times.push_back(r.time_us);
    preds.push_back(r.predicted_us);
    row.wrong = std::max(row.wrong, r.wrong);
  }
  row.passes = static_cast<int>(of_shape.size());
  row.time_us = median(times, "collective bench passes");
  row.predicted_us = median(preds, "collective bench passes");
  row.time_min_us = sorted.front().time_us;
  row.time_max_us = sorted.back().time_us;
  const double bus = row.algbw_gbps > 0 ? row.busbw_gbps / row.algbw_gbps : 1;  // the op's bus factor
  row.algbw_gbps = static_cast<double>(row.size_bytes) / (row.time_us * 1e-6) / 1e9;
  row.busbw_gbps = row.algbw_gbps * bus;
  return row;
}

}  // namespace

double calibrated_seconds(const plan::Cluster& cal, CollOp op, int p, double bytes, const CollBenchConfig& cfg,
                          Algorithm requested, bool tables) {
  if (!tables || cfg.ranks_are_threads || requested != Algorithm::kAuto || cfg.dtype != DType::kFloat32 ||
      cfg.redop != ReduceOp::kSum || cfg.in_place || cfg.deterministic || cfg.segment_bytes || cfg.shm_context)
    return -1;
  switch (op) {
    case CollOp::kAllreduce: return cal.measured_allreduce_s(p, bytes);
    case CollOp::kReduceScatter: return cal.measured_reducescatter_s(p, bytes);
    case CollOp::kAllgather: return cal.measured_allgather_s(p, bytes);
    case CollOp::kBroadcast: return cfg.root == 0 ? cal.measured_broadcast_s(p, bytes) : -1;
    default: return -1;
  }
}

double bus_factor(CollOp op, int p) {
  switch (op) {
    case CollOp::kAllreduce: return 2.0 * (p - 1) / p;
    case CollOp::kAllgather:
    case CollOp::kReduceScatter:
    case CollOp::kAlltoall:
    case CollOp::kGather:
    case CollOp::kScatter: return static_cast<double>(p - 1) / p;
    default: return 1.0;
  }
}

std::vector<CollBenchRow> run_collective_bench(Communicator& c, const CollBenchConfig& cfg) {
  const int p = c.size();
  const size_t es = dtype_size(cfg.dtype);
  const std::string kind = c.transport().kind();
  const bool shm = kind == "shm";
  const bool lead = c.rank() == 0 && cfg.print;
  std::vector<CollBenchRow> rows;
  CostParams cp = cost_params_for(kind, c.coll_config().calibration_path);
  CollOptions seg_opts;
  seg_opts.segment_bytes = cfg.segment_bytes;
  std::unique_ptr<ShmContext> ctx;
  if (cfg.shm_context && shm && p > 1) ctx = std::make_unique<ShmContext>(c);
  // The context the calls use (--shm-context's own, else the communicator's): its verdict is
  // printed, and at 2 ranks the calibration's tables of that verdict price the rows, where it
  // measured them.
  // Where the verdict is re-probed during the rows (ShmContext::after_call), a row is priced
  // from both verdicts' tables, weighted by the share of its calls each verdict carried.
  const ShmContext* verdict = ctx ? ctx.get() : c.shm_context();
  // (With the launcher's samples of the cores alone, a row priced by neither verdict, having
  // too few samples, takes the mixed tables.)
  const bool own_verdict = verdict && *verdict->core_distance_from();
  const bool by_verdict = own_verdict || (cfg.cores_samples && c.rank() == 0);
  const plan::Cluster mixed = calibrated_tables(c.coll_config().calibration_path);
  const plan::Cluster cal_close = by_verdict ? plan::with_core_distance(mixed, false) : mixed;
  const plan::Cluster cal_far = by_verdict ? plan::with_core_distance(mixed, true) : mixed;
  const plan::Cluster& cal = !own_verdict ? mixed : verdict->cores_far() ? cal_far : cal_close;
  // Over tcp with every rank on this host: the calibration's loopback tcp tables by rank
  // count (its copies are kernel work on the ranks' own cores, which the formula on the
  // 2-rank link does not see: 4 ranks on 2 cores 1 MiB 839 us against 439 so priced).
  const bool one_host_tcp = kind == "tcp" && c.transport().ranks_on_host() >= p;
  const plan::Cluster tcp_cal = one_host_tcp ? plan::over_fabric(mixed, "tcp", 1, 0) : plan::Cluster{};
  if (lead) {
    std::printf("# dtrain bench collectives: %d ranks, transport %s%s, type %s, cost model %s\n", p, kind.c_str(),
                ctx ? " + ShmContext" : "", dtype_name(cfg.dtype), cp.source.c_str());
    if (const ShmContext* own = verdict; own && *own->core_distance_from()) {
      char how[96];
      if (own->round_trip_ns() > 0)
        std::snprintf(how, sizeof how, "a cache line's round trip %.2f us",
                      static_cast<double>(own->round_trip_ns()) / 1e3);
      else
        std::snprintf(how, sizeof how, "stated by %s", own->core_distance_from());
      const bool reprobed = own->round_trip_ns() > 0 && c.coll_config().shm_reprobe_ms > 0;
      std::printf("# the two ranks' cores%s: %s (%s): the all-reduce takes the shared-memory slots %s\n",
                  reprobed ? " at the start (probed again as calls go, and each row's calls time both paths: its path is "
                             "its calls' majority)"
                           : "",
                  how,
                  own->cores_far() ? "far apart" : "close",
                  own->cores_far() ? "never, nor do the all-gather, reduce-scatter and broadcast"
                                   : (std::to_string(own->slots_allreduce_min_bytes() >> 10) + " KiB up; the all-gather up to " +
                                      std::to_string(own->slots_allgather_max_bytes() >> 20) +
                                      " MiB (the last-level cache), the reduce-scatter at every size, broadcast up to 256 KiB")
                                         .c_str());
    }
    std::printf("# %s\n", large_blocks_description().c_str());
    if (cfg.settle_s > 0)
      std::printf("# each row is timed once the shared-memory path choice has tried both paths for its op and size (up "
                  "to %g s of untimed calls, JSON settle_calls; --settle 0: none)\n",
                  cfg.settle_s);
    std::printf("# time = max over ranks of the mean per call; GB/s = 1e9 bytes/s; pred = the calibration's own\n"
                "# measurement of this shape where it has one (src cal), else the cost model's formula (src model)\n");
    if (cfg.passes > 1)
      std::printf("# %d passes, each every row once in order: time (and pred) = the median pass's; spread = the fastest and\n"
                  "# slowest pass against it (JSON time_min_us, time_max_us)\n",
                  cfg.passes);
    std::printf("%12s %12s %9s %6s %5s %18s %11s %8s %8s %7s %10s %7s %5s%s\n", "size(B)", "count", "type", "redop",
                "root", "algo", "time(us)", "algbw", "busbw", "#wrong", "pred(us)", "err", "src",
                cfg.passes > 1 ? "  spread" : "");
    std::fflush(stdout);
  }
  // The sampler's counts at the start of each row's timed calls (rank 0, with cores_samples).
  std::vector<std::pair<int64_t, int64_t>> sample_marks;
  // One row: warm up, settle the path, time about cfg.seconds of calls, price it.
  auto measure = [&](CollOp op, Algorithm requested, size_t bytes, bool touch) {
    Point pt = shape(op, bytes, es, p);
    // On cache lines, as tensors and gradients are (base/aligned.h).
    AlignedVector<char> in_heap(pt.in_elems * es), out(pt.out_elems * es);
    std::unique_ptr<WindowBuffer> window;
    if (cfg.window && op == CollOp::kAllreduce)
      window.reset(new WindowBuffer{std::make_unique<ShmWindow>(c, pt.in_elems * es), even_counts(pt.total, p)});
    char* const in = window ? window->window->mine() : in_heap.data();
    for (size_t i = 0; i < pt.in_elems; ++i) put(cfg.dtype, in, i, value(c.rank(), i, cfg.redop));
    // The lockstep step's touches (CollBenchConfig::touch): gradient from the parameters
    // before the call, the summed gradient into them after it. Every rank's parameters are
    // alike, so the update (the sum less p times the gradient) leaves them where they are.
    AlignedVector<float> params(touch ? pt.in_elems : 0, 1.0f);
    float* const grad = reinterpret_cast<float*>(in);
    auto before_call = [&] {
      for (size_t i = 0; i < params.size(); ++i) grad[i] = 0.5f * params[i];
    };
    auto after_call = [&] {
      const float each = 0.5f * static_cast<float>(p);
      for (size_t i = 0; i < params.size(); ++i) params[i] += 1e-6f * (grad[i] - each * params[i]);
    };
    auto one_step = [&] {
      if (touch) before_call();
      const Algorithm a = run_once(c, pt, requested, cfg, in, out.data(), ctx.get(), window.get());
      if (touch) after_call();
      return a;
    };
    // The touches' own time, each rank alone in turn while the others wait at a barrier (a
    // rank whose core's other ranks touch their own data at the same time reads from memory
    // what alone it reads from cache: at 8 ranks on 2 cores the 0.94 MB touches took 288 us
    // measured all at once, the refill itself): the fastest of a few repeats after one that
    // brings the data in.
    double touch_s = 0;
    if (touch) {
      for (int r = 0; r < p; ++r) {
        if (r == c.rank()) {
          before_call(), after_call();
          touch_s = 1e30;
          for (int i = 0; i < 5; ++i) {
            const double t = thread_cpu_seconds();
            before_call(), after_call();
            touch_s = std::min(touch_s, thread_cpu_seconds() - t);
          }
        }
        c.barrier();
      }
      allreduce(c, &touch_s, 1, DType::kFloat64, ReduceOp::kMax);
    }
    Algorithm used = requested;
    for (int w = 0; w < cfg.warmup; ++w) used = one_step();
    const int64_t settle_calls = cfg.settle_s > 0 && used == Algorithm::kShmDirect
                                     ? settle_paths(c, pt, op, requested, cfg, in, out.data(), ctx.get(), window.get())
                                     : 0;
    // Trial: the slowest rank's time of one call decides the iteration count everywhere.
    double t0 = now_seconds();
    if (cfg.gap_s > 0) compute_for(cfg.gap_s);
    one_step();
    double trial = now_seconds() - t0;
    allreduce(c, &trial, 1, DType::kFloat64, ReduceOp::kMax);
    int64_t iters = std::clamp<int64_t>(static_cast<int64_t>(cfg.seconds / std::max(trial, 1e-7)), 1, cfg.max_iters);
    c.barrier();
    const int64_t close0 = verdict ? verdict->close_calls() : 0, far0 = verdict ? verdict->far_calls() : 0;
    const int64_t slots0 = verdict ? verdict->slots_calls() : 0, reads0 = verdict ? verdict->reads_calls() : 0;
    const bool sampled = cfg.cores_samples && c.rank() == 0;
    const std::pair<int64_t, int64_t> samples0 = sampled ? cfg.cores_samples() : std::pair<int64_t, int64_t>{};
    if (sampled) sample_marks.push_back(samples0);
    t0 = now_seconds();
    for (int64_t i = 0; i < iters; ++i) {
      if (cfg.gap_s > 0) compute_for(cfg.gap_s);
      one_step();
    }
    double per_call = (now_seconds() - t0) / static_cast<double>(iters);
    const std::pair<int64_t, int64_t> samples1 = sampled ? cfg.cores_samples() : std::pair<int64_t, int64_t>{};
    // (read before the next collective, which may count itself)
    const int64_t closes = verdict ? verdict->close_calls() - close0 : 0, fars = verdict ? verdict->far_calls() - far0 : 0;
    const int64_t slotted = verdict ? verdict->slots_calls() - slots0 : 0, read = verdict ? verdict->reads_calls() - reads0 : 0;
    allreduce(c, &per_call, 1, DType::kFloat64, ReduceOp::kMax);
    int64_t wrong = -1;
    if (cfg.check) {
      wrong = check_once(c, pt, requested, cfg, in, out.data(), ctx.get(), window.get());
      allreduce(c, &wrong, 1, DType::kInt64, ReduceOp::kSum);
    }
    CollBenchRow row;
    row.op = coll_op_name(op);
    row.algo = window ? std::string(touch ? "window+touch/" : "window/") + algorithm_name(used)
                      : std::string(algorithm_name(used));
    row.touch_us = touch_s * 1e6;
    if (used == Algorithm::kShmDirect) {
      const ShmContext* eff = ctx ? ctx.get() : c.shm_context();
      const size_t call = pt.total * es;
      // Under the verdict most of the row's calls ran under, where it was re-probed.
      const bool far = closes + fars > 0 ? 2 * fars > closes + fars : eff && eff->cores_far();
      // Where the context timed the paths (ShmContext::take_slots), the path most calls took.
      const bool slots = shm_direct_one_phase(op, c, eff, call) ||
                         (slotted + read > 0 ? slotted >= read : shm_direct_takes_slots_under(op, c, eff, call, far));
      row.path = slots ? "slots" : "reads";
    }
    row.transport = kind;
    row.type = dtype_name(cfg.dtype);
    row.redop = (op == CollOp::kAllreduce || op == CollOp::kReduce || op == CollOp::kReduceScatter)
                    ? reduce_op_name(cfg.redop)
                    : "none";
    row.root = (op == CollOp::kBroadcast || op == CollOp::kReduce || op == CollOp::kGather || op == CollOp::kScatter)
                   ? cfg.root
                   : -1;
    row.world_size = p;
    row.size_bytes = pt.total * es;
    row.count = pt.total;
    row.time_us = per_call * 1e6;
    row.algbw_gbps = row.size_bytes / per_call / 1e9;
    row.busbw_gbps = row.algbw_gbps * bus_factor(op, p);
    if (closes + fars > 0) row.far_share = static_cast<double>(fars) / static_cast<double>(closes + fars);
    // More ranks than two: the cores as the launcher's sampler saw them during the calls;
    // where it took fewer than 3 then (its probe's two threads meet late among ranks that
    // spin on every core), the latest 3 or more before the row's end: the placement
    // holds for seconds to minutes, and the mixed tables price neither. In cc-k1 (8
    // ranks, every sample far) 6 of 16 rows had under 3 samples, and all 6 ran 1.3-2.9x
    // their prediction from the mixed tables.
    if (sampled && row.far_share < 0) {
      for (auto mark = sample_marks.rbegin(); mark != sample_marks.rend(); ++mark) {
        const int64_t fars_sampled = samples1.second - mark->second;
        const int64_t n = (samples1.first - mark->first) + fars_sampled;
        if (n < 3) continue;
        row.far_share = static_cast<double>(fars_sampled) / static_cast<double>(n);
        row.far_share_from = mark == sample_marks.rbegin() ? "calls" : "recent";
        break;
      }
    }
    row.predicted_from = "none";  // with --gap-us: the row is not a collective's time alone
    if (cfg.gap_s <= 0 && !touch) {  // a touch row is not the collective alone either
      const double b = static_cast<double>(row.size_bytes);
      double cal_s = calibrated_seconds(shm ? cal : tcp_cal, op, p, b, cfg, requested, shm || one_host_tcp);
      if (shm && row.far_share >= 0) {
        const double cs = calibrated_seconds(cal_close, op, p, b, cfg, requested, shm);
        const double fs = calibrated_seconds(cal_far, op, p, b, cfg, requested, shm);
        if (cs > 0 && fs > 0) cal_s = (1 - row.far_share) * cs + row.far_share * fs;
      }
      const double model_s =
          cal_s > 0 ? cal_s : predict_seconds(op, used, p, row.size_bytes, cp, resolve_segment_bytes(c.coll_config(), seg_opts));
      // The hosts' hierarchy that auto reduce-scatters and all-gathers take across hosts has
      // no formula in the cost model (1e30 there): no prediction, not a 10^31 % error.
      if (model_s < 1e29) {
        row.predicted_from = cal_s > 0 ? "cal" : "model";
        row.predicted_us = model_s * 1e6;
      }
    }
    row.wrong = wrong;
    row.settle_calls = settle_calls;
    row.iters = iters;
    return row;
  };
  auto print_row = [&](const CollBenchRow& row) {
    if (!lead) return;
    // No prediction (--gap-us): "-" in both columns rather than 0 us and -100%.
    char pred[32] = "-", err[32] = "-", spread[32] = "";
    if (row.predicted_from != "none") {
      std::snprintf(pred, sizeof pred, "%.1f", row.predicted_us);
      std::snprintf(err, sizeof err, "%.0f%%", row.time_us > 0 ? (row.predicted_us - row.time_us) / row.time_us * 100 : 0);
    }
    if (cfg.passes > 1)
      std::snprintf(spread, sizeof spread, " %+5.0f/%+.0f%%", (row.time_min_us / row.time_us - 1) * 100,
                    (row.time_max_us / row.time_us - 1) * 100);
    const std::string algo = row.path.empty() ? row.algo : row.algo + "/" + row.path;
    std::printf("%12zu %12zu %9s %6s %5d %18s %11.2f %8.3f %8.3f %7s %10s %7s %5s%s\n", row.size_bytes, row.count,
                row.type.c_str(), row.redop.c_str(), row.root, algo.c_str(), row.time_us, row.algbw_gbps, row.busbw_gbps,
                row.wrong < 0 ? "N/A" : std::to_string(row.wrong).c_str(), pred, err, row.predicted_from.c_str(), spread);
    std::fflush(stdout);
  };
  struct Shape {
    CollOp op;
    Algorithm requested;
    size_t bytes;
    bool touch;
  };
  std::vector<Shape> shapes;
  for (CollOp op : cfg.ops)
    for (Algorithm requested : algorithms_for(op, cfg.algos, shm))
      for (size_t bytes : cfg.sizes) {
        shapes.push_back({op, requested, bytes, false});
        // The touch row right after its plain row: the two are compared, so the same minute.
        if (cfg.touch && cfg.window && op == CollOp::kAllreduce) shapes.push_back({op, requested, bytes, true});
      }
  // Passes: every row once in order, cfg.passes times over; one pass prints as it goes.
  std::vector<std::vector<CollBenchRow>> passes(shapes.size());
  for (int pass = 0; pass < cfg.passes; ++pass)
    for (size_t i = 0; i < shapes.size(); ++i) {
      passes[i].push_back(measure(shapes[i].op, shapes[i].requested, shapes[i].bytes, shapes[i].touch));
      if (cfg.passes == 1) print_row(passes[i].back());
    }
  for (const auto& of_shape : passes) {
    rows.push_back(median_pass(of_shape));
    if (cfg.passes > 1) print_row(rows.back());
  }
  if (lead && verdict && verdict->probes() > 1)
    std::printf("# the two ranks' distance was probed %lld times and changed %lld times; calls past 16 KiB: %lld "
                "close, %lld far (DTRAIN_SHM_REPROBE_MS)\n",
                static_cast<long long>(verdict->probes()), static_cast<long long>(verdict->flips()),
                static_cast<long long>(verdict->close_calls()), static_cast<long long>(verdict->far_calls()));
  if (lead && cfg.cores_samples) {
    int64_t during = 0, recent = 0, unpriced = 0;
    for (const CollBenchRow& r : rows)
      if (r.far_share_from == "calls") ++during;
      else if (r.far_share_from == "recent") ++recent;
      else if (r.predicted_from != "none") ++unpriced;
    const auto [closes, fars] = cfg.cores_samples();
    std::printf("# the launcher sampled the cores' distance while the ranks ran (%lld close, %lld far so far): rows "
                "priced from both placements' tables by the share of far samples (JSON far_share): %lld by those "
                "during their calls, %lld by the latest 3 or more before their end (under 3 during them); %lld from "
                "the mixed tables\n",
                static_cast<long long>(closes), static_cast<long long>(fars), static_cast<long long>(during),
                static_cast<long long>(recent), static_cast<long long>(unpriced));
  }
  return rows;
}

std::vector<CollBenchRow> bench_collectives_threads(int nproc, TransportKind kind, const CollBenchConfig& cfg_in) {
  CollBenchConfig cfg = cfg_in;
  cfg.ranks_are_threads = true;
  auto store = std::make_shared<MemoryStore>(120);
  TransportOptions t;
  t.kind = kind;
  const Settings& settings = Settings::process();
  t.timeout_s = settings.number("DTRAIN_TIMEOUT");
  const CollConfig config = coll_config_from(settings);
  t.fabric.token = "bench-threads";
  std::mutex mu;
  std::exception_ptr first;
  std::vector<CollBenchRow> rows;
  std::vector<std::thread> threads;
  for (int r = 0; r < nproc; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator comm(store, r, nproc, t, std::string("bench-") + transport_kind_name(kind), {}, config);
        auto got = run_collective_bench(comm, cfg);
        if (r == 0) rows = std::move(got);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (first) std::rethrow_exception(first);
  return rows;
}

std::string rows_to_json(const std::vector<CollBenchRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows)
    out.push_back({{"op", r.op},
                   {"algo", r.algo},
                   {"path", r.path},
                   {"far_share", r.far_share},
                   {"far_share_from", r.far_share_from},
                   {"settle_calls", r.settle_calls},
                   {"transport", r.transport},
                   {"world_size", r.world_size},
                   {"type", r.type},
                   {"redop", r.redop},
                   {"root", r.root},
                   {"size_bytes", r.size_bytes},
                   {"count", r.count},
                   {"time_us", r.time_us},
                   {"algbw_gbps", r.algbw_gbps},
                   {"busbw_gbps", r.busbw_gbps},
                   {"wrong", r.wrong},
                   {"predicted_us", r.predicted_us},
                   {"predicted_from", r.predicted_from},
                   {"passes", r.passes},
                   {"time_min_us", r.time_min_us},
                   {"time_max_us", r.time_max_us},
                   {"touch_us", r.touch_us},
                   {"iters", r.iters}});
  return out.dump(2) + "\n";
}

}  // namespace dtrain

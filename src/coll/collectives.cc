// The public collectives: argument checks, algorithm resolution, the working buffer
// (copy-in for out-of-place calls), dispatch to coll/algorithms.h, and kAvg's final division.
#include "coll/collectives.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "coll/algorithms.h"
#include "coll/bytes.h"
#include "coll/call.h"
#include "coll/cost_model.h"
#include "coll/hierarchical.h"
#include "coll/reduce_kernels.h"
#include "coll/shm_context.h"

namespace dtrain {
namespace {

void check_root(Communicator& comm, int root, const char* op) {
  DT_CHECK(root >= 0 && root < comm.size(), InvalidArgument,
           op << ": root " << root << " is outside communicator '" << comm.name() << "' of size " << comm.size());
}

void copy_if_needed(void* dst, const void* src, size_t bytes) { copy_bytes_if_apart(dst, src, bytes); }

uint64_t hash_counts(const std::vector<size_t>& counts) {
  uint64_t h = 1469598103934665603ull;
  for (size_t c : counts) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

namespace {
// The shared-memory fast paths need a ShmContext. Unless the caller passed one, the
// communicator keeps one (built with it, coll/communicator.cc) whenever its transport is shm
// and DTRAIN_SHM_CONTEXT is not 0 (the default).
// Its errors read as the message path's: a dead rank is "rank q is gone" (the transport's
// liveness check), a mismatched call a Desync naming the ranks that differ from the majority,
// a missing rank a Timeout naming it.
template <class O>
O with_shm_context(Communicator& comm, const O& in) {
  O o = in;
  if (!o.shm) o.shm = comm.shm_context();
  return o;
}

// The shared-memory algorithms run on the context's full phases, which compare every rank's
// call themselves (Call's contract): their calls skip the fingerprint message round, 0.7 us
// of a 64 KiB all-gather at 2 ranks (5.1-5.6 -> 4.4-4.5 us; broadcast 4.4-5.9 -> 3.5-3.8).
FingerprintRoute route_of(Algorithm a) {
  return a == Algorithm::kShmDirect ? FingerprintRoute::kShmPhases : FingerprintRoute::kTransport;
}

// A call of a few KiB is ONE shared-memory phase that carries the data (ShmContext::
// exchange_small; shm_direct_one_phase says up to which size; with more ranks than cores an
// all-reduce past that up to 64 KiB takes shm_direct's slots, shm_direct_preferred), which
// auto always prefers,
// without consulting the cost model (it would be the whole cost of a small call), as does an
// explicit or configured shm_direct, so every rank of a call takes the same path. Returns the
// algorithm, and in *small whether it is that phase (only where may_be_small).
// Measured (bench collectives, before -> after): 8 B at 2 ranks all-gather 1.91 -> 0.53 us,
// reduce-scatter 1.94 -> 0.48, broadcast 1.48 -> 0.42 (OpenMPI 0.47, 0.49, 0.12); 16 KiB at 2
// ranks 3.0-4.3 -> 2.5-3.3 us; at 8 ranks (4 a core) 12-34 -> 5.8-6.7 us at 8 B.
Algorithm choose(CollOp op, Communicator& comm, const CollOptions& opts, size_t bytes, bool may_be_small, bool* small) {
  const bool fits = may_be_small && shm_direct_one_phase(op, comm, opts.shm, bytes);
  const bool preferred = may_be_small && shm_direct_preferred(op, comm, opts.shm, bytes);
  const Algorithm a = preferred && opts.algorithm == Algorithm::kAuto && !config_forces_algorithm(comm.coll_config(), op)
                          ? Algorithm::kShmDirect
                          : resolve_algorithm(op, opts.algorithm, comm, bytes, opts);
  *small = fits && a == Algorithm::kShmDirect;
  return a;
}

// The hosts' hierarchy for an auto reduce-scatter or all-gather across hosts of equal sizes
// (coll/hierarchical.h), or null. The same on every rank, like the all-reduce's choice.
Hierarchy* even_hosts(Communicator& comm, const CollOptions& opts, CollOp op) {
  if (opts.algorithm != Algorithm::kAuto || opts.deterministic || config_forces_algorithm(comm.coll_config(), op))
    return nullptr;
  Hierarchy* h = host_hierarchy(comm, resolve_timeout(opts.timeout_s, comm.timeout()));
  return h && h->peers() ? h : nullptr;
}

Fingerprint small_call(Communicator& comm, CollOp op, DType t, uint64_t count, int root, ReduceOp redop) {
  Fingerprint fp;
  fp.seq = comm.next_sequence();
  fp.count = count;
  fp.root = root;
  fp.op = static_cast<uint8_t>(op);
  fp.dtype = static_cast<uint8_t>(t);
  fp.redop = static_cast<uint8_t>(redop);
  fp.algorithm = static_cast<uint8_t>(Algorithm::kShmDirect);
  return fp;
}

// A small call's one phase: its waits check the deadline only once they sleep, so it starts
// there (a clock read less per call: the 2-rank 8-byte all-reduce is ~0.5 us).
Deadline call_deadline(const Communicator& comm, const CollOptions& opts) {
  return Deadline::from_first_check(resolve_timeout(opts.timeout_s, comm.timeout()));
}

// A call on the context's paths has completed here: the context counts it towards its next
// re-probe of the two ranks' distance (ShmContext::after_call), and runs that when due.
Algorithm done_on_context(Communicator& comm, const CollOptions& opts, Algorithm a, size_t bytes) {
  if (a == Algorithm::kShmDirect && opts.shm) opts.shm->after_call(bytes, resolve_timeout(opts.timeout_s, comm.timeout()));
  return a;
}
}  // namespace

Algorithm allreduce(Communicator& comm, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                    const AllreduceOptions& opts_in) {
  const auto opts = with_shm_context(comm, opts_in);
  const size_t bytes = count * dtype_size(t);
  DT_CHECK(!opts.shm || opts.shm->serves(comm), InvalidArgument,
           "allreduce: the options' ShmContext belongs to another communicator");
  bool small = false;
  Algorithm a = choose(CollOp::kAllreduce, comm, opts, bytes, true, &small);
  // Ranks over tcp on several hosts, some with more than one rank: auto takes the hosts'
  // hierarchy (coll/hierarchical.h). Every condition is the same on every rank, so the
  // first such call builds it on all of them. Deterministic calls keep the flat rank order.
  if (a != Algorithm::kShmDirect && opts.algorithm == Algorithm::kAuto && !opts.deterministic &&
      !config_forces_algorithm(comm.coll_config(), CollOp::kAllreduce) &&
      host_hierarchy(comm, resolve_timeout(opts.timeout_s, comm.timeout())))
    a = Algorithm::kHierarchical;
  if (small) {
    // Everyone publishes its buffer, everyone reduces all of them.
    copy_if_needed(recv, send, bytes);
    opts.shm->allreduce_small(recv, count, t, op, small_call(comm, CollOp::kAllreduce, t, count, -1, op),
                              call_deadline(comm, opts));
    return done_on_context(comm, opts, a, bytes);
  }
  Call call(comm, CollOp::kAllreduce, opts, a, t, count, -1, op, route_of(a));
  char* buf = static_cast<char*>(recv);
  call.run([&] {
    // shm_direct, and the ring outside deterministic mode, read an out-of-place input where
    // it lies; every other algorithm works in place on a copy.
    const char* input = static_cast<const char*>(send);
    const bool reads_input = a == Algorithm::kShmDirect || (a == Algorithm::kRing && !opts.deterministic);
    if (!reads_input) copy_if_needed(buf, send, bytes);
    if (opts.deterministic && !reads_input && a != Algorithm::kHierarchical) {
      if (a == Algorithm::kNaive)
        algo::allreduce_naive(call, buf, count);  // already rank-ordered
      else
        algo::allreduce_deterministic(call, buf, count, a);
    } else {
      switch (a) {
        case Algorithm::kShmDirect: algo::allreduce_shm_direct(call, input, buf, count, opts.shm); break;
        case Algorithm::kRing: algo::allreduce_ring(call, buf, count, input); break;
        case Algorithm::kNaive: algo::allreduce_naive(call, buf, count); break;
        case Algorithm::kTree: algo::allreduce_tree(call, buf, count); break;
        case Algorithm::kRecursiveDoubling: algo::allreduce_recursive_doubling(call, buf, count); break;
        case Algorithm::kHalvingDoubling: algo::allreduce_halving_doubling(call, buf, count); break;
        case Algorithm::kButterfly: {
          const CollConfig& config = comm.coll_config();
          const CostParams& cp = cost_params_for(comm.transport().kind(), config.calibration_path);
          size_t seg = resolve_segment_bytes(config, opts);
          bool small = predict_seconds(CollOp::kAllreduce, Algorithm::kRecursiveDoubling, comm.size(), bytes, cp, seg) <=
                       predict_seconds(CollOp::kAllreduce, Algorithm::kHalvingDoubling, comm.size(), bytes, cp, seg);
          if (small)
            algo::allreduce_recursive_doubling(call, buf, count);
          else
            algo::allreduce_halving_doubling(call, buf, count);
          break;
        }
        case Algorithm::kParamServer: algo::allreduce_param_server(call, buf, count); break;
        case Algorithm::kHierarchical: allreduce_hierarchical_once(call, buf, count); break;
        default: DT_THROW(InvalidArgument, "allreduce: unsupported algorithm " << algorithm_name(a));
      }
    }
    // (shm_direct divides each owner's reduced piece itself, in cache, before sharing it.)
    if (op == ReduceOp::kAvg && a != Algorithm::kShmDirect) finish_avg(t, buf, count, comm.size());
  });
  return done_on_context(comm, opts, a, bytes);
}

std::vector<size_t> even_counts(size_t n, int p) {
  const algo::Blocks b(n, p);
  std::vector<size_t> counts(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) counts[static_cast<size_t>(q)] = b.len(q);
  return counts;
}

Algorithm allreduce_apply(Communicator& comm, const float* send, float* recv, const std::vector<size_t>& counts,
                          const ApplyFn& apply, const AllreduceOptions& opts_in, const ShmWindow* window,
                          bool recv_shared, const ApplySumFn& apply_sum) {
  const auto opts = with_shm_context(comm, opts_in);
  const int p = comm.size(), me = comm.rank();
  DT_CHECK_EQ(counts.size(), static_cast<size_t>(p), InvalidArgument, "allreduce_apply: one count per rank");
  const algo::Blocks blocks(counts);
  const size_t n = blocks.total();
  DT_CHECK(send == recv || send + n <= recv || recv + n <= send || n == 0, InvalidArgument,
           "allreduce_apply: send and recv overlap without being the same buffer (the owners write recv while the "
           "others still read send)");
  DT_CHECK(!opts.deterministic, InvalidArgument,
           "allreduce_apply: no deterministic mode (use allreduce with fixed-point sums, then step)");
  if (p == 1 && !recv_shared) {
    copy_bytes_if_apart(recv, send, n * sizeof(float));
    if (n) apply(0, recv, n);  // values are recv here: either answer leaves the result there
    return Algorithm::kNaive;
  }
  DT_CHECK(!window || window->serves(comm), InvalidArgument, "allreduce_apply: the window belongs to another communicator");
  const int64_t in_window = window ? window->offset_of(send, n * sizeof(float)) : -1;
  DT_CHECK(!window || in_window >= 0, InvalidArgument,
           "allreduce_apply: send (" << n << " floats) does not lie in this rank's buffer of the window given");
  DT_CHECK(!recv_shared || (window && opts.shm && opts.algorithm == Algorithm::kAuto && send != recv), InvalidArgument,
           "allreduce_apply: a shared recv needs the inputs in a window, the shared-memory context, the automatic "
           "algorithm, and send apart from recv");
  if (opts.shm && opts.algorithm == Algorithm::kAuto) {
    Call call(comm, CollOp::kAllreduce, opts, Algorithm::kShmDirect, DType::kFloat32, n, kApplyRoot, ReduceOp::kSum,
              FingerprintRoute::kShmPhases);
    bool done = false;
    const algo::ApplyPiece piece = [&](size_t off, char* values, size_t len) {
      return apply(off, reinterpret_cast<float*>(values), len);
    };
    algo::ApplySumPiece sum_piece;
    if (apply_sum && recv_shared)
      sum_piece = [&](size_t off, const void* const* inputs, int k, size_t len) {
        apply_sum(off, reinterpret_cast<const float* const*>(inputs), k, len);
      };
    call.run([&] {
      if (window) {
        algo::allreduce_apply_window(call, static_cast<size_t>(in_window), reinterpret_cast<char*>(recv), blocks, piece,
                                     *opts.shm, *window, recv_shared, sum_piece);
        done = true;
      } else {
        done = algo::allreduce_apply_shm_direct(call, reinterpret_cast<const char*>(send), reinterpret_cast<char*>(recv),
                                                blocks, piece, opts.shm);
      }
    });
    if (done) return done_on_context(comm, opts, Algorithm::kShmDirect, n * sizeof(float));
  }
  // Anywhere else: reduce-scatter blocks padded to the longest, apply, all-gather the blocks.
  size_t per = 0;
  for (size_t c : counts) per = std::max(per, c);
  std::vector<float> padded(per * static_cast<size_t>(p), 0.0f), mine(per);
  for (int q = 0; q < p; ++q) std::copy_n(send + blocks.off[q], counts[q], padded.data() + per * q);
  ReduceScatterOptions rs;
  static_cast<CollOptions&>(rs) = opts;
  rs.algorithm = Algorithm::kAuto;
  rs.scratch_send = true;  // padded is ours
  const Algorithm a = reduce_scatter(comm, padded.data(), mine.data(), per, DType::kFloat32, ReduceOp::kSum, rs);
  // Where apply wrote its block into recv itself, the all-gather takes it from there (in place).
  const bool in_recv = counts[me] && apply(blocks.off[me], mine.data(), counts[me]);
  AllgatherOptions ag;
  static_cast<CollOptions&>(ag) = opts;
  ag.algorithm = Algorithm::kAuto;
  allgatherv(comm, in_recv ? recv + blocks.off[me] : mine.data(), recv, counts, DType::kFloat32, ag);
  return a;
}

Algorithm broadcast(Communicator& comm, void* buf, size_t count, DType t, int root, const BroadcastOptions& opts_in) {
  const auto opts = with_shm_context(comm, opts_in);
  check_root(comm, root, "broadcast");
  const size_t bytes = count * dtype_size(t);
  bool small = false;
  const Algorithm a = choose(CollOp::kBroadcast, comm, opts, bytes, true, &small);
  if (small) {
    const bool mine = comm.rank() == root;
    opts.shm->exchange_small(buf, bytes, mine ? bytes : 0,
                             small_call(comm, CollOp::kBroadcast, t, count, root, ReduceOp::kSum), call_deadline(comm, opts));
    if (!mine) copy_bytes(buf, opts.shm->small_of(root), bytes);
    return done_on_context(comm, opts, a, bytes);
  }
  Call call(comm, CollOp::kBroadcast, opts, a, t, count, root, ReduceOp::kSum, route_of(a));
  char* b = static_cast<char*>(buf);
  call.run([&] {
    if (a == Algorithm::kShmDirect)
      algo::broadcast_shm_direct(call, b, count, root, opts.shm);
    else if (a == Algorithm::kChain)
      algo::broadcast_chain(call, b, count, root, 0);
    else if (a == Algorithm::kNaive)
      algo::broadcast_naive(call, b, count, root, 0);
    else
      algo::broadcast_binomial(call, b, count, root, 0);
  });
  return done_on_context(comm, opts, a, bytes);
}

Algorithm reduce(Communicator& comm, const void* send, void* recv, size_t count, DType t, ReduceOp op, int root,
                 const ReduceOptions& opts) {
  check_root(comm, root, "reduce");
  const size_t bytes = count * dtype_size(t);
  Algorithm a = resolve_algorithm(CollOp::kReduce, opts.algorithm, comm, bytes, opts);
  Call call(comm, CollOp::kReduce, opts, a, t, count, root, op);
  call.run([&] {
    // The root reduces into its output; the others need a scratch accumulator.
    char* acc = comm.rank() == root ? static_cast<char*>(recv) : call.temp(bytes);
    copy_if_needed(acc, send, bytes);
    if (a == Algorithm::kNaive || opts.deterministic)
      algo::reduce_naive(call, acc, count, root, 0);
    else
      algo::reduce_binomial(call, acc, count, root, 0);
    if (op == ReduceOp::kAvg && comm.rank() == root) finish_avg(t, acc, count, comm.size());
  });
  return a;
}

Algorithm allgatherv(Communicator& comm, const void* send, void* recv, const std::vector<size_t>& counts, DType t,
                     const AllgatherOptions& opts_in) {
  const auto opts = with_shm_context(comm, opts_in);
  DT_CHECK_EQ(counts.size(), static_cast<size_t>(comm.size()), InvalidArgument, "allgatherv: one count per rank");
  algo::Blocks blocks(counts);
  const size_t es = dtype_size(t);
  bool equal = std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts[0]; });
  bool small = false;
  Algorithm a = choose(CollOp::kAllgather, comm, opts, blocks.total() * es, equal, &small);
  if (a == Algorithm::kRecursiveDoubling && (comm.size() & (comm.size() - 1))) a = Algorithm::kBruck;
  if (Hierarchy* h = equal && a != Algorithm::kShmDirect ? even_hosts(comm, opts, CollOp::kAllgather) : nullptr) {
    Call call(comm, CollOp::kAllgather, opts, Algorithm::kHierarchical, t, counts[0], -1, ReduceOp::kSum,
              route_of(Algorithm::kHierarchical));
    call.run([&] { h->allgather(send, recv, counts[0], t, call.remaining()); });
    return Algorithm::kHierarchical;
  }
  if (small) {
    // The own block goes into place from `send` between arriving and waiting, while the
    // peers still write theirs (2 ranks, 64 KiB, EPYC VM, cores close: see docs/COLLECTIVES.md).
    const size_t block = counts[0] * es;
    const Fingerprint fp = small_call(comm, CollOp::kAllgather, t, counts[0], -1, ReduceOp::kSum);
    const uint64_t phase = opts.shm->start_exchange_small(send, block, block, fp);
    char* const out = static_cast<char*>(recv);
    copy_bytes_if_apart(out + blocks.off[comm.rank()] * es, send, block);
    opts.shm->finish_exchange_small(phase, block, fp, call_deadline(comm, opts));
    for (int k = 1; k < comm.size(); ++k) {
      const int q = (comm.rank() + k) % comm.size();
      copy_bytes(out + blocks.off[q] * es, opts.shm->small_of(q), block);
    }
    return done_on_context(comm, opts, a, blocks.total() * es);
  }
  Call call(comm, CollOp::kAllgather, opts, a, t, equal ? counts[0] : hash_counts(counts), -1, ReduceOp::kSum,
            route_of(a));
  char* out = static_cast<char*>(recv);
  call.run([&] {
    if (a == Algorithm::kShmDirect)  // peers read each block from its owner's send buffer
      return algo::allgather_shm_direct(call, out, static_cast<const char*>(send), blocks, opts.shm);
    copy_if_needed(out + blocks.off[comm.rank()] * es, send, counts[comm.rank()] * es);
    switch (a) {
      case Algorithm::kRing: algo::allgather_ring(call, out, blocks, 0); break;
      case Algorithm::kRecursiveDoubling: algo::allgather_recursive_doubling(call, out, blocks, 0); break;
      case Algorithm::kBruck: algo::allgather_bruck(call, out, blocks, 0); break;
      default: algo::allgather_naive(call, out, blocks, 0); break;
    }
  });
  return done_on_context(comm, opts, a, blocks.total() * es);
}

Algorithm allgather(Communicator& comm, const void* send, void* recv, size_t count, DType t,
                    const AllgatherOptions& opts) {
  return allgatherv(comm, send, recv, std::vector<size_t>(comm.size(), count), t, opts);
}

Algorithm reduce_scatter(Communicator& comm, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                         const ReduceScatterOptions& opts_in) {
  const auto opts = with_shm_context(comm, opts_in);
  const int p = comm.size();
  const size_t es = dtype_size(t), total = count * p;
  bool small = false;
  const Algorithm a = choose(CollOp::kReduceScatter, comm, opts, total * es, true, &small);
  if (Hierarchy* h = a != Algorithm::kShmDirect ? even_hosts(comm, opts, CollOp::kReduceScatter) : nullptr) {
    Call call(comm, CollOp::kReduceScatter, opts, Algorithm::kHierarchical, t, count, -1, op,
              route_of(Algorithm::kHierarchical));
    call.run([&] { h->reduce_scatter(send, recv, count, t, op, call.remaining()); });
    return Algorithm::kHierarchical;
  }
  if (small) {
    // Every rank publishes its whole input; each reduces its own block of all of them in rank
    // order (bit-identical to deterministic mode).
    opts.shm->exchange_small(send, total * es, total * es, small_call(comm, CollOp::kReduceScatter, t, count, -1, op),
                             call_deadline(comm, opts));
    opts.shm->reduce_small(recv, comm.rank() * count * es, count, t, op);
    return done_on_context(comm, opts, a, total * es);
  }
  // Deterministic reduce-scatter takes the message path even where shm_direct was chosen.
  Call call(comm, CollOp::kReduceScatter, opts, a, t, count, -1, op,
            opts.deterministic ? FingerprintRoute::kTransport : route_of(a));
  call.run([&] {
    algo::Blocks blocks(total, p);
    if (a == Algorithm::kShmDirect && !opts.deterministic) {
      // Reads block r of every rank's input in place; no working copy. The result goes
      // straight into recv when recv lies apart from the input or is exactly this rank's own
      // block of it (read only by this rank, element by element before it is written: the
      // ordered kernels accumulate before they store); any other overlap would write what
      // the peers still read until the closing phase, so it goes through a working buffer.
      const char* in = static_cast<const char*>(send);
      char* out = static_cast<char*>(recv);
      const bool own_block = out == in + blocks.off[comm.rank()] * es;
      const bool overlaps = !own_block && out < in + total * es && in < out + count * es;
      char* result = overlaps ? call.temp(count * es) : out;
      if (algo::reduce_scatter_shm_direct(call, in, result, blocks, opts.shm)) {
        if (op == ReduceOp::kAvg) finish_avg(t, result, count, p);
        if (overlaps) copy_bytes(recv, result, count * es);
        return;
      }
    }
    // The algorithms clobber blocks they do not own: a working copy, or the send buffer
    // itself where the caller gave it up.
    char* work = opts.scratch_send ? static_cast<char*>(const_cast<void*>(send)) : call.temp(total * es);
    if (!opts.scratch_send) copy_if_needed(work, send, total * es);
    if (opts.deterministic || a == Algorithm::kNaive)
      algo::reduce_scatter_direct(call, work, blocks, 0);
    else if (a == Algorithm::kHalvingDoubling)
      algo::reduce_scatter_halving(call, work, blocks, 0);
    else
      algo::reduce_scatter_ring(call, work, blocks, 0);
    char* mine = work + blocks.off[comm.rank()] * es;
    if (op == ReduceOp::kAvg) finish_avg(t, mine, count, p);
    copy_bytes_if_apart(recv, mine, count * es);
  });
  return done_on_context(comm, opts, a, total * es);
}

Algorithm gather(Communicator& comm, const void* send, void* recv, size_t count, DType t, int root,
                 const GatherOptions& opts) {
  check_root(comm, root, "gather");
  const size_t es = dtype_size(t);
  Algorithm a = resolve_algorithm(CollOp::kGather, opts.algorithm, comm, count * es * comm.size(), opts);
  Call call(comm, CollOp::kGather, opts, a, t, count, root);
  call.run([&] {
    // In place on the root (send == its block of recv) is fine: both paths copy via memcpy of
    // equal ranges or read the send block before writing it.
    char* mine = call.temp(count * es);
    copy_bytes(mine, send, count * es);
    if (a == Algorithm::kNaive)
      algo::gather_naive(call, mine, static_cast<char*>(recv), count, root);
    else
      algo::gather_binomial(call, mine, static_cast<char*>(recv), count, root);
  });
  return a;
}

Algorithm scatter(Communicator& comm, const void* send, void* recv, size_t count, DType t, int root,
                  const ScatterOptions& opts) {
  check_root(comm, root, "scatter");
  const size_t es = dtype_size(t);
  Algorithm a = resolve_algorithm(CollOp::kScatter, opts.algorithm, comm, count * es * comm.size(), opts);
  Call call(comm, CollOp::kScatter, opts, a, t, count, root);
  call.run([&] {
    char* mine = call.temp(count * es);
    if (a == Algorithm::kNaive)
      algo::scatter_naive(call, static_cast<const char*>(send), mine, count, root);
    else
      algo::scatter_binomial(call, static_cast<const char*>(send), mine, count, root);
    copy_if_needed(recv, mine, count * es);
  });
  return a;
}

Algorithm alltoall(Communicator& comm, const void* send, void* recv, size_t count, DType t,
                   const AlltoallOptions& opts) {
  const size_t es = dtype_size(t), total = count * comm.size() * es;
  Algorithm a = resolve_algorithm(CollOp::kAlltoall, opts.algorithm, comm, total, opts);
  Call call(comm, CollOp::kAlltoall, opts, a, t, count);
  call.run([&] {
    const char* in = static_cast<const char*>(send);
    if (send == recv && total) {
      char* copy = call.temp(total);
      copy_bytes(copy, in, total);
      in = copy;
    }
    if (a == Algorithm::kNaive)
      algo::alltoall_naive(call, in, static_cast<char*>(recv), count);
    else
      algo::alltoall_pairwise(call, in, static_cast<char*>(recv), count);
  });
  return a;
}

Algorithm barrier(Communicator& comm, const BarrierOptions& opts) {
  Algorithm a = resolve_algorithm(CollOp::kBarrier, opts.algorithm, comm, 0, opts);
  Call call(comm, CollOp::kBarrier, opts, a, DType::kUInt8, 0);
  call.run([&] {
    if (a == Algorithm::kRecursiveDoubling)
      algo::barrier_recursive_doubling(call);
    else
      algo::barrier_dissemination(call);
  });
  return a;
}

}  // namespace dtrain

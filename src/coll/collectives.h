// coll/collectives.h — the collective operations, as free functions on a Communicator.
//
// Contract
// - Buffers are typed byte spans: a pointer, an element count and a DType. `count` is per
//   rank where noted. Every rank of the communicator calls the same collective, in the same
//   order, with matching count, type, op and root (checked: see coll/call.h — a mismatch is
//   a Desync error naming both calls and both ranks).
// - In place: allreduce/reduce with send == recv; allgather with send == recv + rank*count;
//   reduce_scatter with recv == send + rank*count; otherwise buffers must not overlap.
// - Counts of 0 and counts smaller than or not divisible by the group size all work.
// - Result guarantees: every rank holds bit-identical results; with opts.deterministic the
//   bits also do not depend on the algorithm or segment size (rank-ordered reduction).
// - Errors: InvalidArgument for bad arguments or an algorithm the op lacks; Desync; PeerFailure
//   naming a rank that died (on every surviving rank); Timeout naming the ranks that never
//   arrived, all within opts.timeout_s (default: the communicator's).
// - The algorithm actually used is returned (auto resolved by coll/cost_model.h).
// Thread-safety: collectives on one communicator must be issued in the same order on every
// rank; use coll/work.h to run them on a progress thread.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "coll/communicator.h"
#include "coll/types.h"

namespace dtrain {

Algorithm allreduce(Communicator& comm, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                    const AllreduceOptions& opts = {});
inline Algorithm allreduce(Communicator& comm, void* buf, size_t count, DType t, ReduceOp op,
                           const AllreduceOptions& opts = {}) {
  return allreduce(comm, buf, buf, count, t, op, opts);
}
// All-reduce (float32 sum) whose owners transform the result before it is shared: the
// optimizer step fused into the gradient all-reduce (ZeRO stage 1 without a separate
// all-gather pass, parallel/zero.h). counts[q] consecutive elements, in rank order, belong to
// rank q (the same counts on every rank; their sum is the buffer's length). Rank q is handed
// the sums of its elements in pieces, each element exactly once, in order:
// apply(offset, values, len) gets in values[0, len) the sums of elements [offset, offset +
// len) of the buffer and computes what every rank's recv shall hold at those places: either
// left in values (returns false), or written by apply itself into this rank's recv at
// [offset, offset + len) (returns true; values is then scratch), which saves a copy where the
// result is made in place there (ddp's optimizer steps its parameters where they lie).
// Afterwards every rank's recv holds, bit for bit, what the owners' apply left; send is only
// read, unless it is recv (in place: each piece of it is overwritten only after its owner
// has read it on every rank). Otherwise they must not overlap, and recv must not be read or written by anyone else
// during the call (the owners write into it; apply may read this rank's own recv at its own
// offsets, which hold what they held before the call until apply returns).
// On one host with the shared-memory context it is one pass: each owner reduces a piece of
// its block from every rank's input, applies, and the piece goes to every output while it is
// in cache (shm_direct's cross-memory reads/writes, or the slots); elsewhere it is a
// reduce-scatter, apply, all-gather (also where opts.algorithm is not auto; those two calls
// then pick their own algorithms). Returns the algorithm used.
using ApplyFn = std::function<bool(size_t offset, float* values, size_t len)>;
// window (optional): when send lies in this rank's buffer of that window (coll/shm_context.h)
// at the same place on every rank (checked: InvalidArgument naming both places), the owners
// read every input where it lies instead of through the slots.
// recv_shared (with a window): recv is ONE buffer that every rank maps (each passes its own
// mapping of it, e.g. another window's buffer of rank 0): each owner writes its block there and
// nothing is copied out, so the host keeps one copy of the result (ddp's shared parameters).
// No rank may read recv's other blocks during the call; all of them are written on return.
// apply_sum (optional, with recv_shared): the owner is handed each piece's inputs, every
// rank's where it lies in rank order, instead of their sum, and writes the piece of recv
// itself with what apply would make of inputs[0] + inputs[1] + ... added in that order (the
// sum the other paths compute): one pass over the inputs instead of a sum, then apply.
using ApplySumFn = std::function<void(size_t offset, const float* const* inputs, int k, size_t len)>;
Algorithm allreduce_apply(Communicator& comm, const float* send, float* recv, const std::vector<size_t>& counts,
                          const ApplyFn& apply, const AllreduceOptions& opts = {}, const ShmWindow* window = nullptr,
                          bool recv_shared = false, const ApplySumFn& apply_sum = {});
// allreduce_apply's counts for n elements owned in p blocks as the collectives split them
// (the first n % p blocks one longer): what ddp passes for a plain all-reduce in its window.
std::vector<size_t> even_counts(size_t n, int p);
Algorithm broadcast(Communicator& comm, void* buf, size_t count, DType t, int root, const BroadcastOptions& opts = {});
// recv is used on the root only (may be null elsewhere).
Algorithm reduce(Communicator& comm, const void* send, void* recv, size_t count, DType t, ReduceOp op, int root,
                 const ReduceOptions& opts = {});
// recv holds size()*count elements in rank order.
Algorithm allgather(Communicator& comm, const void* send, void* recv, size_t count, DType t,
                    const AllgatherOptions& opts = {});
// Variable counts: rank q contributes counts[q] elements; recv holds sum(counts) in rank order.
Algorithm allgatherv(Communicator& comm, const void* send, void* recv, const std::vector<size_t>& counts, DType t,
                     const AllgatherOptions& opts = {});
// send holds size()*count elements; rank r receives the reduction of block r (count elements).
Algorithm reduce_scatter(Communicator& comm, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                         const ReduceScatterOptions& opts = {});
// recv (root only) holds size()*count elements in rank order.
Algorithm gather(Communicator& comm, const void* send, void* recv, size_t count, DType t, int root,
                 const GatherOptions& opts = {});
// send (root only) holds size()*count elements; every rank receives its block.
Algorithm scatter(Communicator& comm, const void* send, void* recv, size_t count, DType t, int root,
                  const ScatterOptions& opts = {});
// send and recv hold size()*count elements; block q of send goes to rank q.
Algorithm alltoall(Communicator& comm, const void* send, void* recv, size_t count, DType t,
                   const AlltoallOptions& opts = {});
Algorithm barrier(Communicator& comm, const BarrierOptions& opts = {});

}  // namespace dtrain

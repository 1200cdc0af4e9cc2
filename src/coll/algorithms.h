// coll/algorithms.h — the algorithms behind the collectives (internal to coll/).
//
// Contract
// - Every function runs one algorithm for the Call it is given, on raw buffers of the call's
//   element type, counted in elements, IN PLACE: the caller (collectives.cc) has already
//   copied inputs into the working buffer and copies results out afterwards, and applies the
//   final division of kAvg. Every rank of the call must run the same function with the same
//   sizes.
// - Tags: each function uses call.tag(base + step) with step < 2^16, so two phases of one call
//   (e.g. reduce-scatter then all-gather) given different bases never mix messages.
// - All ranks end with bit-identical results: every element of the result is combined by
//   exactly one rank (or by commutative pairs a op b / b op a, which are equal bit for bit)
//   and then copied.
// - Blocks partition n elements over p ranks: block i has n/p elements, plus one for the
//   first n%p blocks (a count smaller than p gives empty blocks), or explicit counts.
// - Fold describes a non-power-of-two group for the butterflies: p2 = largest power of two
//   <= p, rem = p - p2; among the first 2*rem ranks each even rank hands its data to the odd
//   rank after it and sits out (vrank -1); the others take virtual ranks 0..p2-1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <utility>
#include <vector>

#include "coll/call.h"
#include "coll/shm_context.h"

namespace dtrain::algo {

struct Blocks {
  Blocks(size_t n, int p);
  explicit Blocks(const std::vector<size_t>& counts);
  std::vector<size_t> off;  // p + 1 entries; off[p] = total
  size_t len(int i) const { return off[i + 1] - off[i]; }
  size_t total() const { return off.back(); }
  int parts() const { return static_cast<int>(off.size()) - 1; }
};

struct Fold {
  Fold(int rank, int p);
  int p2, rem, vrank;
  int real(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  bool dropped() const { return vrank < 0; }
};

// Recursive halving among the fold's p2 virtual ranks, on virtual blocks with element offsets
// off[0..p2] into buf: in round k this rank keeps half of its current block range, sends the
// other half to its partner at distance p2/2^(k+1) and reduces the partner's copy of the kept
// half into buf (tags tag, tag+1, ...). Returns the final range [lo, hi): one virtual block
// holding the reduction over every rank that took part. Used by Rabenseifner's all-reduce and
// by the recursive-halving reduce-scatter.
std::pair<int, int> halving_rounds(Call& c, const Fold& fold, char* buf, const std::vector<size_t>& off, uint32_t tag);

constexpr uint32_t kPhase = 1u << 16;  // tag base of the second phase of a composed algorithm

// All-reduce, in place on buf (n elements).
void allreduce_naive(Call& c, char* buf, size_t n);
void allreduce_ring(Call& c, char* buf, size_t n, const char* input = nullptr);  // input: as reduce_scatter_ring
void allreduce_tree(Call& c, char* buf, size_t n);
void allreduce_recursive_doubling(Call& c, char* buf, size_t n);
void allreduce_halving_doubling(Call& c, char* buf, size_t n);
void allreduce_param_server(Call& c, char* buf, size_t n);
void allreduce_deterministic(Call& c, char* buf, size_t n, Algorithm gather);
// Reads the inputs in place (send may equal buf): no copy-in. Finishes kAvg itself (the owner
// divides each reduced piece before sharing it), unlike the other all-reduce algorithms.
void allreduce_shm_direct(Call& c, const char* send, char* buf, size_t n, ShmContext* ctx);

// Reduce-scatter in place over blocks: afterwards block r of buf on rank r holds the result.
// input: the caller's buffer when it differs from buf (out of place; nullptr = in place).
void reduce_scatter_ring(Call& c, char* buf, const Blocks& b, uint32_t base, const char* input = nullptr);
void reduce_scatter_halving(Call& c, char* buf, const Blocks& b, uint32_t base);
void reduce_scatter_direct(Call& c, char* buf, const Blocks& b, uint32_t base);  // rank-ordered

// All-gather in place over blocks: block r is valid on rank r on entry, all blocks on exit.
void allgather_ring(Call& c, char* buf, const Blocks& b, uint32_t base);
void allgather_recursive_doubling(Call& c, char* buf, const Blocks& b, uint32_t base);  // p a power of 2
void allgather_bruck(Call& c, char* buf, const Blocks& b, uint32_t base);
void allgather_naive(Call& c, char* buf, const Blocks& b, uint32_t base);
// Shared-memory direct (one host; see shm_direct.cc). ctx may be null.
// mine: this rank's block (the send buffer, or buf's own block when in place).
void allgather_shm_direct(Call& c, char* buf, const char* mine, const Blocks& b, ShmContext* ctx);
void broadcast_shm_direct(Call& c, char* buf, size_t n, int root, ShmContext* ctx);
bool reduce_scatter_shm_direct(Call& c, const char* send, char* out, const Blocks& b, ShmContext* ctx);
// Through the context's slots (see shm_slots.cc): plain copies and full phases (a pipeline of
// per-chunk handshakes for broadcast); chosen by the shm_direct functions where that is faster.
void allreduce_slots(Call& c, const char* send, char* buf, size_t n, ShmContext& ctx);
// allreduce_apply's shared-memory paths (coll/collectives.h): rank r reduces block r of every
// input piece by piece, hands each piece to `apply` (offset from the start of the buffer,
// the values in place; true: apply wrote the result into this rank's recv itself) and every
// rank's recv gets the result. The shm_direct one returns
// false, having done nothing, when cross-memory reads are refused (it takes the slots where
// allreduce_shm_direct would).
using ApplyPiece = std::function<bool(size_t offset, char* values, size_t len)>;
bool allreduce_apply_shm_direct(Call& c, const char* send, char* recv, const Blocks& b, const ApplyPiece& apply,
                                ShmContext* ctx);
void allreduce_apply_slots(Call& c, const char* send, char* recv, const Blocks& b, const ApplyPiece& apply,
                           ShmContext& ctx);
// ... with every rank's input at byte `offset` of its window: read there, no copy in.
// recv_shared: recv is the same memory on every rank; owners write their blocks, no copy out;
// there apply_sum, if set, takes each piece's inputs in rank order in place of sum and apply.
using ApplySumPiece = std::function<void(size_t offset, const void* const* inputs, int k, size_t len)>;
void allreduce_apply_window(Call& c, size_t offset, char* recv, const Blocks& b, const ApplyPiece& apply,
                            ShmContext& ctx, const ShmWindow& window, bool recv_shared,
                            const ApplySumPiece& apply_sum = {});
void allgather_slots(Call& c, char* buf, const char* mine, const Blocks& b, ShmContext& ctx);
void reduce_scatter_slots(Call& c, const char* send, char* out, const Blocks& b, ShmContext& ctx);
void broadcast_slots(Call& c, char* buf, size_t n, int root, ShmContext& ctx);

// Rooted operations. Broadcast: buf valid on root on entry, everywhere on exit.
void broadcast_binomial(Call& c, char* buf, size_t n, int root, uint32_t base);
void broadcast_chain(Call& c, char* buf, size_t n, int root, uint32_t base);
void broadcast_naive(Call& c, char* buf, size_t n, int root, uint32_t base);
// Reduce: buf is every rank's contribution on entry (and is clobbered); the result on root.
void reduce_binomial(Call& c, char* buf, size_t n, int root, uint32_t base);
void reduce_naive(Call& c, char* buf, size_t n, int root, uint32_t base);  // rank-ordered
// Gather: `mine` (n elements) from every rank into `all` (p*n, rank order) on root.
void gather_binomial(Call& c, const char* mine, char* all, size_t n, int root);
void gather_naive(Call& c, const char* mine, char* all, size_t n, int root);
// Scatter: block r of `all` (root only) to `mine` on rank r.
void scatter_binomial(Call& c, const char* all, char* mine, size_t n, int root);
void scatter_naive(Call& c, const char* all, char* mine, size_t n, int root);
// All-to-all: block q of `in` goes to rank q, landing in block r of its `out`.
void alltoall_pairwise(Call& c, const char* in, char* out, size_t n);
void alltoall_naive(Call& c, const char* in, char* out, size_t n);
// Barriers.
void barrier_dissemination(Call& c);
void barrier_recursive_doubling(Call& c);

}  // namespace dtrain::algo

// Collectives through the shared-memory context's slots (coll/shm_context.h): broadcast,
// all-gather and reduce-scatter for the sizes where the cost is in the synchronisation, not
// in the copies.
//
// The cross-memory algorithms of shm_direct.cc copy once, but pay for it: a phase to swap
// buffer addresses, a closing phase so no buffer changes while it is read, a system call per
// read that pins the owner's pages (and, for broadcast, a binomial tree of rounds so no
// buffer has two readers under its page-table lock). With 8 ranks on 2 cores every phase is
// a trip through the scheduler for every rank; that, not bandwidth, is what 64 KiB-1 MiB
// cost there (64 KiB broadcast over 4 phases: 0.27x OpenMPI's bandwidth). The slots are
// mapped by everyone already, so data can go through them with plain copies:
//
// - All-reduce, a reduce-scatter and an all-gather fused, two full phases per piece (a
//   slot's worth, cut into p chunks): each rank copies the piece's other chunks into its slot
//   (phase a); rank r reduces chunk r, its own input's from `send` in place and the others'
//   from their slots, in rank order, into `buf`, and copies that into chunk r of its OTHER
//   slot, the one phase a + 1 may write once everyone has arrived at a (phase a + 1);
//   everyone copies chunk q out of rank q's slot. Only rank r reads chunk r of phase a's
//   slots, and only it writes chunk r of its slot, so nothing is read while written. Per rank
//   that is (p-1)/p of the piece copied in, reduced once and (p-1)/p copied out (its own chunk
//   through the slots cost 15-25% at 2 ranks, docs/history/sittings.md): memory-speed copies,
//   where shm_direct's cross-memory reads and writes pin pages in every system call (35% of
//   a 1 MiB call in a profile) and need an address swap and a closing phase besides.
// - All-gather: each rank copies (a piece of) its block into its slot, one full phase (which
//   also checks every rank's call), and everyone copies every block out. Blocks larger than
//   a slot go in pieces, one phase each.
// - Reduce-scatter: each rank copies piece k of every other block into its slot (block q at
//   place q), one full phase, and rank r reduces piece k of block r from all slots, and its
//   own from `send` in place, in rank order (bit-identical to the other algorithms'
//   deterministic mode).
// - Broadcast with more ranks than cores: the root copies (a slot's worth) into its slot, one
//   full phase, everyone copies it out.
// - Broadcast otherwise, pipelined with per-chunk handshakes instead of phases for everyone: the
//   root's slot is a ring of chunk-sized regions; the root writes chunk k into region
//   k % R once every reader has finished chunk k - R, and arrives at phase base + k; a
//   reader waits for the root alone to reach base + k, copies chunk k out, and arrives at
//   base + k itself. While one reader copies chunk k the root writes chunk k + 1, so two
//   ranks overlap their copies. One full phase closes the call (the fingerprint check, and
//   the point after which the slot may be written again): its number has the parity of
//   base, so the fingerprint record it writes was last compared two full phases back, which
//   every rank has passed (shm_context.h).
//
// Each function needs the context (the caller checks); a rank that died or sits in another
// call is found by the context's waits, as on every shared-memory path.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "coll/algorithms.h"
#include "coll/bytes.h"
#include "coll/reduce_kernels.h"
#include "coll/shm_context.h"

namespace dtrain::algo {
namespace {

struct Waits {
  Call& c;
  ShmContext& ctx;
  Deadline deadline;
  std::function<std::string()> what;
  Waits(Call& call, ShmContext& context)
      : c(call), ctx(context), deadline(Deadline::after(call.remaining())), what([&call] { return call.describe(); }) {}
  // One full phase: arrive, wait for everyone, compare the calls.
  void all(uint64_t phase, size_t busy_bytes) {
    arrive(phase);
    wait(phase, busy_bytes);
  }
  // The two halves of all(), for work that needs no peer between them.
  void arrive(uint64_t phase) { ctx.arrive(phase, &c.fingerprint()); }
  void wait(uint64_t phase, size_t busy_bytes) { ctx.wait_all(phase, deadline, what, busy_bytes, &c.fingerprint()); }
};

// One output phase of allreduce_apply: this rank reduces its piece at `at` (up to `piece`
// elements of its block; inputs in rank order) into its slot of the next phase, applies,
// arrives, and then copies every block's piece at `at` out of its owner's slot. The slot is
// written only after everyone arrived at the phase before (the caller's last full phase).
void apply_and_share(Call& c, Waits& waits, const std::vector<const void*>& in_rank_order, const Blocks& b, size_t at,
                     size_t piece, const ApplyPiece& apply, char* recv) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  ShmContext& ctx = waits.ctx;
  auto part = [&](int q) { return b.len(q) > at ? std::min(piece, b.len(q) - at) : size_t{0}; };
  const uint64_t out = ctx.next_phase();
  const size_t mine = part(me);
  char* values = ctx.my_slot(out);
  // Two ranks whose cores are far apart: the slot's lines were read by the peer's core at
  // the piece before, and a plain store takes each back across the cores first (ShmContext::
  // streams_to_peers). So the piece is reduced and applied in this rank's scratch and
  // streamed into the slot once. The README's main job (ddp -n 2, the 0.94 MB MLP, each run's
  // samples all far, three interleaved pairs): 132.8-136.7k -> 143.5-144.3k examples/s.
  if (mine && ctx.streams_to_peers(mine * es)) {
    char* scratch = c.scratch(mine * es);
    reduce_ordered(c.dtype(), c.redop(), scratch, in_rank_order.data(), p, mine);
    const bool applied = apply(b.off[me] + at, scratch, mine);
    copy_bytes_streaming(values, applied ? recv + (b.off[me] + at) * es : scratch, mine * es);
  } else if (mine) {
    reduce_ordered(c.dtype(), c.redop(), values, in_rank_order.data(), p, mine);
    if (apply(b.off[me] + at, values, mine)) copy_bytes(values, recv + (b.off[me] + at) * es, mine * es);
  }
  waits.all(out, mine * es);
  for (int k = 0; k < p; ++k) {
    const int q = (me + k) % p;
    copy_bytes(recv + (b.off[q] + at) * es, ctx.slot_of(q, out), part(q) * es);
  }
}

}  // namespace

void allreduce_slots(Call& c, const char* send, char* buf, size_t n, ShmContext& ctx) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  // Elements per piece: a slot's worth, a multiple of p so that full pieces cut evenly.
  const size_t per_piece = std::max<size_t>(p, ctx.slot_bytes() / es / p * p);
  Waits waits(c, ctx);
  std::vector<const void*> in_rank_order(static_cast<size_t>(p));
  for (size_t at = 0; at < n; at += per_piece) {
    const size_t len = std::min(per_piece, n - at);
    const Blocks chunks(len, p);
    // Only the chunks the others reduce go into the slot: this rank's own chunk is read from
    // `send` where it is, and its result lands in `buf` first (reduce_ordered allows `out` to
    // alias a source, so in place too) and is copied into the slot from there, while in cache.
    const uint64_t in = ctx.next_phase();
    for (int q = 0; q < p; ++q)
      if (q != me) copy_bytes(ctx.my_slot(in) + chunks.off[q] * es, send + (at + chunks.off[q]) * es, chunks.len(q) * es);
    waits.all(in, len * es);
    const uint64_t out = ctx.next_phase();
    for (int q = 0; q < p; ++q) in_rank_order[q] = ctx.slot_of(q, in) + chunks.off[me] * es;
    in_rank_order[me] = send + (at + chunks.off[me]) * es;
    if (chunks.len(me)) {
      char* result = buf + (at + chunks.off[me]) * es;
      reduce_ordered(c.dtype(), c.redop(), result, in_rank_order.data(), p, chunks.len(me));
      if (c.redop() == ReduceOp::kAvg) finish_avg(c.dtype(), result, chunks.len(me), p);  // once, by the owner
      copy_bytes(ctx.my_slot(out) + chunks.off[me] * es, result, chunks.len(me) * es);
    }
    waits.all(out, len * es);
    for (int k = 1; k < p; ++k) {
      const int q = (me + k) % p;
      copy_bytes(buf + (at + chunks.off[q]) * es, ctx.slot_of(q, out) + chunks.off[q] * es, chunks.len(q) * es);
    }
  }
}

void allgather_slots(Call& c, char* buf, const char* mine, const Blocks& b, ShmContext& ctx) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem(), piece = ctx.slot_bytes();
  size_t longest = 0;
  for (int q = 0; q < p; ++q) longest = std::max(longest, b.len(q) * es);
  Waits waits(c, ctx);
  for (size_t at = 0; at < longest; at += piece) {
    const uint64_t phase = ctx.next_phase();
    const size_t own = b.len(me) * es > at ? std::min(piece, b.len(me) * es - at) : 0;
    if (own) copy_bytes(ctx.my_slot(phase), mine + at, own);  // an empty block's `mine` may be null
    // The own piece goes into place between arriving and waiting, while the peers finish
    // their pieces: the wait then costs only what they still lack.
    waits.arrive(phase);
    if (own) copy_bytes_if_apart(buf + (b.off[me] * es) + at, mine + at, own);
    waits.wait(phase, own);
    for (int k = 1; k < p; ++k) {
      const int q = (me + k) % p;
      const size_t len = b.len(q) * es > at ? std::min(piece, b.len(q) * es - at) : 0;
      copy_bytes(buf + b.off[q] * es + at, ctx.slot_of(q, phase), len);
    }
  }
}

void reduce_scatter_slots(Call& c, const char* send, char* out, const Blocks& b, ShmContext& ctx) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  const size_t piece = std::max<size_t>(1, ctx.slot_bytes() / es / static_cast<size_t>(p));  // elements per block
  size_t longest = 0;
  for (int q = 0; q < p; ++q) longest = std::max(longest, b.len(q));
  Waits waits(c, ctx);
  std::vector<const void*> in_rank_order(static_cast<size_t>(p));
  for (size_t at = 0; at < longest; at += piece) {
    const uint64_t phase = ctx.next_phase();
    char* slot = ctx.my_slot(phase);
    for (int q = 0; q < p; ++q) {
      const size_t len = b.len(q) > at ? std::min(piece, b.len(q) - at) : 0;
      if (q != me) copy_bytes(slot + q * piece * es, send + (b.off[q] + at) * es, len * es);  // its own: in place
    }
    waits.all(phase, piece * es * p);
    const size_t mine = b.len(me) > at ? std::min(piece, b.len(me) - at) : 0;
    for (int q = 0; q < p; ++q) in_rank_order[q] = ctx.slot_of(q, phase) + me * piece * es;
    in_rank_order[me] = send + (b.off[me] + at) * es;
    if (mine) reduce_ordered(c.dtype(), c.redop(), out + at * es, in_rank_order.data(), p, mine);
  }
}

// allreduce_apply through the slots: reduce_scatter_slots' layout (piece k of every block,
// block q at place q of each rank's slot; one full phase), then rank r reduces piece k of
// block r into its OTHER slot, hands it to apply there, and a second full phase lets
// everyone copy every block's piece out: allreduce_slots' two phases per piece, with the
// owners' apply in between.
void allreduce_apply_slots(Call& c, const char* send, char* recv, const Blocks& b, const ApplyPiece& apply,
                           ShmContext& ctx) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  const size_t piece = std::max<size_t>(1, ctx.slot_bytes() / es / static_cast<size_t>(p));  // elements per block
  size_t longest = 0;
  for (int q = 0; q < p; ++q) longest = std::max(longest, b.len(q));
  auto part = [&](int q, size_t at) { return b.len(q) > at ? std::min(piece, b.len(q) - at) : size_t{0}; };
  Waits waits(c, ctx);
  std::vector<const void*> in_rank_order(static_cast<size_t>(p));
  for (size_t at = 0; at < longest; at += piece) {
    const uint64_t in = ctx.next_phase();
    char* slot = ctx.my_slot(in);
    for (int q = 0; q < p; ++q)  // its own block this rank reads in place (allreduce_slots)
      if (q != me) copy_bytes(slot + q * piece * es, send + (b.off[q] + at) * es, part(q, at) * es);
    waits.all(in, piece * es * p);
    for (int q = 0; q < p; ++q) in_rank_order[q] = ctx.slot_of(q, in) + me * piece * es;
    in_rank_order[me] = send + (b.off[me] + at) * es;
    apply_and_share(c, waits, in_rank_order, b, at, piece, apply, recv);
  }
}

// allreduce_apply with the inputs in a window: they are in place once every rank has entered
// the call (one full phase, which also checks that all of them sit at the same offset), so
// each piece is one full phase: rank r reduces piece k of block r straight from every rank's
// window into its slot, applies, arrives, and everyone copies every block's piece out. The
// piece is a whole slot (not a slot over p), and nothing is copied in. Nobody writes a window
// here; a rank's last read precedes its arrival at the last phase, after which the caller may
// write its window again. recv_shared: recv is one buffer that every rank maps; each owner
// writes its own block into it and a single closing phase replaces the per-piece phases.
void allreduce_apply_window(Call& c, size_t offset, char* recv, const Blocks& b, const ApplyPiece& apply,
                            ShmContext& ctx, const ShmWindow& window, bool recv_shared, const ApplySumPiece& apply_sum) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  const size_t piece = std::max<size_t>(1, ctx.slot_bytes() / es);  // elements of a block per phase
  size_t longest = 0;
  for (int q = 0; q < p; ++q) longest = std::max(longest, b.len(q));
  auto part = [&](int q, size_t at) { return b.len(q) > at ? std::min(piece, b.len(q) - at) : size_t{0}; };
  Waits waits(c, ctx);
  const uint64_t ready = ctx.next_phase();
  const uint64_t mine_at = offset;
  std::memcpy(ctx.my_slot(ready), &mine_at, sizeof mine_at);
  waits.all(ready, 0);
  for (int q = 0; q < p; ++q) {
    uint64_t at;
    std::memcpy(&at, ctx.slot_of(q, ready), sizeof at);
    DT_CHECK(at == mine_at, InvalidArgument,
             c.describe() << ": rank " << q << "'s input is at byte " << at << " of its window, rank " << me
                          << "'s at byte " << mine_at << " (every rank must pass the same place)");
  }
  std::vector<const void*> in_rank_order(static_cast<size_t>(p));
  if (recv_shared) {
    // One recv that every rank maps: each owner writes its block there, piece by piece from
    // a cache-sized buffer (or apply does, in place, or apply_sum from the inputs where they
    // lie), and one closing phase says every block is written and every input read. Nothing
    // is copied out.
    char* values = c.scratch(piece * es);
    for (size_t at = 0; at < b.len(me); at += piece) {
      const size_t mine = part(me, at);
      for (int q = 0; q < p; ++q) in_rank_order[q] = window.of(q) + offset + (b.off[me] + at) * es;
      if (apply_sum) {
        apply_sum(b.off[me] + at, in_rank_order.data(), p, mine);
        continue;
      }
      reduce_ordered(c.dtype(), c.redop(), values, in_rank_order.data(), p, mine);
      if (!apply(b.off[me] + at, values, mine)) copy_bytes(recv + (b.off[me] + at) * es, values, mine * es);
    }
    waits.all(ctx.next_phase(), b.len(me) * es);
    return;
  }
  for (size_t at = 0; at < longest; at += piece) {
    for (int q = 0; q < p; ++q) in_rank_order[q] = window.of(q) + offset + (b.off[me] + at) * es;
    apply_and_share(c, waits, in_rank_order, b, at, piece, apply, recv);
  }
}

void broadcast_slots(Call& c, char* buf, size_t n, int root, ShmContext& ctx) {
  const int p = c.size(), me = c.rank();
  const size_t bytes = n * c.elem();
  Waits waits(c, ctx);
  if (ctx.oversubscribed()) {
    // More ranks than cores: every handshake may cost a time slice, so no pipeline: one full
    // phase per slot's worth (the root's copy in, then everyone's copy out).
    for (size_t at = 0; at < bytes; at += ctx.slot_bytes()) {
      const size_t len = std::min(ctx.slot_bytes(), bytes - at);
      const uint64_t phase = ctx.next_phase();
      if (me == root) copy_bytes(ctx.my_slot(phase), buf + at, len);
      waits.all(phase, me == root ? 0 : len);
      if (me != root) copy_bytes(buf + at, ctx.slot_of(root, phase), len);
    }
    return;
  }
  const size_t chunk = std::min(ctx.slot_bytes(), size_t{16} << 10);
  const size_t regions = ctx.slot_bytes() / chunk;
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  const uint64_t last = chunks + (chunks & 1);  // the closing phase, base + last: base's parity
  const uint64_t base = ctx.next_phases(last + 1);
  char* ring = const_cast<char*>(ctx.slot_of(root, base));
  for (uint64_t k = 0; k < chunks; ++k) {
    const size_t at = k * chunk, len = std::min(chunk, bytes - at);
    char* region = ring + (k % regions) * chunk;
    if (me == root) {
      if (k >= regions)
        for (int q = 0; q < p; ++q)
          if (q != root) ctx.wait_for(q, base + k - regions, waits.deadline, waits.what, 0, &c.fingerprint());
      copy_bytes(region, buf + at, len);
    } else {
      ctx.wait_for(root, base + k, waits.deadline, waits.what, len, &c.fingerprint());
      copy_bytes(buf + at, region, len);
    }
    ctx.arrive(base + k);
  }
  waits.all(base + last, 0);
}

}  // namespace dtrain::algo

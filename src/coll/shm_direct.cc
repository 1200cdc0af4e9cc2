// Shared-memory direct collectives (ranks on one host): all-reduce, all-gather, broadcast and
// reduce-scatter read the other ranks' buffers in place instead of sending messages.
//
// All-reduce: each rank reduces its slice straight out of the other ranks' buffers.
// The ranks first swap (pid, buffer address) records, which doubles as the barrier saying
// every input is in place. Rank r then owns slice r of the buffer (Blocks(n, p)): it reads
// slice r of every peer's buffer with cross-memory attach (process_vm_readv: one copy, no
// message, no intermediate ring), in pieces that stay in cache, and reduces the p copies in
// rank order into slice r of its own buffer, and pushes each finished piece into every
// peer's buffer (process_vm_writev) while the piece is still in cache; a last barrier keeps
// every buffer untouched until all reads and writes are done. Per rank that is 2(p-1)/p n
// bytes copied once — half of what a ring over the two-copy transport moves — plus 2 rounds
// of tiny messages. (Reading the finished slices back after a middle barrier instead, as
// this did first, found them out of cache: 16 MiB for 2 ranks went from 5.8 to 9.2 GB/s.)
// Results are rank-ordered, hence bit-identical everywhere (and equal to deterministic mode).
//
// All-gather reads each block from its owner; broadcast reads the root's buffer; reduce-
// scatter reduces block r straight from every rank's input. Each is one swap, the reads, and
// a closing barrier so no buffer changes while someone still reads it.
//
// Ranks that are threads of one process read with memcpy. Where the kernel forbids
// cross-memory attach (e.g. Yama ptrace restrictions), every rank learns it from a one-byte
// probe folded into a barrier, and all of them fall back to the ring algorithm together.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "coll/algorithms.h"
#include "coll/bytes.h"
#include "coll/reduce_kernels.h"

namespace dtrain::algo {
namespace {

constexpr size_t kPieceBytes = 256u << 10;
// All-gather copies its own block with non-temporal stores from this size (see there).
constexpr size_t kStreamingCopyBytes = size_t{32} << 20;
// Broadcast with a core per rank goes through the slots up to this size (see broadcast_shm_direct).
constexpr size_t kPipelinedBroadcastBytes = 256u << 10;
// With more ranks than cores, up to this size exclusive (see broadcast_shm_direct).
constexpr size_t kOversubscribedBroadcastSlotsBytes = size_t{4} << 20;

struct Peer {
  int64_t pid = 0;
  uint64_t addr = 0;  // the rank's input
  uint64_t out = 0;   // the rank's output, when it differs (all-reduce out of place)
  // Set by share() on arrival (what a peer sends is ignored): the rank is a thread of this
  // process, read and written with memcpy. Kept so no copy asks the kernel for getpid().
  uint64_t here = 0;
  Peer output() const { return Peer{pid, out ? out : addr, 0, here}; }
};

// Copies `bytes` from address `remote` of process `pid` into `local`; false when the kernel
// refuses (EPERM/ENOSYS), throws on other errors.
bool read_remote(const Peer& peer, size_t offset, void* local, size_t bytes, int peer_rank) {
  if (bytes == 0) return true;
  char* src = reinterpret_cast<char*>(peer.addr) + offset;
  if (peer.here) {
    copy_bytes(local, src, bytes);
    return true;
  }
  size_t done = 0;
  while (done < bytes) {
    iovec l{static_cast<char*>(local) + done, bytes - done};
    iovec r{src + done, bytes - done};
    ssize_t got = ::process_vm_readv(static_cast<pid_t>(peer.pid), &l, 1, &r, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EPERM || errno == ENOSYS || errno == EACCES) return false;
      DT_THROW(IoError, "shm_direct: reading rank " << peer_rank << "'s buffer (pid " << peer.pid
                                                    << "): " << errno_string(errno));
    }
    if (got == 0) DT_THROW(IoError, "shm_direct: rank " << peer_rank << "'s buffer vanished (pid " << peer.pid << ")");
    done += static_cast<size_t>(got);
  }
  return true;
}

// Dissemination barrier that also ORs a flag across ranks.
bool barrier_or(Call& c, uint32_t base, bool flag) {
  const int p = c.size(), me = c.rank();
  char mine = flag, got = 0;
  for (int d = 1, round = 0; d < p; d <<= 1, ++round) {
    Transport& t = c.comm().transport();
    std::vector<Request> real{t.irecv((me - d + p) % p, c.tag(base + round), &got, 1),
                              t.isend((me + d) % p, c.tag(base + round), &mine, 1)};
    c.wait_all(real);
    mine = static_cast<char>(mine | got);
  }
  return mine != 0;
}

// With a ShmContext a phase is a flag in shared memory; without, a round of tiny messages.
struct Phases {
  Call& c;
  ShmContext* ctx;
  Deadline deadline;
  Phases(Call& call, ShmContext* context) : c(call), ctx(context), deadline(Deadline::after(call.remaining())) {}
  // busy_bytes: what the slowest rank may still be copying (ShmContext::wait_all's hint).
  // meanwhile(): work of this rank's own that needs nothing from the others, done between
  // announcing its arrival and waiting for theirs (so it overlaps the slowest rank's finish).
  // A template, not a std::function: no allocation on the call's path.
  bool barrier_or(uint32_t base, bool flag, size_t busy_bytes = 0) { return barrier_or(base, flag, busy_bytes, [] {}); }
  template <class Meanwhile>
  bool barrier_or(uint32_t base, bool flag, size_t busy_bytes, Meanwhile&& meanwhile) {
    if (!ctx) {
      meanwhile();
      return ::dtrain::algo::barrier_or(c, base, flag);
    }
    uint64_t ph = ctx->next_phase();
    *ctx->my_slot(ph) = flag;
    ctx->arrive(ph, &c.fingerprint());
    meanwhile();
    ctx->wait_all(ph, deadline, [this] { return c.describe(); }, busy_bytes, &c.fingerprint());
    bool any = false;
    for (int q = 0; q < c.size(); ++q) any = any || *ctx->slot_of(q, ph) != 0;
    return any;
  }
  // Swaps (pid, address of `mine`) with every rank — every input is in place once all have
  // arrived — then probes one byte of each peer's buffer and agrees whether reads work. A
  // ShmContext remembers the agreed answer (the same on every rank), so later calls skip the
  // probe and its barrier: one phase instead of two.
  bool share(const void* mine, std::vector<Peer>& peers, const void* my_out = nullptr) {
    const int p = c.size(), me = c.rank();
    Peer self{ctx ? ctx->own_pid() : ::getpid(), reinterpret_cast<uint64_t>(mine), reinterpret_cast<uint64_t>(my_out)};
    peers.assign(p, Peer{});
    peers[me] = self;
    if (ctx) {
      uint64_t ph = ctx->next_phase();
      std::memcpy(ctx->my_slot(ph), &self, sizeof self);
      ctx->arrive(ph, &c.fingerprint());
      ctx->wait_all(ph, deadline, [this] { return c.describe(); }, 0, &c.fingerprint());
      for (int q = 0; q < p; ++q) std::memcpy(&peers[q], ctx->slot_of(q, ph), sizeof(Peer));
    } else {
      std::vector<Request> reqs;
      for (int q = 0; q < p; ++q) {
        if (q == me) continue;
        reqs.push_back(c.comm().transport().irecv(q, c.tag(kSwap), &peers[q], sizeof(Peer)));
        reqs.push_back(c.comm().transport().isend(q, c.tag(kSwap), &self, sizeof(Peer)));
      }
      c.wait_all(reqs);
    }
    for (Peer& q : peers) q.here = q.pid == self.pid;
    if (ctx && ctx->cross_memory_reads() >= 0) return ctx->cross_memory_reads() == 1;
    bool refused = false;
    for (int q = 0; q < p && !refused; ++q) {
      char byte;
      if (q != me && !read_remote(peers[q], 0, &byte, 1, q)) refused = true;
    }
    const bool ok = !barrier_or(kProbe, refused);
    if (ctx) ctx->set_cross_memory_reads(ok);
    return ok;
  }
  static constexpr uint32_t kSwap = 0, kProbe = 8, kEnd = 72, kTree = 1024;
};

// Copies `bytes` from `local` to address peer.addr + offset of process peer.pid (memcpy for a
// peer in this process); throws on failure (only called after a successful read probe).
void must_write(const Peer& peer, size_t offset, const void* local, size_t bytes, int peer_rank) {
  if (bytes == 0) return;
  char* dst = reinterpret_cast<char*>(peer.addr) + offset;
  if (peer.here) return copy_bytes(dst, local, bytes);
  size_t done = 0;
  while (done < bytes) {
    iovec l{const_cast<char*>(static_cast<const char*>(local)) + done, bytes - done};
    iovec r{dst + done, bytes - done};
    ssize_t put = ::process_vm_writev(static_cast<pid_t>(peer.pid), &l, 1, &r, 1, 0);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0)
      DT_THROW(IoError, "shm_direct: writing rank " << peer_rank << "'s buffer (pid " << peer.pid
                                                    << "): " << (put < 0 ? errno_string(errno) : "nothing written"));
    done += static_cast<size_t>(put);
  }
}

void must_read(const Peer& peer, size_t offset, void* local, size_t bytes, int q) {
  if (!read_remote(peer, offset, local, bytes, q))
    DT_THROW(IoError, "shm_direct: cross-memory read of rank " << q << " refused after a successful probe");
}

// Reduces elements [lo, lo+n) of the p buffers in rank order into out, piece by piece:
// peers in this process are read in place, others copied into cache-sized scratch first.
// push: each finished piece is also written into every peer's output at the same place,
// while it is still in cache.
// apply (allreduce_apply): each reduced piece goes to a cache-sized buffer first, is handed
// to apply there, and what apply leaves (there, or in out itself) lands in out and the
// peers' outputs.
// average: kAvg's division of each reduced piece, in cache, before it is pushed (a pass of
// its own over the whole output afterwards reads back the lines the peers wrote: 2 ranks,
// 0.94 MB in place, 129-147 us against the sum's 55).
void reduce_slice(Call& c, const std::vector<Peer>& peers, size_t lo, size_t n, char* out, bool push = false,
                  const ApplyPiece* apply = nullptr, bool average = false) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  const size_t piece = std::max<size_t>(1, std::min(kPieceBytes / es, n));
  // Each peer's copy lands at the same offset within a cache line as its source, so the
  // distance between them is a multiple of 64: the kernel copies with `rep movsb`, which on
  // AMD Zen 3 ran 1.4-1.5 GB/s instead of 7-8 for a destination 1-31 bytes past the source
  // modulo 4 KiB (process_vm_readv, 16 KiB-1 MiB; base/copy.h).
  // A region per peer in another process (those in this one are read in place), and with
  // apply one piece for the reduced values: at 2 ranks one region, 256 KiB (it was p + 1
  // regions and a piece, 1 MiB, of which the run touched one region).
  const size_t region = piece * es + 64;
  const auto remote = static_cast<size_t>(std::count_if(peers.begin(), peers.end(), [](const Peer& q) { return !q.here; }));
  char* scratch = c.scratch(region * remote + (apply ? piece * es : 0) + 64);
  char* copies = scratch + (64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64;
  char* values = copies + remote * region;
  std::vector<const void*> in_rank_order(p);
  for (size_t at = 0; at < n; at += piece) {
    const size_t len = std::min(piece, n - at), off = (lo + at) * es;
    // Visit the peers starting after this rank, so concurrent ranks touch different owners'
    // pages (the reduction itself is still in rank order).
    // The peers in another process take the regions in visiting order: the same each piece.
    size_t next_region = 0;
    for (int k = 0; k < p; ++k) {
      const int q = (me + k) % p;
      if (peers[q].here) {
        in_rank_order[q] = reinterpret_cast<const char*>(peers[q].addr) + off;
      } else {
        char* dst = copies + next_region++ * region + (peers[q].addr + off) % 64;
        must_read(peers[q], off, dst, len * es, q);
        in_rank_order[q] = dst;
      }
    }
    if (apply) {
      reduce_ordered(c.dtype(), c.redop(), values, in_rank_order.data(), p, len);
      if (!(*apply)(lo + at, values, len)) copy_bytes(out + at * es, values, len * es);
    } else {
      reduce_ordered(c.dtype(), c.redop(), out + at * es, in_rank_order.data(), p, len);
      if (average) finish_avg(c.dtype(), out + at * es, len, p);
    }
    if (push)
      for (int k = 1; k < p; ++k) {
        const int q = (me + k) % p;
        must_write(peers[q].output(), off, out + at * es, len * es, q);
      }
  }
}


}  // namespace

}  // namespace dtrain::algo

namespace dtrain {

// The path choice (declared in coll/shm_context.h). All-reduce: allreduce_shm_direct says
// why. All-gather and reduce-scatter: every size the slots carry, unless the context's probe
// found the two ranks' cores far apart. Then, at 2 ranks on the EPYC VM (bench collectives,
// 8-byte round trip 0.30-0.41 us, two interleaved rounds each), the cross-memory reads were
// faster at every size from 64 KiB to 256 MiB: all-gather 5.8 against 9.3-10.1 us at 64 KiB,
// 11.3 against 24-27 us at 256 KiB, 1.25-1.5x from 1 MiB; reduce-scatter 6.5 against
// 9.9-10.6 us at 64 KiB, 1.2-1.9x above. With the cores close the slots were 1.3-1.9x ahead
// (docs/history/sittings.md, 2026-11-25 02:21) -- for the all-gather only while its output
// fits the last-level cache (ShmContext::slots_allgather_max_bytes says why). Broadcast:
// broadcast_shm_direct says why.
bool shm_direct_one_phase(CollOp op, const Communicator& comm, const ShmContext* ctx, size_t bytes) {
  const bool carried = op == CollOp::kAllreduce || op == CollOp::kBroadcast || op == CollOp::kAllgather ||
                       op == CollOp::kReduceScatter;
  if (!carried || !ctx || comm.size() <= 1) return false;
  return bytes <= (op == CollOp::kAllreduce ? ctx->one_phase_allreduce_bytes() : ctx->small_allreduce_bytes());
}

// Preferred up to 64 KiB (never past the slot), where a call is a few round trips: the cost
// model prices shm_direct's phases at a message's alpha, which a phase through the context
// does not pay. Past its one phase the all-reduce takes the slots (more ranks than cores) or
// the reads (two ranks far apart, 32-64 KiB). Before the far one phase reached 64 KiB, the
// model took the message ring there for the all-gather and the reduce-scatter (EPYC VM,
// cores far, 32 KiB: 10.2-10.8 and 11.6-11.8 us, against 4.6 and 5.0-5.7 through the reads).
bool shm_direct_preferred(CollOp op, const Communicator& comm, const ShmContext* ctx, size_t bytes) {
  const bool carried = op == CollOp::kAllreduce || op == CollOp::kBroadcast || op == CollOp::kAllgather ||
                       op == CollOp::kReduceScatter;
  if (!carried || !ctx || comm.size() <= 1) return false;
  return bytes <= std::min(ctx->slot_bytes(), ShmContext::kSmallAllreduceBytes);
}

bool shm_direct_takes_slots(CollOp op, const Communicator& comm, const ShmContext* ctx, size_t bytes) {
  return ctx && shm_direct_takes_slots_under(op, comm, ctx, bytes, ctx->cores_far());
}

bool shm_direct_takes_slots_under(CollOp op, const Communicator& comm, const ShmContext* ctx, size_t bytes,
                                  bool far) {
  if (!ctx || bytes > comm.coll_config().shm_slots_bytes) return false;
  // The all-reduce's threshold follows the verdict where there is one (two ranks, a core each).
  const size_t allreduce_min = !*ctx->core_distance_from() || far == ctx->cores_far() ? ctx->slots_allreduce_min_bytes()
                               : far                                                   ? kSlotsAllreduceFarMinBytes
                                                                                       : kSlotsAllreduceCloseMinBytes;
  switch (op) {
    case CollOp::kAllreduce: return ctx->oversubscribed() || bytes >= allreduce_min;
    case CollOp::kAllgather: return !far && bytes <= ctx->slots_allgather_max_bytes();
    case CollOp::kReduceScatter: return !far;
    case CollOp::kBroadcast:
      return ctx->oversubscribed() ? bytes < algo::kOversubscribedBroadcastSlotsBytes
                                   : bytes <= algo::kPipelinedBroadcastBytes && !far;
    default: return false;
  }
}

}  // namespace dtrain

namespace dtrain::algo {

void allreduce_shm_direct(Call& c, const char* send, char* buf, size_t n, ShmContext* ctx) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  if (p == 1 || n == 0) return copy_bytes_if_apart(buf, send, n * es);
  // Through the slots (shm_slots.cc) up to DTRAIN_SHM_SLOTS_BYTES (every size by default):
  // plain copies and full phases instead of pinned cross-memory copies, an address swap and a
  // closing phase. A/B on the EPYC VM (bench collectives, 256 KiB slots): 4 ranks on 2 cores
  // 256 KiB-16 MiB 1.9-2.7x faster, 8 ranks 2.4-3.1x, 32-256 MiB 1.6-1.8x at both. With a
  // core per rank (2 ranks here) it depends on the VM's mode (docs/history/sittings.md, 2026-11-25
  // 02:21): with the two vCPUs close (8-byte all-reduce ~0.13 us) the slots were 1.3-1.9x the
  // cross-memory path at every size from 256 KiB (1 MiB 20.4-20.8 vs 11.4-11.9 GB/s busbw);
  // far apart (~0.35-0.45 us) they lost up to 4 MiB (8.0-8.4 against 10.0-11.2 GB/s), lost
  // 10-20% at 8 MiB (8.1-8.3 against 8.8-10.1; close, they were 1.9x there) and were even or
  // ahead from 16 MiB (16 MiB 7.3 against 6.8-7.5, 64 MiB 6.3-6.5 against 6.0). Measured again
  // far apart (2026-11-26, two interleaved rounds, busbw GB/s), the slots lost at every size:
  // 8-32 MiB 4.4-5.0 against 6.0-8.3, 64 MiB even (3.4-3.6), 128 MiB 3.3 against 3.6. So with
  // a core per rank they take the calls from kSlotsAllreduceCloseMinBytes where the context's
  // probe found the two cores close, and never (kSlotsAllreduceFarMinBytes) where it found
  // them far apart.
  if (ctx && ctx->take_slots(CollOp::kAllreduce, n * es)) return allreduce_slots(c, send, buf, n, *ctx);
  Phases phases(c, ctx);
  std::vector<Peer> peers;
  if (!phases.share(send, peers, buf)) {
    copy_bytes_if_apart(buf, send, n * es);
    Blocks blocks(n, p);
    reduce_scatter_ring(c, buf, blocks, kPhase);
    allgather_ring(c, buf, blocks, 2 * kPhase);
    if (c.redop() == ReduceOp::kAvg) finish_avg(c.dtype(), buf, n, p);
    return;
  }
  // Reduce my slice from all p inputs (mine read in place) into my output, and push each
  // finished piece into every peer's output while it is in cache. Only I write slice `me`
  // anywhere, and only I read slice `me` of any input, each piece before I overwrite it
  // (in place, input = output): no other rank touches what I write.
  Blocks slices(n, p);
  reduce_slice(c, peers, slices.off[me], slices.len(me), buf + slices.off[me] * es, /*push=*/true, nullptr,
               /*average=*/c.redop() == ReduceOp::kAvg);
  phases.barrier_or(Phases::kEnd, false, n * es);
}

// allreduce_apply, shm-direct: allreduce_shm_direct with the owners' apply between the
// reduction of each piece and its push: the peers' inputs are read (never written), the
// outputs are written only by the owner of each block, its own directly and the peers'
// through cross-memory writes, and the closing phase keeps every input in place until all
// reads are done. Where allreduce_shm_direct takes the slots, so does this.
bool allreduce_apply_shm_direct(Call& c, const char* send, char* recv, const Blocks& b, const ApplyPiece& apply,
                                ShmContext* ctx) {
  const int me = c.rank();
  const size_t bytes = b.total() * c.elem();
  if (ctx && ctx->take_slots(CollOp::kAllreduce, bytes)) {
    allreduce_apply_slots(c, send, recv, b, apply, *ctx);
    return true;
  }
  Phases phases(c, ctx);
  std::vector<Peer> peers;
  if (!phases.share(send, peers, recv)) return false;
  reduce_slice(c, peers, b.off[me], b.len(me), recv + b.off[me] * c.elem(), /*push=*/true, &apply);
  phases.barrier_or(Phases::kEnd, false, bytes);
  return true;
}

// All-gather, shm-direct: every rank reads each block straight from its owner's input (the
// send buffer, so an out-of-place call needs no copy-in before the peers can read: the
// owner copies its own block into place while they read). (Recursive doubling — one reader
// per buffer per round, as broadcast does below — was tried for 4 ranks: the extra barrier
// rounds cost more than the page-lock contention, 3.1-3.75 vs 3.9-4.3 GB/s at 1 MiB.)
void allgather_shm_direct(Call& c, char* buf, const char* mine, const Blocks& b, ShmContext* ctx) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  char* my_block = buf + b.off[me] * es;
  if (p == 1 || b.total() == 0) return copy_bytes_if_apart(my_block, mine, b.len(me) * es);
  if (ctx && ctx->take_slots(CollOp::kAllgather, b.total() * es)) return allgather_slots(c, buf, mine, b, *ctx);
  Phases phases(c, ctx);
  std::vector<Peer> peers;
  if (!phases.share(mine, peers)) {
    copy_bytes_if_apart(my_block, mine, b.len(me) * es);
    return allgather_ring(c, buf, b, kPhase);
  }
  // Rank r reads r+1, r+2, ... in turn, so at any moment the ranks read different owners
  // (all starting with rank 0 had every reader pinning the same pages under one lock).
  for (int k = 1; k < p; ++k) {
    const int q = (me + k) % p;
    must_read(peers[q], 0, buf + b.off[q] * es, b.len(q) * es, q);
  }
  // The own block is copied after this rank says it has read everything: the peers may
  // finish meanwhile (they only read `mine`, as the copy does). Copying it while the others
  // arrive at the address swap instead measured the same (2 ranks, Xeon VM, 2026-11-29,
  // three interleaved rounds, 64 KiB-16 MiB within the rounds' spread). From kStreamingCopyBytes with
  // stores that bypass the caches (2 ranks, three rounds: 256 MiB 52.1-53.7 -> 47.1-47.7 ms,
  // 64 MiB 8.4-9.0 -> 8.3-8.6 ms; at 16 MiB, 8 MiB blocks, they lost: 1.50-1.57 -> 1.67-1.80).
  const size_t own = b.len(me) * es;
  phases.barrier_or(Phases::kEnd, false, b.total() * es, [&] {
    if (own >= kStreamingCopyBytes && (my_block + own <= mine || mine + own <= my_block))
      copy_bytes_streaming(my_block, mine, own);
    else
      copy_bytes_if_apart(my_block, mine, own);
  });
}

// Broadcast, shm-direct: a binomial tree of copies. In round j (mask = 2^j) each rank whose
// distance from the root is in [mask, 2 mask) gets the whole buffer from the rank `mask`
// closer to the root, which got it in an earlier round; a barrier closes each round. Every
// source has at most one reader at a time: when all p-1 ranks read the root at once, the
// kernel pins the root's pages for each of them under one page-table lock, and with 4 ranks
// on 2 cores 40% of the time went to that lock (1 MiB took 250-300 us; OpenMPI 165).
void broadcast_shm_direct(Call& c, char* buf, size_t n, int root, ShmContext* ctx) {
  const int p = c.size(), me = c.rank();
  if (p == 1 || n == 0) return;
  // Through the slots when ranks outnumber the cores below kOversubscribedBroadcastSlotsBytes
  // (a phase per slot's worth; each cross-memory round is a trip through the scheduler). From
  // 4 MiB the tree's log2(p) rounds cost less than the slots' phase per 256 KiB: 4 and 8
  // ranks on the EPYC VM's 2 cores (bench collectives, slots against DTRAIN_SHM_SLOTS_BYTES=0,
  // 2026-11-30), the cores close: 4 MiB 278-439 against 612-750 us at 4 ranks, 1.2-2.4 against
  // 1.5-3.0 ms at 8, 16-64 MiB even; the cores far, 4 ranks: 1.15 against 1.81 ms at 4 MiB,
  // 3.7 against 8.6 at 16 MiB, 9.6 against 36 at 64 MiB. Below, the slots won with the cores
  // close (256 KiB 34-40 against 64-68 us at 4 ranks; 1 MiB at 8 ranks 221-621 against
  // 386-1013) and lost far (256 KiB 163 against 83), and nothing gives ranks beyond the
  // cores a verdict of their placement. With a core per rank only up to
  // kPipelinedBroadcastBytes: there, at 2 ranks, the slots'
  // pipeline took 51 us for 1 MiB and 195 us for 4 MiB against 37 and 139 us for the reads
  // below (bench collectives, 256 KiB slots). With the two cores far apart (ShmContext's
  // probe) not even that: there the reads took 4.7-4.9 us at 64 KiB and 8.4-8.7 us at 256 KiB
  // against the slots' 12.4-13.6 and 26.5-26.9.
  const size_t bytes = n * c.elem();
  if (ctx && ctx->take_slots(CollOp::kBroadcast, bytes)) return broadcast_slots(c, buf, n, root, *ctx);
  Phases phases(c, ctx);
  std::vector<Peer> peers;
  if (!phases.share(buf, peers)) return broadcast_binomial(c, buf, n, root, kPhase);
  // Within a round the pair shares the copy: the receiver pulls the second half while the
  // sender pushes the first half into the receiver's buffer, so both cores copy (for 2 ranks
  // the root would otherwise sit idle while its peer copied everything).
  const int v = (me - root + p) % p;
  const size_t half = bytes / 2 / 64 * 64;
  for (int mask = 1, round = 0; mask < p; mask <<= 1, ++round) {
    if (v >= mask && v < 2 * mask) {
      const int from = (v - mask + root) % p;
      must_read(peers[from], half, buf + half, bytes - half, from);
    } else if (v < mask && v + mask < p) {
      const int to = (v + mask + root) % p;
      must_write(peers[to], 0, buf, half, to);
    }
    const bool last = 2 * mask >= p;
    phases.barrier_or(last ? Phases::kEnd : Phases::kTree + 64 * round, false, bytes);
  }
}

// Reduce-scatter, shm-direct: rank r reduces block r straight from every rank's input.
// Returns false (having done nothing) when cross-memory reads are refused.
bool reduce_scatter_shm_direct(Call& c, const char* send, char* out, const Blocks& b, ShmContext* ctx) {
  const int me = c.rank();
  if (b.total() == 0) return true;
  if (ctx && ctx->take_slots(CollOp::kReduceScatter, b.total() * c.elem())) {
    reduce_scatter_slots(c, send, out, b, *ctx);
    return true;
  }
  Phases phases(c, ctx);
  std::vector<Peer> peers;
  if (!phases.share(send, peers)) return false;
  reduce_slice(c, peers, b.off[me], b.len(me), out);
  phases.barrier_or(Phases::kEnd, false, b.total() * c.elem());
  return true;
}

}  // namespace dtrain::algo

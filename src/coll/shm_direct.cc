// All-reduce, shared-memory direct (ranks on one host): each rank reduces its slice straight
// out of the other ranks' buffers.
//
// The ranks first swap (pid, buffer address) records, which doubles as the barrier saying
// every input is in place. Rank r then owns slice r of the buffer (Blocks(n, p)): it reads
// slice r of every peer's buffer with cross-memory attach (process_vm_readv: one copy, no
// message, no intermediate ring), in pieces that stay in cache, and reduces the p copies in
// rank order into slice r of its own buffer. After a barrier every rank reads each finished
// slice q straight from rank q's buffer into its own; a last barrier keeps every buffer
// untouched until all reads are done. Per rank that is 2(p-1)/p n bytes copied once — half
// of what a ring over the two-copy transport moves — plus 3 rounds of tiny messages.
// Results are rank-ordered, hence bit-identical everywhere (and equal to deterministic mode).
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
#include "coll/reduce_kernels.h"

namespace dtrain::algo {
namespace {

constexpr size_t kPieceBytes = 256u << 10;

struct Peer {
  int64_t pid = 0;
  uint64_t addr = 0;
};

// Copies `bytes` from address `remote` of process `pid` into `local`; false when the kernel
// refuses (EPERM/ENOSYS), throws on other errors.
bool read_remote(const Peer& peer, size_t offset, void* local, size_t bytes, int peer_rank) {
  if (bytes == 0) return true;
  char* src = reinterpret_cast<char*>(peer.addr) + offset;
  if (peer.pid == ::getpid()) {
    std::memcpy(local, src, bytes);
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

}  // namespace

void allreduce_shm_direct(Call& c, char* buf, size_t n, ShmContext* ctx) {
  const int p = c.size(), me = c.rank();
  if (p == 1 || n == 0) return;
  const size_t es = c.elem();
  const uint32_t kSwap = 0, kProbe = 8, kReduced = 40, kGathered = 72;
  const Deadline deadline = Deadline::after(c.remaining());
  const std::string what = c.describe();
  // With a ShmContext the phases are flags in shared memory; without, tiny messages.
  auto phase_barrier = [&](uint32_t base, bool flag) {
    if (!ctx) return barrier_or(c, base, flag);
    uint64_t ph = ctx->next_phase();
    *ctx->my_slot(ph) = flag;
    ctx->arrive(ph);
    ctx->wait_all(ph, deadline, what.c_str());
    bool any = false;
    for (int q = 0; q < p; ++q) any = any || *ctx->slot_of(q, ph) != 0;
    return any;
  };

  // 1. Swap (pid, address): every rank's input is in place once its record arrives.
  Peer self{::getpid(), reinterpret_cast<uint64_t>(buf)};
  std::vector<Peer> peers(p);
  peers[me] = self;
  if (ctx) {
    uint64_t ph = ctx->next_phase();
    std::memcpy(ctx->my_slot(ph), &self, sizeof self);
    ctx->arrive(ph);
    ctx->wait_all(ph, deadline, what.c_str());
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

  // 2. Can everyone read everyone? Probe one byte per peer, agree on the answer.
  bool refused = false;
  for (int q = 0; q < p && !refused; ++q) {
    char byte;
    if (q != me && !read_remote(peers[q], 0, &byte, 1, q)) refused = true;
  }
  if (phase_barrier(kProbe, refused)) {
    Blocks blocks(n, p);
    reduce_scatter_ring(c, buf, blocks, kPhase);
    allgather_ring(c, buf, blocks, 2 * kPhase);
    return;
  }

  // 3. Reduce my slice from all p buffers, piece by piece, in rank order.
  Blocks slices(n, p);
  const size_t mine_lo = slices.off[me], mine_n = slices.len(me);
  const size_t piece = std::max<size_t>(1, std::min(kPieceBytes / es, mine_n));
  char* copies = c.scratch(piece * es * p);
  std::vector<const void*> in_rank_order(p);
  for (size_t lo = 0; lo < mine_n; lo += piece) {
    const size_t len = std::min(piece, mine_n - lo), at = (mine_lo + lo) * es;
    for (int q = 0; q < p; ++q) {
      if (q == me) {
        in_rank_order[q] = buf + at;
        continue;
      }
      if (peers[q].pid == self.pid) {  // a thread of this process: read in place, no copy
        in_rank_order[q] = reinterpret_cast<const char*>(peers[q].addr) + at;
        continue;
      }
      char* dst = copies + static_cast<size_t>(q) * piece * es;
      if (!read_remote(peers[q], at, dst, len * es, q))
        DT_THROW(IoError, "shm_direct: cross-memory read of rank " << q << " refused after a successful probe");
      in_rank_order[q] = dst;
    }
    reduce_ordered(c.dtype(), c.redop(), buf + at, in_rank_order.data(), p, len);
  }
  phase_barrier(kReduced, false);

  // 4. Copy every finished slice from its owner, then wait until nobody reads my buffer.
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    const size_t at = slices.off[q] * es;
    if (!read_remote(peers[q], at, buf + at, slices.len(q) * es, q))
      DT_THROW(IoError, "shm_direct: cross-memory read of rank " << q << " refused after a successful probe");
  }
  phase_barrier(kGathered, false);
}

}  // namespace dtrain::algo

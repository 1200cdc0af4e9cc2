// Reduce-scatter and all-gather algorithms over a block partition (see Blocks), in place.
#include <algorithm>
#include <cstring>

#include "coll/algorithms.h"
#include "coll/bytes.h"
#include "coll/reduce_kernels.h"

namespace dtrain::algo {
namespace {
int mod(int a, int p) { return ((a % p) + p) % p; }
}  // namespace

// ---------------------------------------------------------------------------------------
// Reduce-scatter, ring. In step s (0..p-2) rank r sends the running partial of block r-1-s
// to rank r+1 while it receives the partial of block r-2-s from rank r-1 and adds its own
// contribution (an exchange: the send and the receive run at once, so both directions of
// every link are busy). The block it sends in step s+1 is the one it finished in step s;
// after p-1 steps block r is complete on rank r. p-1 messages, (p-1)/p of the buffer.
// Out of place (input != buf): step 0 sends its block straight from the input and every
// received partial is added to the input's block into buf, so the input is never copied;
// buf's block r-1 (sent at step 0, never received) is left as it was.
void reduce_scatter_ring(Call& c, char* buf, const Blocks& b, uint32_t base, const char* input) {
  const int p = c.size(), me = c.rank();
  if (p == 1) return;
  const size_t es = c.elem();
  const int next = mod(me + 1, p), prev = mod(me - 1, p);
  if (!input) input = buf;
  auto block = [&](int i) { return buf + b.off[mod(i, p)] * es; };
  auto in_block = [&](int i) { return input + b.off[mod(i, p)] * es; };
  auto len = [&](int i) { return b.len(mod(i, p)); };
  for (int s = 0; s <= p - 2; ++s)
    c.exchange(next, base + s, s == 0 ? in_block(me - 1) : block(me - 1 - s), len(me - 1 - s), prev, base + s,
               block(me - 2 - s), len(me - 2 - s), /*reduce=*/true, in_block(me - 2 - s));
}

// ---------------------------------------------------------------------------------------
// All-gather, ring. In step s (0..p-2) rank r sends block r-s to rank r+1 while receiving
// block r-1-s from rank r-1; step 0 sends its own block, later steps forward what the last
// step brought. p-1 messages, (p-1)/p of the output sent per rank.
void allgather_ring(Call& c, char* buf, const Blocks& b, uint32_t base) {
  const int p = c.size(), me = c.rank();
  if (p == 1) return;
  const size_t es = c.elem();
  const int next = mod(me + 1, p), prev = mod(me - 1, p);
  auto block = [&](int i) { return buf + b.off[mod(i, p)] * es; };
  auto len = [&](int i) { return b.len(mod(i, p)); };
  for (int s = 0; s <= p - 2; ++s)
    c.exchange(next, base + s, block(me - s), len(me - s), prev, base + s, block(me - 1 - s), len(me - 1 - s),
               /*reduce=*/false);
}

// ---------------------------------------------------------------------------------------
// Reduce-scatter, recursive halving. Fold a non-power-of-two group (the even rank of each of
// the first rem pairs hands its whole buffer to its odd neighbour). The p2 remaining ranks
// own "virtual blocks": virtual block v is real blocks {2v, 2v+1} for v < rem, else v+rem —
// contiguous ranges, so halving works on them unchanged. In round k (distance p2/2, ..., 1)
// each rank sends the half of its range the partner keeps and reduces the half it keeps.
// At the end virtual rank v holds virtual block v; an odd folded rank sends real block 2v
// back to its even neighbour. lg p messages, (p-1)/p of the buffer.
void reduce_scatter_halving(Call& c, char* buf, const Blocks& b, uint32_t base) {
  const int p = c.size(), me = c.rank();
  if (p == 1) return;
  Fold fold(me, p);
  const size_t es = c.elem(), n = b.total();
  const uint32_t kFoldIn = base, kFoldOut = base + 1, kHalving = base + 2;
  if (me < 2 * fold.rem) {
    if (fold.dropped()) {
      c.send(me + 1, kFoldIn, buf, n);
      c.recv(me + 1, kFoldOut, buf + b.off[me] * es, b.len(me));
      return;
    }
    c.recv_reduce(me - 1, kFoldIn, buf, n);
  }
  std::vector<size_t> voff(fold.p2 + 1);
  for (int v = 0; v < fold.p2; ++v) voff[v] = b.off[v < fold.rem ? 2 * v : v + fold.rem];
  voff[fold.p2] = n;
  halving_rounds(c, fold, buf, voff, kHalving);
  if (me < 2 * fold.rem) c.send(me - 1, kFoldOut, buf + b.off[me - 1] * es, b.len(me - 1));
}

// ---------------------------------------------------------------------------------------
// Reduce-scatter, direct and rank-ordered (the deterministic-mode kernel). Every rank sends
// block q to rank q and receives block r from every rank, then reduces the p copies of its
// block in rank order 0..p-1 (accumulating half types in float32). p-1 messages each way.
void reduce_scatter_direct(Call& c, char* buf, const Blocks& b, uint32_t base) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem(), mine = b.len(me);
  if (p == 1) return;
  char* copies = c.scratch(mine * es * (p - 1));
  std::vector<const void*> in_rank_order(p);
  std::vector<Request> reqs;
  Transport& t = c.comm().transport();
  for (int q = 0, slot = 0; q < p; ++q) {
    if (q == me) {
      in_rank_order[q] = buf + b.off[me] * es;
      continue;
    }
    char* from_q = copies + mine * es * slot++;
    in_rank_order[q] = from_q;
    if (mine) reqs.push_back(t.irecv(q, c.tag(base), from_q, mine * es));
    if (b.len(q)) reqs.push_back(t.isend(q, c.tag(base), buf + b.off[q] * es, b.len(q) * es));
  }
  c.wait_all(reqs);
  if (mine) reduce_ordered(c.dtype(), c.redop(), buf + b.off[me] * es, in_rank_order.data(), p, mine);
}

// ---------------------------------------------------------------------------------------
// All-gather, recursive doubling (p a power of two). In round k rank r exchanges the 2^k
// blocks it holds (the aligned range containing r) with the rank whose bit k differs, so the
// held range doubles: lg p messages, (p-1)/p of the output.
void allgather_recursive_doubling(Call& c, char* buf, const Blocks& b, uint32_t base) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  for (int mask = 1, round = 0; mask < p; mask <<= 1, ++round) {
    int partner = me ^ mask;
    int mine0 = me & ~(mask - 1), theirs0 = partner & ~(mask - 1);
    c.exchange(partner, base + round, buf + b.off[mine0] * es, b.off[mine0 + mask] - b.off[mine0], partner,
               base + round, buf + b.off[theirs0] * es, b.off[theirs0 + mask] - b.off[theirs0], false);
  }
}

// ---------------------------------------------------------------------------------------
// All-gather, Bruck. Work in a copy rotated so that rank r's own block comes first. In round
// k (distance d = 2^k) send the first min(d, p-d) blocks held to rank r-d and append as many
// from rank r+d; after ceil(lg p) rounds all p blocks are held, and one rotation puts them in
// rank order. Any p, lg p messages, plus one local copy of the output.
void allgather_bruck(Call& c, char* buf, const Blocks& b, uint32_t base) {
  const int p = c.size(), me = c.rank();
  if (p == 1) return;
  const size_t es = c.elem(), n = b.total();
  char* rotated = c.scratch(n * es);
  const size_t head = b.off[me];  // rotated = buf[head..n) ++ buf[0..head)
  // Offset of relative block j in the rotated layout.
  auto rel_off = [&](int j) {
    int blk = (me + j) % p;
    return blk >= me ? b.off[blk] - head : n - head + b.off[blk];
  };
  auto rel_end = [&](int j) { return j == p ? n : rel_off(j); };
  copy_bytes(rotated, buf + head * es, b.len(me) * es);
  for (int d = 1, round = 0; d < p; d <<= 1, ++round) {
    int cnt = std::min(d, p - d);
    int to = mod(me - d, p), from = mod(me + d, p);
    // Blocks [0, cnt) are contiguous in the rotation; so are [d, d+cnt) unless they wrap
    // past block p-1 in rank order, which rel_off handles because the rotation is cyclic.
    size_t send_n = rel_end(cnt) - rel_off(0);
    size_t recv_lo = rel_off(d), recv_n = rel_end(d + cnt) - recv_lo;
    c.exchange(to, base + round, rotated, send_n, from, base + round, rotated + recv_lo * es, recv_n, false);
  }
  copy_bytes(buf + head * es, rotated, (n - head) * es);
  copy_bytes(buf, rotated + (n - head) * es, head * es);
}

// ---------------------------------------------------------------------------------------
// All-gather, naive: every rank sends its block to every other rank at once. One round.
void allgather_naive(Call& c, char* buf, const Blocks& b, uint32_t base) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  std::vector<Request> reqs;
  Transport& t = c.comm().transport();
  for (int q = 0; q < p; ++q) {
    if (q == me) continue;
    if (b.len(q)) reqs.push_back(t.irecv(q, c.tag(base), buf + b.off[q] * es, b.len(q) * es));
    if (b.len(me)) reqs.push_back(t.isend(q, c.tag(base), buf + b.off[me] * es, b.len(me) * es));
  }
  c.wait_all(reqs);
}

}  // namespace dtrain::algo

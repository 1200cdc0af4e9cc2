// All-reduce algorithms. Each section explains its algorithm first; the variable names
// follow the prose. All run in place on `buf` (n elements of the call's type).
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "coll/algorithms.h"
#include "coll/bytes.h"
#include "coll/reduce_kernels.h"

namespace dtrain::algo {

Blocks::Blocks(size_t n, int p) : off(p + 1) {
  size_t q = n / p, extra = n % p;
  for (int i = 0; i < p; ++i) off[i + 1] = off[i] + q + (static_cast<size_t>(i) < extra ? 1 : 0);
}
Blocks::Blocks(const std::vector<size_t>& counts) : off(counts.size() + 1) {
  for (size_t i = 0; i < counts.size(); ++i) off[i + 1] = off[i] + counts[i];
}

Fold::Fold(int rank, int p) {
  p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  rem = p - p2;
  if (rank < 2 * rem)
    vrank = rank % 2 == 0 ? -1 : rank / 2;
  else
    vrank = rank - rem;
}

std::pair<int, int> halving_rounds(Call& c, const Fold& fold, char* buf, const std::vector<size_t>& off, uint32_t tag) {
  const size_t es = c.elem();
  auto at = [&](int v) { return buf + off[v] * es; };
  auto span = [&](int v0, int v1) { return off[v1] - off[v0]; };
  int lo = 0, hi = fold.p2;
  for (int mask = fold.p2 / 2, round = 0; mask >= 1; mask >>= 1, ++round) {
    int partner = fold.real(fold.vrank ^ mask);
    int mid = lo + mask;
    bool keep_low = (fold.vrank & mask) == 0;
    int keep0 = keep_low ? lo : mid, keep1 = keep_low ? mid : hi;
    int give0 = keep_low ? mid : lo, give1 = keep_low ? hi : mid;
    c.exchange(partner, tag + round, at(give0), span(give0, give1), partner, tag + round, at(keep0),
               span(keep0, keep1), /*reduce=*/true);
    lo = keep0;
    hi = keep1;
  }
  return {lo, hi};
}

// ---------------------------------------------------------------------------------------
// Naive (direct). Every rank sends its whole buffer to every other rank and receives every
// other rank's buffer: N(N-1)M bytes cross the network. Each rank then reduces the p buffers
// in rank order 0, 1, ..., p-1, so every rank computes the same bits (and the result equals
// the deterministic mode's). Good for tiny messages on small groups: one round of latency.
void allreduce_naive(Call& c, char* buf, size_t n) {
  const int p = c.size(), me = c.rank();
  const size_t bytes = n * c.elem();
  if (p == 1 || n == 0) return;
  char* peers_data = c.scratch(bytes * (p - 1));
  std::vector<const void*> in_rank_order(p);
  std::vector<Request> reqs;
  Transport& t = c.comm().transport();
  for (int q = 0, slot = 0; q < p; ++q) {
    if (q == me) {
      in_rank_order[q] = buf;
      continue;
    }
    char* from_q = peers_data + bytes * slot++;
    in_rank_order[q] = from_q;
    reqs.push_back(t.irecv(q, c.tag(0), from_q, bytes));
    reqs.push_back(t.isend(q, c.tag(0), buf, bytes));
  }
  c.wait_all(reqs);
  reduce_ordered(c.dtype(), c.redop(), buf, in_rank_order.data(), p, n);
}

// ---------------------------------------------------------------------------------------
// Ring. The buffer is cut into p blocks. A reduce-scatter pass runs p-1 steps; in each, every
// rank sends a running partial sum to the next rank while receiving one from the previous
// rank and adding its own contribution to it (the block it forwards next); after p-1 steps
// rank r owns the full result of block r. An all-gather pass then circulates the finished
// blocks once more around the ring. Each rank sends 2(p-1)/p of the buffer in 2(p-1)
// messages, both directions of every link busy: bandwidth-optimal. Blocks move in segments
// (see Call::flow). All-reduce is literally reduce-scatter + all-gather.
void allreduce_ring(Call& c, char* buf, size_t n, const char* input) {
  Blocks blocks(n, c.size());
  if (c.size() == 1) return copy_bytes_if_apart(buf, input ? input : buf, n * c.elem());
  reduce_scatter_ring(c, buf, blocks, 0, input);
  allgather_ring(c, buf, blocks, kPhase);
}

// ---------------------------------------------------------------------------------------
// Tree. A binomial tree rooted at rank 0 reduces the buffer (each rank adds its children's
// partial sums, in a fixed child order, and passes the total to its parent), then a binomial
// broadcast sends the result back down. Both passes go segment by segment, so for long
// buffers the levels of the tree work on different segments at once (a pipeline):
// time ~ 2(lg p + k - 1)(alpha + s beta) for k segments of s bytes.
void allreduce_tree(Call& c, char* buf, size_t n) {
  reduce_binomial(c, buf, n, 0, 0);
  broadcast_binomial(c, buf, n, 0, kPhase);
}

// ---------------------------------------------------------------------------------------
// Butterfly, recursive doubling. In round k every rank exchanges its whole (partially
// reduced) buffer with the rank whose virtual rank differs in bit k and reduces; after lg p
// rounds everyone holds the total. Latency-optimal (lg p messages) but moves n lg p bytes,
// so it suits small buffers. A non-power-of-two group is folded first (see Fold): the extra
// even ranks hand their buffer to a neighbour, sit out, and receive the result at the end.
// Both partners compute mine op theirs; the ops are commutative bit for bit, so they agree.
void allreduce_recursive_doubling(Call& c, char* buf, size_t n) {
  const int me = c.rank();
  Fold fold(me, c.size());
  if (n == 0 || c.size() == 1) return;
  const uint32_t kFoldIn = 0, kFoldOut = 1, kRound = 2;
  if (me < 2 * fold.rem) {
    if (fold.dropped()) {
      c.send(me + 1, kFoldIn, buf, n);
      c.recv(me + 1, kFoldOut, buf, n);
      return;
    }
    c.recv_reduce(me - 1, kFoldIn, buf, n);
  }
  char* outgoing = c.scratch(n * c.elem());
  for (int mask = 1, round = 0; mask < fold.p2; mask <<= 1, ++round) {
    int partner = fold.real(fold.vrank ^ mask);
    copy_bytes(outgoing, buf, n * c.elem());
    c.exchange(partner, kRound + round, outgoing, n, partner, kRound + round, buf, n, /*reduce=*/true);
  }
  if (me < 2 * fold.rem) c.send(me - 1, kFoldOut, buf, n);
}

// ---------------------------------------------------------------------------------------
// Butterfly, halving-doubling (Rabenseifner). The buffer is cut into p2 blocks. Recursive
// halving: in round k (partner distance p2/2, p2/4, ..., 1) each rank sends the half of its
// current block range that the partner keeps and reduces the half it keeps, so after lg p
// rounds virtual rank v holds the total of block v, having sent (p2-1)/p2 of the buffer.
// Recursive doubling then gathers the blocks back (distance 1, 2, ..., p2/2), doubling the
// owned range each round. 2 lg p messages and 2(p-1)/p n bytes: good for large buffers on
// high-latency links. Non-powers of two are folded as in recursive doubling.
void allreduce_halving_doubling(Call& c, char* buf, size_t n) {
  const int me = c.rank();
  Fold fold(me, c.size());
  if (n == 0 || c.size() == 1) return;
  const uint32_t kFoldIn = 0, kFoldOut = 1, kHalving = 2, kDoubling = 40;
  if (me < 2 * fold.rem) {
    if (fold.dropped()) {
      c.send(me + 1, kFoldIn, buf, n);
      c.recv(me + 1, kFoldOut, buf, n);
      return;
    }
    c.recv_reduce(me - 1, kFoldIn, buf, n);
  }
  const size_t es = c.elem();
  Blocks blocks(n, fold.p2);
  auto at = [&](int b) { return buf + blocks.off[b] * es; };
  auto span = [&](int b0, int b1) { return blocks.off[b1] - blocks.off[b0]; };
  halving_rounds(c, fold, buf, blocks.off, kHalving);
  for (int mask = 1, round = 0; mask < fold.p2; mask <<= 1, ++round) {
    int partner_v = fold.vrank ^ mask;
    int partner = fold.real(partner_v);
    int mine0 = fold.vrank & ~(mask - 1), theirs0 = partner_v & ~(mask - 1);
    c.exchange(partner, kDoubling + round, at(mine0), span(mine0, mine0 + mask), partner, kDoubling + round,
               at(theirs0), span(theirs0, theirs0 + mask), /*reduce=*/false);
  }
  if (me < 2 * fold.rem) c.send(me - 1, kFoldOut, buf, n);
}

// ---------------------------------------------------------------------------------------
// Parameter server. Rank 0 plays the server: every worker pushes its buffer, the server
// reduces segment by segment in rank order (as the gradients arrive) and pushes each reduced
// segment straight back to every worker. The server's link carries 2(p-1)n bytes, so this
// is the baseline that ring and tree improve on — and the shape real PS systems shard.
void allreduce_param_server(Call& c, char* buf, size_t n) {
  const int p = c.size(), me = c.rank(), server = 0;
  if (p == 1 || n == 0) return;
  const size_t es = c.elem(), seg = c.segment_elems(), nseg = (n + seg - 1) / seg;
  Transport& t = c.comm().transport();
  const uint32_t kPush = 0, kPull = 1;
  if (me != server) {
    // The server reduces segment k only after our whole segment k arrived, so our send of k
    // has finished reading buf before the result for k can land there.
    std::vector<Request> reqs;
    for (size_t k = 0; k < nseg; ++k) {
      size_t lo = k * seg, len = std::min(seg, n - lo);
      reqs.push_back(t.isend(server, c.tag(kPush), buf + lo * es, len * es));
      reqs.push_back(t.irecv(server, c.tag(kPull), buf + lo * es, len * es));
    }
    c.wait_all(reqs);
    return;
  }
  const size_t kSlots = 2;  // double buffering: segment k+1 arrives while k is reduced
  // A slot holds one segment, or the whole message where it is shorter: a 4-byte call leases
  // 4 bytes a worker, not two 1 MiB segments that the scratch pool would then keep.
  const size_t slot = std::min(seg, n);
  char* pushed = c.scratch(std::min(kSlots, nseg) * (p - 1) * slot * es);
  std::vector<std::vector<Request>> incoming(nseg);
  auto post = [&](size_t k) {
    size_t lo = k * seg, len = std::min(seg, n - lo);
    for (int q = 1; q < p; ++q)
      incoming[k].push_back(t.irecv(q, c.tag(kPush), pushed + ((k % kSlots) * (p - 1) + q - 1) * slot * es, len * es));
  };
  std::vector<Request> pulls;
  for (size_t k = 0; k < std::min(kSlots, nseg); ++k) post(k);
  std::vector<const void*> in_rank_order(p);
  for (size_t k = 0; k < nseg; ++k) {
    size_t lo = k * seg, len = std::min(seg, n - lo);
    c.wait_all(incoming[k]);
    in_rank_order[0] = buf + lo * es;
    for (int q = 1; q < p; ++q) in_rank_order[q] = pushed + ((k % kSlots) * (p - 1) + q - 1) * slot * es;
    reduce_ordered(c.dtype(), c.redop(), buf + lo * es, in_rank_order.data(), p, len);
    if (k + kSlots < nseg) post(k + kSlots);
    for (int q = 1; q < p; ++q) pulls.push_back(t.isend(q, c.tag(kPull), buf + lo * es, len * es));
  }
  c.wait_all(pulls);
}

// ---------------------------------------------------------------------------------------
// Deterministic mode. The reduction order must not depend on the algorithm, the segment size
// or timing, so every element is reduced exactly once, by one rank, from all p contributions
// in rank order 0..p-1 (reduce_scatter_direct, accumulated in float32 for half types); the
// algorithm only chooses how the finished blocks are gathered, which moves bits unchanged.
void allreduce_deterministic(Call& c, char* buf, size_t n, Algorithm gather) {
  Blocks blocks(n, c.size());
  reduce_scatter_direct(c, buf, blocks, 0);
  bool pow2 = (c.size() & (c.size() - 1)) == 0;
  if ((gather == Algorithm::kRecursiveDoubling || gather == Algorithm::kHalvingDoubling ||
       gather == Algorithm::kButterfly) && pow2)
    allgather_recursive_doubling(c, buf, blocks, kPhase);
  else if (gather == Algorithm::kNaive)
    allgather_naive(c, buf, blocks, kPhase);
  else
    allgather_ring(c, buf, blocks, kPhase);
}

}  // namespace dtrain::algo

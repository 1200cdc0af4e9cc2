// Rooted algorithms (broadcast, reduce, gather, scatter), all-to-all and barriers.
// Trees use relative ranks v = (rank - root) mod p, so any rank can be the root.
#include <algorithm>
#include <cstring>

#include "coll/algorithms.h"
#include "coll/bytes.h"
#include "coll/reduce_kernels.h"

namespace dtrain::algo {
namespace {

int mod(int a, int p) { return ((a % p) + p) % p; }

// Binomial tree over relative ranks: the parent of v clears v's lowest set bit; the
// children of v are v + 2^k for every 2^k below v's lowest set bit (all k for the root).
struct Binomial {
  Binomial(int rank, int root, int p) : p(p), root(root), v(mod(rank - root, p)) {
    int mask = 1;
    while (mask < p && !(v & mask)) {
      if (v + mask < p) children.push_back(v + mask);
      mask <<= 1;
    }
    parent = v == 0 ? -1 : v - (v & -v);
  }
  int real(int rel) const { return (rel + root) % p; }
  int subtree(int rel) const { return rel == 0 ? p : std::min(rel & -rel, p - rel); }
  int p, root, v, parent;
  std::vector<int> children;  // nearest first
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Broadcast, binomial tree. Segment by segment, each rank receives from its parent and sends
// to its children, farthest subtree first; for long buffers the levels work on different
// segments at once. ceil(lg p) rounds of latency.
void broadcast_binomial(Call& c, char* buf, size_t n, int root, uint32_t base) {
  Binomial tree(c.rank(), root, c.size());
  const size_t es = c.elem(), seg = c.segment_elems();
  Transport& t = c.comm().transport();
  std::vector<Request> sends;
  for (size_t lo = 0; lo < n; lo += seg) {
    size_t len = std::min(seg, n - lo);
    if (tree.parent >= 0) c.recv(tree.real(tree.parent), base, buf + lo * es, len);
    for (auto it = tree.children.rbegin(); it != tree.children.rend(); ++it)
      sends.push_back(t.isend(tree.real(*it), c.tag(base), buf + lo * es, len * es));
  }
  c.wait_all(sends);
}

// ---------------------------------------------------------------------------------------
// Broadcast, pipelined chain. Ranks root, root+1, ..., root+p-1 form a line; each receives a
// segment from its predecessor and forwards it at once (recv_copy_send), so after the pipe
// fills every link is busy: time ~ (p - 2 + k)(alpha + s beta) for k segments of s bytes.
void broadcast_chain(Call& c, char* buf, size_t n, int root, uint32_t base) {
  const int p = c.size(), v = mod(c.rank() - root, p);
  const int prev = mod(c.rank() - 1, p), next = mod(c.rank() + 1, p);
  if (p == 1) return;
  if (v == 0)
    c.send(next, base, buf, n);
  else if (v == p - 1)
    c.recv(prev, base, buf, n);
  else
    c.recv_copy_send(prev, base, next, base, buf, n);
}

// Broadcast, naive: the root sends the whole buffer to every rank.
void broadcast_naive(Call& c, char* buf, size_t n, int root, uint32_t base) {
  if (n == 0) return;  // both sides skip empty transfers
  if (c.rank() != root) {
    Request r = c.post_recv(root, base, buf, n);
    return c.wait(r);
  }
  std::vector<Request> sends;
  for (int q = 0; q < c.size(); ++q)
    if (q != root && n) sends.push_back(c.comm().transport().isend(q, c.tag(base), buf, n * c.elem()));
  c.wait_all(sends);
}

// ---------------------------------------------------------------------------------------
// Reduce, binomial tree. Segment by segment, each rank adds its children's partial results
// (nearest child first: a fixed order, so the result does not depend on timing) and sends
// the sum to its parent. ceil(lg p) rounds; pipelined like the broadcast.
void reduce_binomial(Call& c, char* buf, size_t n, int root, uint32_t base) {
  Binomial tree(c.rank(), root, c.size());
  const size_t es = c.elem(), seg = c.segment_elems();
  Transport& t = c.comm().transport();
  std::vector<Request> sends;
  for (size_t lo = 0; lo < n; lo += seg) {
    size_t len = std::min(seg, n - lo);
    const size_t kids = tree.children.size();
    for (size_t i = 0; i + 1 < kids; ++i) c.recv_reduce(tree.real(tree.children[i]), base, buf + lo * es, len);
    if (kids && tree.parent >= 0)  // the last child's partial completes ours: add and pass it up
      c.recv_reduce_send(tree.real(tree.children.back()), base, tree.real(tree.parent), base, buf + lo * es, len);
    else if (kids)
      c.recv_reduce(tree.real(tree.children.back()), base, buf + lo * es, len);
    else if (tree.parent >= 0)
      sends.push_back(t.isend(tree.real(tree.parent), c.tag(base), buf + lo * es, len * es));
  }
  c.wait_all(sends);
}

// Reduce, naive: every rank sends its buffer to the root, which reduces in rank order.
void reduce_naive(Call& c, char* buf, size_t n, int root, uint32_t base) {
  if (n == 0) return;  // both sides skip empty transfers
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  if (me != root) {
    Request r = c.post_send(root, base, buf, n);
    return c.wait(r);
  }
  if (n == 0) return;
  char* copies = c.scratch(n * es * (p - 1));
  std::vector<const void*> in_rank_order(p);
  std::vector<Request> reqs;
  for (int q = 0, slot = 0; q < p; ++q) {
    if (q == me) {
      in_rank_order[q] = buf;
      continue;
    }
    in_rank_order[q] = copies + n * es * slot;
    reqs.push_back(c.comm().transport().irecv(q, c.tag(base), copies + n * es * slot++, n * es));
  }
  c.wait_all(reqs);
  reduce_ordered(c.dtype(), c.redop(), buf, in_rank_order.data(), p, n);
}

// ---------------------------------------------------------------------------------------
// Gather, binomial tree. Each rank collects the blocks of its subtree — relative ranks
// [v, v + subtree(v)), contiguous — from its children (child v+2^k's subtree lands 2^k blocks
// in), then sends them all to its parent in one message. The root rotates the relative order
// back to rank order. ceil(lg p) rounds; each block crosses lg p links at most.
void gather_binomial(Call& c, const char* mine, char* all, size_t n, int root) {
  Binomial tree(c.rank(), root, c.size());
  const size_t es = c.elem(), block = n * es;
  const int held = tree.subtree(tree.v);
  char* collected = c.scratch(held * block);
  if (block) std::memcpy(collected, mine, block);
  for (int child : tree.children)
    c.recv(tree.real(child), 0, collected + (child - tree.v) * block, tree.subtree(child) * n);
  if (tree.parent >= 0) return c.send(tree.real(tree.parent), 0, collected, held * n);
  for (int rel = 0; rel < c.size(); ++rel) copy_bytes(all + tree.real(rel) * block, collected + rel * block, block);
}

// Gather, naive: every rank sends its block straight to the root.
void gather_naive(Call& c, const char* mine, char* all, size_t n, int root) {
  if (n == 0) return;  // both sides skip empty transfers
  const size_t es = c.elem();
  if (c.rank() != root) {
    Request r = c.post_send(root, 0, mine, n);
    return c.wait(r);
  }
  std::vector<Request> reqs;
  for (int q = 0; q < c.size(); ++q)
    if (q != root && n) reqs.push_back(c.comm().transport().irecv(q, c.tag(0), all + q * n * es, n * es));
  copy_bytes(all + root * n * es, mine, n * es);
  c.wait_all(reqs);
}

// ---------------------------------------------------------------------------------------
// Scatter, binomial tree: the gather run backwards. The root lays the blocks out in relative
// order; every rank receives its subtree's blocks from its parent and passes each child its
// part, farthest child first.
void scatter_binomial(Call& c, const char* all, char* mine, size_t n, int root) {
  Binomial tree(c.rank(), root, c.size());
  const size_t es = c.elem(), block = n * es;
  const int held = tree.subtree(tree.v);
  char* subtree = c.scratch(held * block);
  if (tree.parent < 0) {
    for (int rel = 0; rel < c.size(); ++rel) copy_bytes(subtree + rel * block, all + tree.real(rel) * block, block);
  } else {
    Request r = c.post_recv(tree.real(tree.parent), 0, subtree, held * n);
    c.wait(r);
  }
  std::vector<Request> sends;
  for (auto it = tree.children.rbegin(); it != tree.children.rend(); ++it)
    sends.push_back(c.post_send(tree.real(*it), 0, subtree + (*it - tree.v) * block, tree.subtree(*it) * n));
  c.wait_all(sends);
  copy_bytes(mine, subtree, block);
}

// Scatter, naive: the root sends every rank its block directly.
void scatter_naive(Call& c, const char* all, char* mine, size_t n, int root) {
  if (n == 0) return;  // both sides skip empty transfers
  const size_t es = c.elem();
  if (c.rank() != root) {
    Request r = c.post_recv(root, 0, mine, n);
    return c.wait(r);
  }
  std::vector<Request> reqs;
  for (int q = 0; q < c.size(); ++q)
    if (q != root && n) reqs.push_back(c.comm().transport().isend(q, c.tag(0), all + q * n * es, n * es));
  copy_bytes(mine, all + root * n * es, n * es);
  c.wait_all(reqs);
}

// ---------------------------------------------------------------------------------------
// All-to-all, pairwise exchange. In step s (1..p-1) rank r sends its block for rank r+s and
// receives the block from rank r-s: every link carries one message per step, no hot spot.
void alltoall_pairwise(Call& c, const char* in, char* out, size_t n) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  copy_bytes(out + me * n * es, in + me * n * es, n * es);
  for (int s = 1; s < p; ++s) {
    int to = mod(me + s, p), from = mod(me - s, p);
    c.exchange(to, s, in + to * n * es, n, from, s, out + from * n * es, n, false);
  }
}

// All-to-all, naive: all p-1 sends and receives posted at once.
void alltoall_naive(Call& c, const char* in, char* out, size_t n) {
  const int p = c.size(), me = c.rank();
  const size_t es = c.elem();
  copy_bytes(out + me * n * es, in + me * n * es, n * es);
  std::vector<Request> reqs;
  Transport& t = c.comm().transport();
  for (int q = 0; q < p && n; ++q) {
    if (q == me) continue;
    reqs.push_back(t.irecv(q, c.tag(0), out + q * n * es, n * es));
    reqs.push_back(t.isend(q, c.tag(0), in + q * n * es, n * es));
  }
  c.wait_all(reqs);
}

// ---------------------------------------------------------------------------------------
// Barrier, dissemination: in round k rank r signals r + 2^k and waits for r - 2^k; after
// ceil(lg p) rounds everyone has heard, directly or not, from everyone.
void barrier_dissemination(Call& c) {
  const int p = c.size(), me = c.rank();
  char token = 1, got = 0;
  for (int d = 1, round = 0; d < p; d <<= 1, ++round) {
    Transport& t = c.comm().transport();
    std::vector<Request> rs{t.irecv(mod(me - d, p), c.tag(round), &got, 1), t.isend(mod(me + d, p), c.tag(round), &token, 1)};
    c.wait_all(rs);
  }
}

// Barrier, recursive doubling (with the butterfly's fold for non-powers of two).
void barrier_recursive_doubling(Call& c) {
  const int me = c.rank();
  Fold fold(me, c.size());
  char token = 1, got = 0;
  Transport& t = c.comm().transport();
  auto swap = [&](int peer, uint32_t step) {
    std::vector<Request> rs{t.irecv(peer, c.tag(step), &got, 1), t.isend(peer, c.tag(step), &token, 1)};
    c.wait_all(rs);
  };
  if (me < 2 * fold.rem) {
    swap(fold.dropped() ? me + 1 : me - 1, 0);
    if (fold.dropped()) return swap(me + 1, 1);
  }
  for (int mask = 1, round = 0; mask < fold.p2; mask <<= 1, ++round) swap(fold.real(fold.vrank ^ mask), 2 + round);
  if (me < 2 * fold.rem) swap(me - 1, 1);
}

}  // namespace dtrain::algo

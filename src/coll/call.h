// coll/call.h — one collective call in flight, and the primitives every algorithm is written on.
//
// Contract
// - A Call is made at the top of every collective (after the algorithm is resolved). It draws
//   the call's sequence number, fixes the deadline (the options' timeout, else the
//   communicator's) and posts the fingerprint exchange with the ring neighbours: a 40-byte
//   record (sequence, op, type, count, root, reduce op, algorithm) on a reserved tag stream,
//   sent to rank+1 and received from rank-1. The exchange overlaps the algorithm; run()
//   compares at the end (or first, when the algorithm failed) and throws Desync naming both
//   calls and both ranks. Ranks that agree pairwise around the ring agree globally. The
//   records travel even where the check is off (CollOptions::check, DTRAIN_COLL_CHECK=0);
//   only ranks that both check compare, so one rank turning it off is no false desync.
//   FingerprintRoute::kShmPhases skips that exchange where the algorithm runs on the
//   ShmContext's full phases (given in the options and serving this communicator): every such
//   phase already carries each rank's record and compares them all, and a waiting rank sees
//   a peer's published call, so the exchange would only repeat the check, for a message round
//   per call. Every rank must choose the same route for the same call, as it chooses the same
//   algorithm (the route follows from it).
//   Ranks that learn of a desync second-hand (a peer left after finding it) throw Desync
//   naming the rank(s) whose call differs from the majority's, not the rank that left.
// - run(fn) executes the algorithm and turns transport errors into errors that name the call
//   ("allreduce #17 (ring, float32 x 1000)") and the rank at fault: the first rank to see a
//   peer die records it in the store under the call's sequence number, and ranks that learn
//   of the failure second-hand (a neighbour that gave up) name the original dead rank. A
//   Timeout records which ranks reached the call and names the ones that never did; a rank
//   whose fingerprint its neighbour received is known to have entered the call, and is named
//   as "inside the call but not responding" (stopped or hung), not as never reaching it.
// - Primitives move `n` elements between this rank and a peer, in segments of
//   segment_elems() so that long transfers pipeline (a receive of segment k+1 overlaps the
//   reduction of segment k and the forwarding send of segment k):
//     send(to, tag, buf, n)                 recv(from, tag, buf, n)
//     recv_reduce(from, tag, acc, n)        acc op= incoming
//     recv_reduce_send(from, rtag, to, stag, acc, n)   acc op= incoming, then forward acc
//     recv_copy_send(from, rtag, to, stag, buf, n)     buf = incoming, then forward buf
//     exchange(to, stag, sbuf, sn, from, rtag, rbuf, rn, reduce[, base])  independent send +
//       receive; with base, a reduction writes rbuf = base op incoming (out of place: the
//       caller's input need not be copied into rbuf first)
//   Each returns when its own sends and receives are complete. Zero-length transfers are
//   skipped on both sides (both sides compute the same lengths).
// Thread-safety: a Call belongs to the thread running the collective.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "base/buffer_pool.h"
#include "base/clock.h"
#include "base/error.h"
#include "coll/communicator.h"
#include "coll/types.h"

namespace dtrain {

// Fingerprint::root of an allreduce_apply (coll/collectives.h), so that a rank in a plain
// all-reduce and one in allreduce_apply never take each other's calls for theirs.
inline constexpr int32_t kApplyRoot = -2;

// The errors Call::run throws once it has named the call and its ranks (still a PeerFailure
// and a Timeout to whoever catches them): a call whose algorithm ran collectives of its own
// (a hierarchy's sub-groups) passes theirs on with its own name in front, not analysed twice.
// NamedPeerFailure also carries the dead rank's world rank (peer() is in the numbering of the
// communicator that named it); NamedTimeout whether that call could still reach the store.
class NamedPeerFailure : public PeerFailure {
 public:
  NamedPeerFailure(const std::string& what, int peer, int world_peer)
      : PeerFailure(what, peer), world_peer_(world_peer) {}
  int world_peer() const { return world_peer_; }

 private:
  int world_peer_;
};
class NamedTimeout : public Timeout {
 public:
  NamedTimeout(const std::string& what, bool store_reachable) : Timeout(what), store_reachable_(store_reachable) {}
  bool store_reachable() const { return store_reachable_; }

 private:
  bool store_reachable_;
};

struct Fingerprint {
  uint64_t seq = 0;
  uint64_t count = 0;  // elements (per rank for gather-like ops); a hash for variable counts
  int32_t root = -1;
  uint8_t op = 0, dtype = 0, redop = 0, algorithm = 0;
  uint32_t reserved = 0;
  std::string describe() const;  // "allreduce(float32 x 1000, sum, ring)"
};

// Where a call's fingerprint is compared (see the contract above).
enum class FingerprintRoute { kTransport, kShmPhases };

class Call {
 public:
  Call(Communicator& comm, CollOp op, const CollOptions& opts, Algorithm algorithm, DType dtype, uint64_t count,
       int root = -1, ReduceOp redop = ReduceOp::kSum, FingerprintRoute route = FingerprintRoute::kTransport);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  template <class F>
  void run(F&& fn) {
    // The closing fingerprint check fails as the algorithm would (named, with the ranks that
    // never came): a hierarchy's algorithm sends nothing on this communicator, so its record
    // leaves only here, and a link cut after the sub-groups' calls surfaces in this wait.
    try {
      if (setup_error_) std::rethrow_exception(setup_error_);
      fn();
      finish();
    } catch (...) {
      fail(std::current_exception());
    }
  }

  Communicator& comm() { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  uint64_t seq() const { return fp_.seq; }
  const Fingerprint& fingerprint() const { return fp_; }
  DType dtype() const { return dtype_; }
  size_t elem() const { return elem_; }
  ReduceOp redop() const { return redop_; }
  bool deterministic() const { return opts_.deterministic; }
  const CollOptions& options() const { return opts_; }
  size_t segment_elems() const { return seg_elems_; }
  uint64_t tag(uint32_t step) const { return Communicator::collective_tag(fp_.seq, step); }
  double remaining() const { return deadline_.infinite() ? -1 : deadline_.remaining_seconds(); }
  std::string describe() const;

  void send(int to, uint32_t tag, const void* buf, size_t n);
  void recv(int from, uint32_t tag, void* buf, size_t n);
  void recv_reduce(int from, uint32_t tag, void* acc, size_t n);
  void recv_reduce_send(int from, uint32_t rtag, int to, uint32_t stag, void* acc, size_t n);
  void recv_copy_send(int from, uint32_t rtag, int to, uint32_t stag, void* buf, size_t n);
  void exchange(int to, uint32_t stag, const void* sbuf, size_t sn, int from, uint32_t rtag, void* rbuf, size_t rn,
                bool reduce, const void* base = nullptr);

  // Unsegmented messages (one message per call, both sides must use these): for direct
  // algorithms that post many transfers at once and wait for them together.
  Request post_send(int to, uint32_t tag, const void* buf, size_t n);
  Request post_recv(int from, uint32_t tag, void* buf, size_t n);
  // Waits with the call's deadline.
  void wait(Request& r);
  void wait_all(std::vector<Request>& rs);
  // Scratch of at least `bytes`, owned by the call (reused across primitives; growing keeps
  // the contents). Leased from the communicator's scratch pool (scratch_pool()), so a call
  // finds the pages of an earlier call's scratch already mapped: no page faults, no zero fill.
  char* scratch(size_t bytes);
  // A further working buffer of `bytes`, uninitialised, leased from the same pool and held
  // until the call ends (the collectives' copies of an input, a non-root's accumulator).
  char* temp(size_t bytes);

 private:
  // The engine behind the primitives: receive (copy or reduce) and/or send, segment by segment.
  void flow(int from, uint32_t rtag, void* rbuf, size_t rn, bool reduce, int to, uint32_t stag, const void* sbuf,
            size_t sn, bool forward, const void* base = nullptr);
  void check_fingerprint(bool after_error);
  [[noreturn]] void fail(std::exception_ptr e);
  void finish();
  std::string culprit_key(const char* what) const;
  // After a desync some rank reported: "collective desync: rank 2 called X; ranks 0, 1, 3
  // called Y", from the reports in the store; "" when they show no majority.
  std::string desync_verdict();

  Communicator& comm_;
  CollOp op_;
  CollOptions opts_;
  int rank_, size_;
  DType dtype_;
  size_t elem_;
  ReduceOp redop_;
  size_t seg_elems_;
  Deadline deadline_;
  double timeout_s_;
  Fingerprint fp_, peer_fp_;
  Request fp_send_, fp_recv_;
  bool fp_checked_ = false;
  bool checking_ = true;  // this rank compares fingerprints (CollOptions::check, DTRAIN_COLL_CHECK)
  bool shm_route_ = false;  // FingerprintRoute::kShmPhases, honoured: no exchange was posted
  std::exception_ptr setup_error_;  // posting the fingerprint failed (e.g. a dead neighbour)
  std::unique_ptr<BufferPool::Lease> scratch_;
  size_t scratch_bytes_ = 0;
  std::vector<std::unique_ptr<BufferPool::Lease>> temps_;
};

// The pool behind Call::scratch and Call::temp: one per communicator, keeping up to
// kScratchPoolBytes of released buffers warm (a larger buffer is freed when released).
inline constexpr size_t kScratchPoolBytes = size_t{64} << 20;
BufferPool& scratch_pool(Communicator& comm);

// A desync found outside a Call (coll/shm_context.h sees every rank's call in shared memory):
// records it in the store as a Call records one, so the ranks that learn of it second-hand name
// the same culprit, and sends `mine` on the fingerprint stream to rank+1, so a neighbour waiting
// in a message-path Call compares it and fails at once. Returns the message to throw. Best
// effort: a failing store or transport does not hide the desync.
std::string report_desync(Communicator& comm, const Fingerprint& mine, int other, const Fingerprint& theirs);

// The segment size in bytes an option struct asks for (0 = the communicator's configuration).
size_t resolve_segment_bytes(const CollConfig& config, const CollOptions& opts);
// Whether fingerprints are exchanged (opts.check and the configuration's check).
bool fingerprint_enabled(const CollConfig& config, const CollOptions& opts);

}  // namespace dtrain

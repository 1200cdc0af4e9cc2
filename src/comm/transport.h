// comm/transport.h — point-to-point messages between the ranks of a group.
//
// Contract
// - A Transport connects `size` ranks (one Connection per peer pair: a socket for tcp, a pair
//   of shared-memory rings for shm) and is created collectively: every rank calls
//   Transport::create with the same store namespace.
// - isend(peer, tag, data, n) / irecv(peer, tag, data, n) return a Request at once; the buffer
//   must stay valid and untouched until the Request completes. send/recv block (with the
//   transport's timeout). Messages between a pair with the same tag arrive in the order they
//   were sent; different tags may be received in any order (early messages are buffered;
//   over tcp a large one stays in the kernel's buffers, holding back the stream behind it,
//   until its receive is posted, a wait needs what is behind it, or this rank would block in
//   a wait, so that it lands in the receive's buffer without an early copy).
//   Sending to oneself works. Tag kLeaveTag (2^62 + 1) is the transport's own.
// - Receive from any source: irecv(kAnySource, tag, ...) takes the next message with `tag` from
//   whichever rank (this one included) it comes: one already buffered (the earliest to have
//   arrived across peers) or, else, the first to arrive after it was posted. A message goes to
//   the receive, specific or any-source, that was posted first among those matching it.
//   Request::source() then says which rank sent it (-1 until the receive completed). A
//   pending any-source receive watches every peer: a peer that fails while it waits (or had
//   failed before it was posted) fails it with that peer's PeerFailure — the message might
//   have been its — and a timeout says no rank sent a message with the tag. A peer that left
//   cleanly (closed its transport, which tells its peers so when its streams are idle) sends
//   nothing more and does not fail any-source receives; receives naming it still fail.
//   probe(tag) tells without blocking which rank has a message with `tag` buffered (and its
//   size), after one progress pass; the next irecv from that rank (or any-source) takes it
//   unless another thread gets there first.
// - A receive whose buffer size differs from the message's fails with InvalidArgument naming
//   both sizes. A peer that dies, closes, or breaks the link makes every pending and future
//   operation with it fail with PeerFailure naming the peer. A wait that runs out throws
//   Timeout naming the operation and peer; an operation that had not started is cancelled,
//   one that had started breaks the link (its state is undefined after that).
// - Progress is made by whoever waits: wait() drives every pending operation of the
//   transport (sends and receives to all peers), so paired isend/irecv never deadlock. It spins
//   briefly, then sleeps (futex for shm, poll for tcp), so more ranks than cores do not collapse.
// Thread-safety: all methods may be called from several threads; operations are serialised
// on one internal lock, waits sleep without it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/buffer_pool.h"
#include "base/clock.h"
#include "comm/fabric.h"

namespace dtrain {

enum class TransportKind { kAuto, kShm, kTcp };
TransportKind parse_transport_kind(const std::string& name);  // "auto" | "shm" | "tcp"
const char* transport_kind_name(TransportKind k);

// Filled from the settings by the world (comm/world.cc); the defaults are those of an unset
// environment (base/settings.cc has the table).
struct TransportOptions {
  TransportKind kind = TransportKind::kAuto;
  double timeout_s = 300;  // default for blocking calls (DTRAIN_TIMEOUT); kForever = no bound
  FabricOptions fabric;
  // Spin this long before sleeping; -1 = choose from ranks-per-core (short when oversubscribed).
  double spin_us = -1;
  // When ranks outnumber cores: yield this long before sleeping (DTRAIN_YIELD_US).
  double yield_us = 100;
  // Ranks of the job on this host (LOCAL_WORLD_SIZE); 0 = the group's size.
  int ranks_on_host = 0;
  // Host identity compared by kAuto (DTRAIN_HOST_ID); "" = host name + boot id.
  std::string host_id;
  // When set, wraps the fabric create() made (for fault injection in tests: a decorator that
  // delays, drops or cuts the byte streams, tests/support/faulty_fabric.h). Split
  // communicators inherit it.
  std::function<std::unique_ptr<Fabric>(std::unique_ptr<Fabric>)> decorate_fabric;
};

class Transport;
namespace detail {
struct Op;
}

class Request {
 public:
  Request() = default;
  // Blocks until complete (kDefaultTimeout: the transport's; kForever: no bound). Re-throws
  // the operation's error.
  void wait(double timeout_s = kDefaultTimeout);
  // Makes progress once without blocking; true when complete (errors re-thrown by wait()).
  bool test();
  bool valid() const { return op_ != nullptr; }
  // The rank the message came from, once a receive completed (any-source or not); -1 before,
  // after a failure before matching, and for sends.
  int source() const;

 private:
  friend class Transport;
  Request(Transport* t, std::shared_ptr<detail::Op> op) : t_(t), op_(std::move(op)) {}
  Transport* t_ = nullptr;
  std::shared_ptr<detail::Op> op_;
};

// The peer argument of irecv / recv that matches a message from any rank.
inline constexpr int kAnySource = -1;

struct ProbeResult {
  int source = -1;   // -1: no message with the tag is buffered
  size_t bytes = 0;  // its payload size
  bool found() const { return source >= 0; }
};

class Transport {
 public:
  // Collective over the ranks sharing `store`. kAuto picks shm when every rank reports the
  // same host id (opts.host_id, else hostname + boot id), tcp otherwise.
  static std::unique_ptr<Transport> create(Store& store, int rank, int size, const TransportOptions& opts);
  Transport(int rank, int size, std::unique_ptr<Fabric> fabric, const TransportOptions& opts);
  ~Transport();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const char* kind() const { return fabric_->kind(); }
  double timeout() const { return opts_.timeout_s; }
  // The job's ranks on this host (TransportOptions::ranks_on_host), else this group's size:
  // a group of 2 inside an 8-rank job on 2 cores still shares the cores with 6 others. (A
  // group spanning hosts may be larger than it.)
  int ranks_on_host() const { return opts_.ranks_on_host > 0 ? opts_.ranks_on_host : size_; }

  // defer = true queues the message without writing it: it leaves with the next send to that
  // peer (in the same write, one system call on tcp, when both are small) or at the next
  // progress pass of any wait or test. For a record that precedes a call's first message
  // (a collective's fingerprint).
  Request isend(int peer, uint64_t tag, const void* data, size_t bytes, bool defer = false);
  Request irecv(int peer, uint64_t tag, void* data, size_t bytes);
  void send(int peer, uint64_t tag, const void* data, size_t bytes) { isend(peer, tag, data, bytes).wait(); }
  // Returns the rank the message came from (peer itself unless peer == kAnySource).
  int recv(int peer, uint64_t tag, void* data, size_t bytes) {
    Request r = irecv(peer, tag, data, bytes);
    r.wait();
    return r.source();
  }
  ProbeResult probe(uint64_t tag);
  // Waits for all; re-throws the first error after every request has finished or failed.
  static void wait_all(std::span<Request> requests, double timeout_s = kDefaultTimeout);

  // Leaves the group: pending operations fail here and on the peers. Idempotent.
  void close();

  // Why `peer` is gone, or "" while a quick check finds it alive: this transport already
  // failed it, or the fabric says so (closed its transport, its process exited). For waiters
  // that synchronise outside the transport (coll/shm_context.h) and poll a peer's liveness.
  std::string peer_gone(int peer);

  // Total bytes this rank sent / received (payload only), for benchmarks and traces.
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }
  // Payload bytes from peers that arrived before their receive was posted and went through
  // an early buffer (messages to oneself not counted).
  uint64_t bytes_buffered_early() const { return bytes_early_.load(std::memory_order_relaxed); }

 private:
  friend class Request;
  struct Peer;
  struct Unexpected;

  void wait(detail::Op& op, double timeout_s);
  // One pass over every peer: send what fits, read what arrived. eager: read past deferred
  // payloads into early buffers (transport.cc); `waiting`, a receive, does so for its peer
  // while it is incomplete.
  void progress_locked(const detail::Op* waiting, bool eager);
  void progress_send_locked(int peer);
  bool write_batch_locked(Peer& p);
  void progress_recv_locked(int peer, const detail::Op* waiting, bool eager_all);
  void take_unexpected_locked(int peer, std::shared_ptr<detail::Op> op,
                              std::deque<std::shared_ptr<Unexpected>>::iterator u);
  std::shared_ptr<detail::Op> match_posted_locked(int peer, uint64_t tag);
  Request irecv_any(uint64_t tag, void* data, size_t bytes);
  void fail_any_locked(int peer, std::exception_ptr error);
  void deliver_header_locked(int peer, bool eager);
  void buffer_early_locked(Unexpected& u);
  void fail_peer_locked(int peer, std::exception_ptr error);
  void check_liveness_locked();
  void on_timeout_locked(detail::Op& op, double timeout_s);
  std::string describe(const detail::Op& op) const;

  int rank_, size_;
  std::unique_ptr<Fabric> fabric_;
  TransportOptions opts_;
  double spin_s_, yield_s_ = 0;
  bool defer_early_ = false;  // the fabric holds early payloads unread (Fabric::holds_early_payloads)
  std::mutex mu_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::string gone_peers_locked() const;
  // Any-source receives not yet matched, in posting order; posted_ numbers every receive
  // posted and arrivals_ every message buffered, to match in order across peers.
  std::deque<std::shared_ptr<detail::Op>> any_posted_;
  uint64_t posted_ = 0, arrivals_ = 0;
  bool closed_ = false;
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, bytes_early_{0};
  // Early messages are common in pipelined collectives (the peer's next phase starts before
  // this rank posts its receives); their buffers come from here, up to 64 MiB kept warm.
  BufferPool early_buffers_{size_t{64} << 20};
};

}  // namespace dtrain

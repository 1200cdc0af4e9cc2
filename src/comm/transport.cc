#include "comm/transport.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/copy.h"
#include "base/error.h"
#include "base/log.h"
#include "comm/heartbeat.h"
#include "comm/store.h"
#include "comm/transport_internal.h"

namespace dtrain {

// The message engine.
//
// Every message on a peer's byte stream is a 16-byte header {tag, size} followed by `size`
// payload bytes; over a fabric with a payload alignment (tcp), a large payload comes after
// 0-63 bytes of padding, counted in the size word's top byte (see kPadShift). Sends to a peer go out strictly in the order they were issued (a FIFO per
// peer); a small message is staged with its header so it leaves in one write. On the
// receiving side a header is matched against the receives posted for (peer, tag) in order;
// with none posted, the payload is buffered as an "unexpected" message that a later irecv
// takes (the oldest of its tag first). A receive posted while its unexpected message is still arriving takes over the
// stream: the bytes so far are copied once and the rest land directly in the user's buffer.
//
// Over a fabric that holds unread bytes in buffers of its own (tcp: the kernel's socket
// buffers; Fabric::holds_early_payloads), a large unexpected payload (kDeferBytes and up) is
// not read at once: its header is queued like any unexpected message, with no buffer, and
// the peer's stream stops there ("deferred"). A receive posted for it then takes over the
// stream with nothing copied, so the message never occupies an early buffer. The bytes are
// read into an early buffer as before by any pass that must get past them: one waiting on a
// receive from that peer (any peer, for an any-source receive) that is still incomplete when
// the header comes, since its own message may lie behind; a pass of a wait that is about to
// sleep, since a rank that blocks might be what its peers' sends wait for, and of a test() (a
// loop of them never sleeps), each until what it waits for completes; and a probe that
// misses, past the payloads deferred before it (its message may be behind them). So a
// pattern that completed with eager reading still does (it reads eagerly once it would
// block). What it removes is the common early copy: a pass that completes the awaited
// receive used to read on into the peer's next message, which the rank had not asked for
// yet (its next collective call). Over loopback tcp ddp's 2-rank heap read 3.88-3.93 MB in
// 5 of 5 runs this way and 3.91-4.84 with every payload read at once (4 of 5 runs 4.37-4.40
// the same hour, 2026-12-04): rank 1 had buffered nearly every one of rank 0's 0.47 MB
// chunks, about 500 a run, so its peak held one or two of them. The step time did not move
// (0.55-0.61 against 0.58-0.62 ms), nor did tcp all-reduce, all-gather and broadcast at 2
// and 4 ranks beyond their spread.
//
// A receive from any source waits in a transport-wide queue (any_posted_) instead of a peer's.
// Every posted receive gets a number (posted_) and every buffered message one (arrivals_): an
// arriving header goes to the earlier-posted of the peer's first matching receive and the
// first matching any-source receive, and an any-source receive posted when messages of its
// tag are already buffered takes the one that arrived first. Either way it learns its peer
// then, and from there on it is an ordinary receive from that peer. Until it has matched it
// depends on every peer, so it is failed by any peer's failure and keeps all peers watched.
//
// The waiting side (the wait loop, liveness, timeouts, a peer's failure) is in
// comm/transport_wait.cc; the pieces both files share, in comm/transport_internal.h.

using namespace detail;  // the engine's Op, constants and helpers (comm/transport_internal.h)

TransportKind parse_transport_kind(const std::string& name) {
  if (name == "auto") return TransportKind::kAuto;
  if (name == "shm") return TransportKind::kShm;
  if (name == "tcp") return TransportKind::kTcp;
  DT_THROW(InvalidArgument, "unknown transport '" << name << "' (use auto, shm or tcp)");
}

const char* transport_kind_name(TransportKind k) {
  switch (k) {
    case TransportKind::kAuto: return "auto";
    case TransportKind::kShm: return "shm";
    case TransportKind::kTcp: return "tcp";
  }
  return "?";
}

namespace {
std::string host_id(const TransportOptions& opts) {
  if (!opts.host_id.empty()) return opts.host_id;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  return std::string(host) + "/" + id;
}
}  // namespace

std::unique_ptr<Transport> Transport::create(Store& store, int rank, int size, const TransportOptions& opts) {
  DT_CHECK(size >= 1 && rank >= 0 && rank < size, InvalidArgument,
           "transport: rank " << rank << " is outside a group of size " << size);
  TransportKind kind = opts.kind;
  if (kind == TransportKind::kAuto) {
    store.set("host/" + std::to_string(rank), host_id(opts));
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("host/" + std::to_string(r));
    store.wait(keys, opts.fabric.connect_timeout_s);
    std::string mine = store.get("host/0");
    kind = TransportKind::kShm;
    for (int r = 1; r < size; ++r)
      if (store.get("host/" + std::to_string(r)) != mine) kind = TransportKind::kTcp;
  }
  std::unique_ptr<Fabric> fabric = kind == TransportKind::kShm ? make_shm_fabric(store, rank, size, opts.fabric)
                                                               : make_tcp_fabric(store, rank, size, opts.fabric);
  if (opts.decorate_fabric) fabric = opts.decorate_fabric(std::move(fabric));
  return std::make_unique<Transport>(rank, size, std::move(fabric), opts);
}

Transport::Transport(int rank, int size, std::unique_ptr<Fabric> fabric, const TransportOptions& opts)
    : rank_(rank), size_(size), fabric_(std::move(fabric)), opts_(opts) {
  for (int p = 0; p < size; ++p) {
    peers_.push_back(std::make_unique<Peer>());
    if (p != rank) peers_.back()->channel = fabric_->channel(p);
  }
  // Spinning pays only while the peer is running on another core. When ranks fit the cores,
  // spin 50 us: on a VM a sleeping waiter costs a wake-up through the hypervisor, and at
  // 10 us a tcp round trip (~5 us plus the peer's work) often missed the window (8-byte
  // all-reduce over tcp: 8-9 us at 10, 5 us at 50; ddp training no slower). When ranks
  // outnumber cores (the launcher exports LOCAL_WORLD_SIZE), spin only briefly.
  // Then they yield for up to 100 us before sleeping: the core goes to another runnable rank
  // of the job (often the one waited for) without a wake-up through the hypervisor. The
  // budget is wall time, so on a machine busy with other processes, where one yield can
  // cost a whole time slice, the first yield exhausts it and the rank sleeps.
  const bool oversubscribed = (opts.ranks_on_host > 0 ? opts.ranks_on_host : size) > online_cpus();
  double spin_us = opts.spin_us;
  if (spin_us < 0) spin_us = oversubscribed ? 2 : 50;
  spin_s_ = spin_us * 1e-6;
  yield_s_ = oversubscribed ? opts.yield_us * 1e-6 : 0.0;
  defer_early_ = fabric_->holds_early_payloads();
}

Transport::~Transport() {
  try {
    close();
  } catch (...) {
  }
}

void Transport::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  // Tell each peer this rank leaves on purpose (so its any-source receives need not fail),
  // where the stream is between messages; best effort, without blocking.
  for (int p = 0; p < size_; ++p) {
    Peer& peer = *peers_[p];
    if (p == rank_ || peer.error || (!peer.sends.empty() && peer.sends.front()->started)) continue;
    char header[kHeader] = {};
    std::memcpy(header, &kLeaveTag, 8);
    try {
      size_t k = peer.channel->write_some(header, kHeader);
      for (int tries = 0; tries < 3 && k > 0 && k < kHeader; ++tries) k += peer.channel->write_some(header + k, kHeader - k);
    } catch (...) {
    }
  }
  fabric_->close();
  for (int p = 0; p < size_; ++p) {
    auto err = std::make_exception_ptr(
        PeerFailure("rank " + std::to_string(rank_) + ": transport closed locally", p));
    fail_peer_locked(p, err);
  }
}

std::string Transport::describe(const Op& op) const {
  std::ostringstream os;
  os << "rank " << rank_;
  if (op.peer == kAnySource) os << " <- any rank: ";
  else os << (op.kind == Op::kSend ? " -> rank " : " <- rank ") << op.peer << ": ";
  os
     << (op.kind == Op::kSend ? "send" : "recv") << " (tag " << op.tag << ", " << op.bytes << " bytes)";
  return os.str();
}

Request Transport::isend(int peer, uint64_t tag, const void* data, size_t bytes, bool defer) {
  DT_CHECK(peer >= 0 && peer < size_, InvalidArgument,
           "rank " << rank_ << ": send to rank " << peer << " outside a group of size " << size_);
  auto op = std::make_shared<Op>();
  op->kind = Op::kSend;
  op->peer = peer;
  op->tag = tag;
  op->data = const_cast<char*>(static_cast<const char*>(data));
  op->bytes = bytes;
  std::lock_guard<std::mutex> lock(mu_);
  Peer& p = *peers_[peer];
  if (p.error) {
    complete_op(*op, p.error);
    return Request(this, op);
  }
  if (peer == rank_) {  // to oneself: hand over in memory
    if (auto r = match_posted_locked(peer, tag)) {
      if (r->bytes != bytes) {
        complete_op(*r, std::make_exception_ptr(InvalidArgument(
                            describe(*r) + ": message has " + std::to_string(bytes) + " bytes, buffer has " +
                            std::to_string(r->bytes))));
      } else {
        copy_memory(r->data, data, bytes);
        complete_op(*r);
      }
    } else {
      auto u = std::make_shared<Unexpected>();
      u->tag = tag;
      u->arrival = ++arrivals_;
      u->buf = early_buffers_.take(bytes);
      u->size = bytes;
      copy_memory(u->data(), data, bytes);
      u->got = bytes;
      p.unexpected.push_back(u);
    }
    complete_op(*op);
    return Request(this, op);
  }
  DT_CHECK(bytes <= kSizeMask, InvalidArgument, describe(*op) << ": " << bytes << " bytes is more than one message carries");
  const size_t align = fabric_->payload_alignment();
  const size_t pad = bytes > kStageLimit && align > 0
                         ? (reinterpret_cast<uintptr_t>(data) - kHeader) % align
                         : 0;
  char header[kHeader];
  uint64_t size64 = bytes | (uint64_t{pad} << kPadShift);
  std::memcpy(header, &tag, 8);
  std::memcpy(header + 8, &size64, 8);
  if (kHeader + bytes <= Op::kInline) {
    std::memcpy(op->inline_stage, header, kHeader);
    if (bytes) std::memcpy(op->inline_stage + kHeader, data, bytes);
    op->staged = op->inline_stage;
    op->staged_size = kHeader + bytes;
    op->done = bytes;
  } else if (bytes <= kStageLimit) {
    op->big_stage.assign(header, kHeader);
    op->big_stage.append(static_cast<const char*>(data), bytes);
    op->staged = op->big_stage.data();
    op->staged_size = op->big_stage.size();
    op->done = bytes;
  } else {
    std::memcpy(op->inline_stage, header, kHeader);
    std::memset(op->inline_stage + kHeader, 0, pad);
    op->staged = op->inline_stage;
    op->staged_size = kHeader + pad;
  }
  p.sends.push_back(op);
  if (!defer) progress_send_locked(peer);  // small messages usually leave right here
  return Request(this, op);
}

Request Transport::irecv(int peer, uint64_t tag, void* data, size_t bytes) {
  if (peer == kAnySource) return irecv_any(tag, data, bytes);
  DT_CHECK(peer >= 0 && peer < size_, InvalidArgument,
           "rank " << rank_ << ": recv from rank " << peer << " outside a group of size " << size_);
  auto op = std::make_shared<Op>();
  op->kind = Op::kRecv;
  op->peer = peer;
  op->tag = tag;
  op->data = static_cast<char*>(data);
  op->bytes = bytes;
  std::lock_guard<std::mutex> lock(mu_);
  Peer& p = *peers_[peer];
  auto uq = find_tag(p.unexpected, tag);
  if (uq != p.unexpected.end()) {
    take_unexpected_locked(peer, op, uq);  // the oldest unexpected message of this tag is ours
    return Request(this, op);
  }
  if (p.error) {
    complete_op(*op, p.error);
    return Request(this, op);
  }
  op->order = ++posted_;
  p.posted.push_back(op);
  return Request(this, op);
}

Request Transport::irecv_any(uint64_t tag, void* data, size_t bytes) {
  auto op = std::make_shared<Op>();
  op->kind = Op::kRecv;
  op->peer = kAnySource;
  op->tag = tag;
  op->data = static_cast<char*>(data);
  op->bytes = bytes;
  std::lock_guard<std::mutex> lock(mu_);
  // A message of this tag already buffered: the earliest to have arrived, from any peer.
  int best = -1;
  std::deque<std::shared_ptr<Unexpected>>::iterator best_it;
  for (int peer = 0; peer < size_; ++peer) {
    auto& q = peers_[peer]->unexpected;
    auto it = find_tag(q, tag);
    if (it != q.end() && (best < 0 || (*it)->arrival < (*best_it)->arrival)) {
      best = peer;
      best_it = it;
    }
  }
  if (best >= 0) {
    op->peer = best;
    take_unexpected_locked(best, op, best_it);
    return Request(this, op);
  }
  // None yet: a failed peer might have been the sender (one that left said it would not be).
  for (int peer = 0; peer < size_; ++peer) {
    if (!peers_[peer]->error || (peers_[peer]->left && !closed_)) continue;
    any_posted_.push_back(op);
    fail_any_locked(peer, peers_[peer]->error);
    return Request(this, op);
  }
  op->order = ++posted_;
  any_posted_.push_back(op);
  return Request(this, op);
}

// Hands the buffered message *u of `peer` to the receive op (whose peer is set).
void Transport::take_unexpected_locked(int peer, std::shared_ptr<Op> op,
                                       std::deque<std::shared_ptr<Unexpected>>::iterator uq) {
  Peer& p = *peers_[peer];
  auto u = *uq;
  p.unexpected.erase(uq);
  if (u->size != op->bytes) {
    // If still arriving, it drains into u and is dropped (a deferred one straight away).
    if (p.buffer == u && u->deferred) p.buffer.reset();
    complete_op(*op, std::make_exception_ptr(InvalidArgument(
                         describe(*op) + ": the message has " + std::to_string(u->size) +
                         " bytes but the receive buffer has " + std::to_string(op->bytes) +
                         " (buffer sizes differ across ranks)")));
  } else if (u->complete()) {
    if (op->bytes) std::memcpy(op->data, u->data(), op->bytes);
    early_buffers_.give(std::move(u->buf));
    complete_op(*op);
  } else if (p.buffer == u) {
    // Still arriving: copy what came so far and let the rest land in the user's buffer.
    if (u->got) std::memcpy(op->data, u->data(), u->got);
    op->done = u->got;
    op->started = true;
    p.target = op;
    p.buffer.reset();
    early_buffers_.give(std::move(u->buf));
  } else {
    // Only the message being read can be incomplete; any other was cut off by a failure.
    complete_op(*op, p.error ? p.error
                             : std::make_exception_ptr(PeerFailure(describe(*op) + ": message cut off", peer)));
  }
}

// The receive an arriving message (peer, tag) goes to, taken off its queue with its peer set:
// the earlier posted of the peer's first receive of the tag and the first any-source one.
std::shared_ptr<Op> Transport::match_posted_locked(int peer, uint64_t tag) {
  Peer& p = *peers_[peer];
  auto q = find_tag(p.posted, tag);
  auto a = any_posted_.empty() ? any_posted_.end() : find_tag(any_posted_, tag);
  std::shared_ptr<Op> op;
  if (q != p.posted.end() && (a == any_posted_.end() || (*q)->order < (*a)->order)) {
    op = *q;
    p.posted.erase(q);
  } else if (a != any_posted_.end()) {
    op = *a;
    any_posted_.erase(a);
    op->peer = peer;
  }
  return op;
}

// Fails every unmatched any-source receive: `peer` failed (error) and might have been the sender.
void Transport::fail_any_locked(int peer, std::exception_ptr error) {
  for (auto& op : any_posted_) {
    std::exception_ptr e = error;
    try {
      if (!closed_) std::rethrow_exception(error);  // closed here: the error says so
    } catch (const PeerFailure& f) {
      e = std::make_exception_ptr(PeerFailure(describe(*op) + ": rank " + std::to_string(peer) +
                                                  " failed before a message with this tag came: " + f.what(),
                                              peer));
    } catch (...) {
    }
    complete_op(*op, e);
  }
  any_posted_.clear();
}

ProbeResult Transport::probe(uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  auto find = [&] {
    ProbeResult r;
    uint64_t first = 0;
    for (int peer = 0; peer < size_; ++peer) {
      auto& q = peers_[peer]->unexpected;
      auto it = find_tag(q, tag);
      if (it != q.end() && (r.source < 0 || (*it)->arrival < first)) {
        r.source = peer;
        r.bytes = (*it)->size;
        first = (*it)->arrival;
      }
    }
    return r;
  };
  // A deferred payload is found by its header; one probed for that is not there may be
  // behind another's, so a miss reads past the payloads deferred so far (those that come in
  // its pass may wait in turn: a loop of probes moves on by at least one each time).
  progress_locked(nullptr, /*eager=*/false);
  ProbeResult r = find();
  if (!r.found()) {
    for (int peer = 0; peer < size_; ++peer) {
      Peer& p = *peers_[peer];
      if (peer == rank_ || !p.buffer || !p.buffer->deferred) continue;
      buffer_early_locked(*p.buffer);
    }
    progress_locked(nullptr, /*eager=*/false);
    r = find();
  }
  return r;
}

// Several small messages at the head of a peer's queue (each fully staged: header and
// payload in its stage buffer) leave in one write: their staged bytes are gathered into one
// buffer, and a short write is credited to them in order. Returns false when fewer than two
// such messages are queued (the caller sends one at a time) or nothing could be written.
bool Transport::write_batch_locked(Peer& p) {
  constexpr size_t kBatch = 4096;
  char batch[kBatch];
  size_t total = 0, count = 0;
  for (const auto& o : p.sends) {
    if (o->done < o->bytes) break;  // a large message's payload is written from the user's buffer
    size_t left = o->staged_size - o->staged_done;
    if (total + left > kBatch) break;
    std::memcpy(batch + total, o->staged + o->staged_done, left);
    total += left;
    ++count;
  }
  if (count < 2) return false;
  size_t k = p.channel->write_some(batch, total);
  if (k == 0) return false;
  while (k > 0) {
    Op& op = *p.sends.front();
    op.started = true;
    size_t take = std::min(k, op.staged_size - op.staged_done);
    op.staged_done += take;
    k -= take;
    if (op.staged_done < op.staged_size) break;
    bytes_sent_.fetch_add(op.bytes, std::memory_order_relaxed);
    auto done = p.sends.front();
    p.sends.pop_front();
    complete_op(*done);
  }
  return true;
}

void Transport::progress_send_locked(int peer) {
  Peer& p = *peers_[peer];
  while (!p.sends.empty()) {
    if (p.sends.size() > 1 && write_batch_locked(p)) continue;
    Op& op = *p.sends.front();
    if (op.staged_done < op.staged_size) {
      size_t k = p.channel->write_some(op.staged + op.staged_done, op.staged_size - op.staged_done);
      if (k) op.started = true;
      op.staged_done += k;
      if (op.staged_done < op.staged_size) return;
    }
    while (op.done < op.bytes) {
      size_t k = p.channel->write_some(op.data + op.done, op.bytes - op.done);
      if (k == 0) return;
      op.done += k;
    }
    bytes_sent_.fetch_add(op.bytes, std::memory_order_relaxed);
    auto done = p.sends.front();
    p.sends.pop_front();
    complete_op(*done);
  }
}

void Transport::deliver_header_locked(int peer, bool eager) {
  Peer& p = *peers_[peer];
  uint64_t tag, size64;
  std::memcpy(&tag, p.header, 8);
  std::memcpy(&size64, p.header + 8, 8);
  p.pad_left = size64 >> kPadShift;
  size64 &= kSizeMask;
  p.in_message = true;
  p.msg_size = size64;
  p.msg_got = 0;
  p.target.reset();
  p.buffer.reset();
  if (tag == kLeaveTag) {  // no payload, nothing to match
    p.left = true;
    p.msg_size = 0;
    return;
  }
  if (auto op = match_posted_locked(peer, tag)) {
    if (op->bytes != size64) {
      complete_op(*op, std::make_exception_ptr(InvalidArgument(
                           describe(*op) + ": the message has " + std::to_string(size64) +
                           " bytes but the receive buffer has " + std::to_string(op->bytes) +
                           " (buffer sizes differ across ranks)")));
      // The payload is read and dropped below (no target, no buffer).
    } else {
      op->started = true;
      p.target = op;
    }
  } else {
    auto u = std::make_shared<Unexpected>();
    u->tag = tag;
    u->arrival = ++arrivals_;
    u->size = size64;
    u->deferred = true;
    if (eager || !defer_early_ || size64 < kDeferBytes) buffer_early_locked(*u);
    p.buffer = u;
    p.unexpected.push_back(u);
  }
}

// An unexpected message's payload gets its early buffer (counted in bytes_buffered_early),
// at its header or, deferred until then, when a pass must read past it.
void Transport::buffer_early_locked(Unexpected& u) {
  u.buf = early_buffers_.take(u.size);
  u.deferred = false;
  bytes_early_.fetch_add(u.size, std::memory_order_relaxed);
}

void Transport::progress_recv_locked(int peer, const Op* waiting, bool eager_all) {
  Peer& p = *peers_[peer];
  char discard[4096];
  // Read past a deferred payload? While the operation waited on is incomplete: when told to
  // (a wait about to sleep, a test), or for a receive from this peer (or any peer), whose
  // message may be behind. Asked per message, so a pass that completed what it waited for
  // leaves the next early payload where it is. (No operation: when told to.)
  auto eager = [&] {
    if (waiting && waiting->complete.load(std::memory_order_acquire)) return false;
    return eager_all || (waiting && waiting->kind == Op::kRecv && (waiting->peer == peer || waiting->peer == kAnySource));
  };
  for (;;) {
    if (!p.in_message) {
      size_t k = p.channel->read_some(p.header + p.header_got, kHeader - p.header_got);
      p.header_got += k;
      if (p.header_got < kHeader) return;
      p.header_got = 0;
      deliver_header_locked(peer, eager());
    }
    if (p.buffer && p.buffer->deferred) {
      if (!eager()) return;  // the stream waits here for its receive, or for a pass that must pass it
      buffer_early_locked(*p.buffer);
    }
    while (p.pad_left > 0) {
      const size_t k = p.channel->read_some(discard, p.pad_left);
      if (k == 0) return;
      p.pad_left -= k;
    }
    while (p.msg_got < p.msg_size) {
      size_t want = p.msg_size - p.msg_got;
      size_t k;
      if (p.target) {
        k = p.channel->read_some(p.target->data + p.target->done, want);
        p.target->done += k;
      } else if (p.buffer) {
        k = p.channel->read_some(p.buffer->data() + p.buffer->got, want);
        p.buffer->got += k;
      } else {
        k = p.channel->read_some(discard, std::min(want, sizeof discard));
      }
      if (k == 0) return;
      p.msg_got += k;
    }
    bytes_received_.fetch_add(p.msg_size, std::memory_order_relaxed);
    p.in_message = false;
    if (p.target) complete_op(*p.target);
    p.target.reset();
    p.buffer.reset();
  }
}

void Transport::progress_locked(const Op* waiting, bool eager) {
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = *peers_[peer];
    if (peer == rank_ || p.error) continue;
    try {
      progress_send_locked(peer);
      progress_recv_locked(peer, waiting, eager);
    } catch (const PeerFailure&) {
      fail_peer_locked(peer, std::current_exception());
    }
  }
}

}  // namespace dtrain

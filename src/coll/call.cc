#include "coll/call.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <chrono>
#include <sstream>
#include <thread>

#include "base/buffer_pool.h"
#include "base/error.h"
#include "coll/reduce_kernels.h"
#include "coll/shm_context.h"

namespace dtrain {
namespace {

// The fingerprint stream: one fixed tag outside any sequence number a run will reach, so a
// rank that skipped or repeated a collective is caught by the sequence field, not by a hang.
constexpr uint64_t kFingerprintSeq = (uint64_t{1} << 39) - 1;
constexpr uint32_t kFingerprintStep = 0xfffff0;
constexpr uint32_t kChecked = 1;  // Fingerprint::reserved bit: the sender compares fingerprints

std::string rank_name(Communicator& c, int r) {
  std::ostringstream os;
  os << "rank " << r;
  if (c.world_rank(r) != r) os << " (world rank " << c.world_rank(r) << ")";
  return os.str();
}

// "allreduce(float32 x 1000, sum, ring) as collective #3": what a rank called.
std::string call_text(const Fingerprint& f) { return f.describe() + " as collective #" + std::to_string(f.seq); }

// " (on host hB; this rank is on hA: ...)" naming the other hosts that ranks which never
// arrived live on (the host ids the auto transport published: this communicator's, else,
// for a group split off one whose transport was told tcp, the world's under the world
// ranks); "" when none is elsewhere.
std::string hosts_of(Communicator& c, const std::vector<int>& ranks, int me) {
  try {
    auto host_in = [](Store& store, int r) {
      const std::string key = "transport/host/" + std::to_string(r);
      return store.check({key}) ? store.get(key, 1) : std::string();
    };
    const bool own = !host_in(c.store(), me).empty();
    auto host = [&](int r) { return own ? host_in(c.store(), r) : host_in(c.world_store(), c.world_rank(r)); };
    const std::string mine = host(me);
    std::vector<std::string> theirs;
    for (int r : ranks) {
      std::string h = host(r);
      if (h.empty() || mine.empty()) return "";
      if (h != mine && std::find(theirs.begin(), theirs.end(), h) == theirs.end()) theirs.push_back(h);
    }
    if (theirs.empty()) return "";
    std::ostringstream os;
    os << " (on host";
    for (size_t i = 0; i < theirs.size(); ++i) os << (i ? ", " : " ") << theirs[i];
    os << "; this rank is on " << mine << ": is that host, or the network to it, down?)";
    return os.str();
  } catch (...) {
    return "";
  }
}

}  // namespace

std::string Fingerprint::describe() const {
  std::ostringstream os;
  os << coll_op_name(static_cast<CollOp>(op)) << (root == kApplyRoot ? "+apply" : "") << "(" << dtype_name(static_cast<DType>(dtype)) << " x " << count;
  auto cop = static_cast<CollOp>(op);
  if (cop == CollOp::kAllreduce || cop == CollOp::kReduce || cop == CollOp::kReduceScatter)
    os << ", " << reduce_op_name(static_cast<ReduceOp>(redop));
  if (root >= 0) os << ", root " << root;
  os << ", " << algorithm_name(static_cast<Algorithm>(algorithm)) << ")";
  return os.str();
}

std::string report_desync(Communicator& comm, const Fingerprint& mine, int other, const Fingerprint& theirs) {
  const int me = comm.rank();
  std::ostringstream m;
  m << rank_name(comm, me) << " called " << call_text(mine) << " but " << rank_name(comm, other) << " called "
    << call_text(theirs);
  const std::string key = "coll/desync/" + std::to_string(mine.seq) + "/" + std::to_string(me);
  try {
    Store& store = comm.store();
    store.set(key, std::to_string(other) + "|" + call_text(theirs) + "|" + call_text(mine));
    store.set("coll/dead/" + std::to_string(mine.seq), std::to_string(me) + "|" + m.str());
  } catch (...) {
  }
  if (comm.size() > 1) {
    try {
      Fingerprint record = mine;
      record.reserved |= kChecked;
      comm.transport()
          .isend((me + 1) % comm.size(), Communicator::collective_tag(kFingerprintSeq, kFingerprintStep), &record,
                 sizeof record)
          .wait(0.2);
    } catch (...) {
    }
  }
  return m.str();
}

size_t resolve_segment_bytes(const CollConfig& config, const CollOptions& opts) {
  return opts.segment_bytes > 0 ? opts.segment_bytes : std::max<size_t>(config.segment_bytes, 1);
}

bool fingerprint_enabled(const CollConfig& config, const CollOptions& opts) { return opts.check && config.check; }

Call::Call(Communicator& comm, CollOp op, const CollOptions& opts, Algorithm algorithm, DType dtype, uint64_t count,
           int root, ReduceOp redop, FingerprintRoute route)
    : comm_(comm),
      op_(op),
      opts_(opts),
      rank_(comm.rank()),
      size_(comm.size()),
      dtype_(dtype),
      elem_(dtype_size(dtype)),
      redop_(redop) {
  seg_elems_ = std::max<size_t>(1, resolve_segment_bytes(comm.coll_config(), opts) / elem_);
  timeout_s_ = resolve_timeout(opts.timeout_s, comm.timeout());
  deadline_ = Deadline::after(timeout_s_);
  fp_.seq = comm.next_sequence();
  peer_fp_.seq = ~uint64_t{0};  // "no record received" until one lands
  fp_.count = count;
  fp_.root = root;
  fp_.op = static_cast<uint8_t>(op);
  fp_.dtype = static_cast<uint8_t>(dtype);
  fp_.redop = static_cast<uint8_t>(redop);
  fp_.algorithm = static_cast<uint8_t>(algorithm);
  // The records travel whether or not this rank checks (a 40-byte message, deferred onto the
  // first message to rank+1), so ranks that differ in the setting stay in step: a rank that
  // alone turned the check off is simply not compared, never a false desync or a wait.
  checking_ = fingerprint_enabled(comm.coll_config(), opts);
  fp_.reserved = checking_ ? kChecked : 0;
  // Ranks waiting in the shared-memory context can see which call this rank is in: the
  // options' context, else the communicator's own (a call on the message path must show in
  // it too, for the peers that wait in a one-phase small call of the same number).
  const bool shared = opts.shm && opts.shm->serves(comm);
  if (shared) opts.shm->publish_call(fp_);
  else if (ShmContext* own = comm.shm_context()) own->publish_call(fp_);
  // The context's phases compare the records themselves: no exchange (and no message round).
  shm_route_ = shared && route == FingerprintRoute::kShmPhases;
  if (size_ > 1 && !shm_route_) {
    uint64_t t = Communicator::collective_tag(kFingerprintSeq, kFingerprintStep);
    Transport& tr = comm.transport();
    try {
      fp_recv_ = tr.irecv((rank_ + size_ - 1) % size_, t, &peer_fp_, sizeof peer_fp_);
      // Deferred: the record leaves with the algorithm's first message to rank+1 (one write
      // for both when that message is small), or at the first wait.
      fp_send_ = tr.isend((rank_ + 1) % size_, t, &fp_, sizeof fp_, /*defer=*/true);
    } catch (...) {
      setup_error_ = std::current_exception();  // reported by run(), with the call's context
    }
  } else {
    fp_checked_ = true;
  }
}

Call::~Call() {
  // On an error path the fingerprint requests may still be pending; a zero wait cancels
  // one that has not started, so the transport never writes into this object afterwards.
  for (Request* r : {&fp_recv_, &fp_send_}) {
    if (!r->valid()) continue;
    try {
      if (!r->test()) r->wait(0);
    } catch (...) {
    }
  }
}

std::string Call::describe() const {
  std::ostringstream os;
  os << coll_op_name(op_) << " #" << fp_.seq << " (" << algorithm_name(static_cast<Algorithm>(fp_.algorithm)) << ", "
     << dtype_name(dtype_) << " x " << fp_.count << ")";
  return os.str();
}

std::string Call::culprit_key(const char* what) const {
  return std::string("coll/") + what + "/" + std::to_string(fp_.seq);
}

void Call::check_fingerprint(bool after_error) {
  if (fp_checked_) return;
  if (!fp_recv_.valid()) {  // never posted: nothing to compare
    fp_checked_ = true;
    return;
  }
  if (after_error) {
    // The neighbour's record is usually here already; give it a moment, not the full timeout.
    double grace = remaining() < 0 ? 0.2 : std::min(0.2, remaining());
    fp_recv_.wait(grace);
  } else {
    wait(fp_recv_);
  }
  fp_checked_ = true;
  const Fingerprint& a = fp_;
  const Fingerprint& b = peer_fp_;
  bool same = a.seq == b.seq && a.count == b.count && a.root == b.root && a.op == b.op && a.dtype == b.dtype &&
              a.redop == b.redop && a.algorithm == b.algorithm;
  if (!same && checking_ && (b.reserved & kChecked)) {
    int prev = (rank_ + size_ - 1) % size_;
    std::ostringstream m;
    m << rank_name(comm_, rank_) << " called " << a.describe() << " as collective #" << a.seq << " but "
      << rank_name(comm_, prev) << " called " << b.describe() << " as collective #" << b.seq;
    try {
      // What both calls were, for the ranks that learn of the failure second-hand (fail()).
      Store& store = comm_.store();
      store.set(culprit_key("desync") + "/" + std::to_string(rank_),
                std::to_string(prev) + "|" + call_text(b) + "|" + call_text(a));
      store.set(culprit_key("dead"), std::to_string(rank_) + "|" + m.str());
    } catch (...) {
    }
    DT_THROW(Desync, m.str());
  }
  if (fp_send_.valid()) wait(fp_send_);
}

void Call::finish() { check_fingerprint(false); }

void Call::fail(std::exception_ptr e) {
  // A mismatched call explains everything that follows; report it first.
  try {
    check_fingerprint(true);
  } catch (const Desync&) {
    throw;
  } catch (...) {
  }
  // A collective of a sub-group this call ran (a hierarchy's step) has already named its
  // ranks and looked in the store: say which call it was part of, and spend no second round
  // of store waits (over a cut link each is a timeout, and together they outlasted a Work's
  // wait, which then said only that it had not finished).
  try {
    std::rethrow_exception(e);
  } catch (const NamedPeerFailure& inner) {
    int dead = inner.peer();  // renumbered from the sub-group's ranks to this communicator's
    for (int r = 0; r < size_; ++r)
      if (comm_.world_rank(r) == inner.world_peer()) dead = r;
    throw NamedPeerFailure(rank_name(comm_, rank_) + ": " + describe() + " failed in a sub-group's step: " + inner.what(),
                           dead, inner.world_peer());
  } catch (const NamedTimeout& inner) {
    // Arrived, for the ranks of this call that look (those whose own wait failed here):
    // where the sub-group's call could still reach the store, so can this one.
    if (inner.store_reachable()) {
      try {
        comm_.store().set(culprit_key("arrived") + "/" + std::to_string(rank_), "1");
      } catch (...) {
      }
    }
    throw NamedTimeout(rank_name(comm_, rank_) + ": " + describe() + " timed out in a sub-group's step: " + inner.what(),
                       inner.store_reachable());
  } catch (...) {
  }
  Store& store = comm_.store();
  try {
    std::rethrow_exception(e);
  } catch (const PeerFailure& pf) {
    int dead = pf.peer();
    std::string reason;
    std::string key = culprit_key("dead");
    try {
      if (store.check({key})) {
        std::string v = store.get(key, 1);
        dead = std::stoi(v.substr(0, v.find('|')));
        if (v.find('|') != std::string::npos) reason = v.substr(v.find('|') + 1);
      } else {
        store.set(key, std::to_string(dead) + "|");
      }
    } catch (...) {
    }
    // A rank that left because it found a mismatched call: the job failed for the mismatch,
    // and the rank to blame is the one whose call differs, not the one that is gone.
    if (!reason.empty()) {
      // The other ranks that found the mismatch may still be writing their reports: give them
      // a moment (bounded) to form a majority before falling back to naming the rank that left.
      std::string verdict = desync_verdict();
      for (int i = 0; i < 20 && verdict.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        verdict = desync_verdict();
      }
      if (!verdict.empty())
        DT_THROW(Desync, rank_name(comm_, rank_) << ": " << describe() << " failed: " << verdict << " ("
                                                  << rank_name(comm_, dead) << " found it and left)");
    }
    std::ostringstream m;
    m << rank_name(comm_, rank_) << ": " << describe() << " failed: " << rank_name(comm_, dead) << " is gone";
    if (dead != pf.peer()) m << " (learned from " << rank_name(comm_, pf.peer()) << ")";
    if (!reason.empty()) m << "; it reported: " << reason;
    m << " [" << pf.what() << "]";
    throw NamedPeerFailure(m.str(), dead, comm_.world_rank(dead));
  } catch (const Timeout& t) {
    // Which ranks ever reached this call? Each rank that times out says so, waits a moment
    // for the others, and names the ones that never arrived.
    // A rank that is stopped (SIGSTOP) or hung inside the call cannot say so itself, but its
    // fingerprint reached rank+1 when it entered: rank+1 vouches for it ("entered").
    std::string base = culprit_key("arrived"), entered = culprit_key("entered");
    std::vector<int> missing, inside;
    bool prev_entered = false;
    bool store_lost = false;
    try {
      prev_entered = fp_recv_.valid() && fp_recv_.test() && peer_fp_.seq == fp_.seq;
      Fingerprint theirs;  // on the shared-memory route, the call rank-1 published says it
      if (shm_route_ && opts_.shm->current_call((rank_ + size_ - 1) % size_, &theirs)) prev_entered = theirs.seq == fp_.seq;
    } catch (...) {
    }
    try {
      if (prev_entered) store.set(entered + "/" + std::to_string((rank_ + size_ - 1) % size_), "1");
      store.set(base + "/" + std::to_string(rank_), "1");
      std::vector<std::string> keys;
      for (int r = 0; r < size_; ++r) keys.push_back(base + "/" + std::to_string(r));
      try {
        store.wait(keys, std::min(2.0, std::max(0.2, 0.1 * timeout_s_)));
      } catch (const Timeout&) {
      }
      for (int r = 0; r < size_; ++r) {
        if (store.check({keys[r]})) continue;
        (store.check({entered + "/" + std::to_string(r)}) ? inside : missing).push_back(r);
      }
    } catch (const IoError&) {
      store_lost = true;
    } catch (const Timeout&) {
      store_lost = true;
    } catch (...) {
    }
    std::ostringstream m;
    m << rank_name(comm_, rank_) << ": " << describe() << " timed out after " << timeout_s_ << " s";
    if (store_lost) {
      // The peers and the job's store fell silent together: the network, not a slow rank.
      m << "; the job's rendezvous store is unreachable from this rank too: a network failure "
           "(a cut link or a host down) between this rank and its peers";
    } else {
      if (!inside.empty()) {
        m << "; inside the call but not responding (stopped or hung?):";
        for (int r : inside) m << " " << rank_name(comm_, r);
        m << hosts_of(comm_, inside, rank_);  // or a network between: say which host
      }
      if (!missing.empty()) {
        m << "; never reached by";
        for (int r : missing) m << " " << rank_name(comm_, r);
        m << hosts_of(comm_, missing, rank_);
      }
    }
    m << " [" << t.what() << "]";
    throw NamedTimeout(m.str(), !store_lost);
  }
}

std::string Call::desync_verdict() {
  // Every rank that found a mismatch published "PREV|PREV's call|its own call". With this
  // rank's own call they say what most ranks called; the others are the culprits.
  std::map<int, std::string> calls{{rank_, call_text(fp_)}};
  Store& store = comm_.store();
  try {
    for (int r = 0; r < size_; ++r) {
      std::string key = culprit_key("desync") + "/" + std::to_string(r);
      if (!store.check({key})) continue;
      std::string v = store.get(key, 1);
      size_t a = v.find('|'), b = v.find('|', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      calls[std::stoi(v.substr(0, a))] = v.substr(a + 1, b - a - 1);
      calls[r] = v.substr(b + 1);
    }
  } catch (...) {
  }
  std::map<std::string, int> votes;
  for (const auto& [r, c] : calls) ++votes[c];
  auto common = std::max_element(votes.begin(), votes.end(), [](auto& x, auto& y) { return x.second < y.second; });
  if (votes.size() < 2 || common->second * 2 <= static_cast<int>(calls.size())) return "";  // no majority
  std::ostringstream m, agreeing;
  m << "collective desync:";
  int n_agree = 0;
  for (const auto& [r, c] : calls) {
    if (c != common->first) m << " " << rank_name(comm_, r) << " called " << c << ";";
    else agreeing << (n_agree++ ? ", " : " ") << r;
  }
  m << " rank" << (n_agree > 1 ? "s" : "") << agreeing.str() << " called " << common->first;
  return m.str();
}

Request Call::post_send(int to, uint32_t t, const void* buf, size_t n) {
  return comm_.transport().isend(to, tag(t), buf, n * elem_);
}
Request Call::post_recv(int from, uint32_t t, void* buf, size_t n) {
  return comm_.transport().irecv(from, tag(t), buf, n * elem_);
}

void Call::wait(Request& r) { r.wait(remaining()); }

void Call::wait_all(std::vector<Request>& rs) { Transport::wait_all(rs, remaining()); }

BufferPool& scratch_pool(Communicator& comm) {
  return *comm.attachment<BufferPool>("coll/scratch_pool",
                                      [] { return std::make_shared<BufferPool>(kScratchPoolBytes); });
}

char* Call::scratch(size_t bytes) {
  if (!scratch_ || scratch_bytes_ < bytes) {
    auto grown = std::make_unique<BufferPool::Lease>(scratch_pool(comm_), bytes);
    if (scratch_ && scratch_bytes_) std::memcpy(grown->data(), scratch_->data(), scratch_bytes_);
    scratch_ = std::move(grown);  // the old buffer goes back to the pool
    scratch_bytes_ = bytes;
  }
  return scratch_->data();
}

char* Call::temp(size_t bytes) {
  temps_.push_back(std::make_unique<BufferPool::Lease>(scratch_pool(comm_), bytes));
  return temps_.back()->data();
}

// A reduction posts receives for kReduceWindowBytes (coll/config.h) ahead; segments beyond it
// that arrive early are buffered by the transport as unexpected messages (an allocation and an
// extra copy). Several collectives in flight on one communicator each lease their own window.

void Call::flow(int from, uint32_t rtag, void* rbuf, size_t rn, bool reduce, int to, uint32_t stag, const void* sbuf,
                size_t sn, bool forward, const void* base) {
  Transport& tr = comm_.transport();
  const size_t es = elem_, seg = seg_elems_;
  std::vector<Request> sends;
  if (to >= 0 && !forward) {
    for (size_t lo = 0; lo < sn; lo += seg)
      sends.push_back(tr.isend(to, tag(stag), static_cast<const char*>(sbuf) + lo * es, std::min(seg, sn - lo) * es));
  }
  if (from >= 0 && rn > 0) {
    const size_t nseg = (rn + seg - 1) / seg;
    // Where segments land. A copy, or an out-of-place reduction (rbuf = base op incoming),
    // receives straight into rbuf: every segment is posted at once and reduced in place as it
    // arrives. An in-place reduction needs rbuf's own values until it adds the incoming
    // segment, so it receives into a window of scratch segments (reused as the reduction
    // moves on), posted ahead so the sender's segments land there instead of being buffered
    // as unexpected messages.
    const bool out_of_place = reduce && base && base != rbuf;
    const bool scratch = reduce && !out_of_place;
    const size_t window = scratch ? std::max<size_t>(1, std::min(nseg, kReduceWindowBytes / (seg * es))) : nseg;
    std::optional<BufferPool::Lease> lease;
    char* slots = nullptr;
    if (scratch) {
      auto pool = comm_.attachment<BufferPool>("coll/window_pool",
                                               [] { return std::make_shared<BufferPool>(2 * kReduceWindowBytes); });
      // No more than the message: a 4-byte all-reduce leased a whole 1 MiB segment, which
      // the pool then kept (2 MiB a rank of the 4-stage GPT pipeline over tcp).
      lease.emplace(*pool, std::min(window * seg, rn) * es);
      slots = lease->data();
    }
    std::vector<Request> recvs(nseg);
    auto post = [&](size_t k) {
      size_t lo = k * seg, len = std::min(seg, rn - lo);
      char* dst = scratch ? slots + (k % window) * seg * es : static_cast<char*>(rbuf) + lo * es;
      recvs[k] = tr.irecv(from, tag(rtag), dst, len * es);
    };
    for (size_t k = 0; k < window; ++k) post(k);
    for (size_t k = 0; k < nseg; ++k) {
      wait(recvs[k]);
      size_t lo = k * seg, len = std::min(seg, rn - lo);
      char* at = static_cast<char*>(rbuf) + lo * es;
      if (out_of_place) {
        const void* in_order[2] = {static_cast<const char*>(base) + lo * es, at};
        reduce_ordered(dtype_, redop_, at, in_order, 2, len);  // base op incoming, as reduce_into
      } else if (scratch) {
        reduce_into(dtype_, redop_, at, slots + (k % window) * seg * es, len);
        if (k + window < nseg) post(k + window);
      }
      if (forward && to >= 0) sends.push_back(tr.isend(to, tag(stag), at, len * es));
    }
  }
  if (!sends.empty()) wait_all(sends);
}

void Call::send(int to, uint32_t t, const void* buf, size_t n) { flow(-1, 0, nullptr, 0, false, to, t, buf, n, false); }
void Call::recv(int from, uint32_t t, void* buf, size_t n) { flow(from, t, buf, n, false, -1, 0, nullptr, 0, false); }
void Call::recv_reduce(int from, uint32_t t, void* acc, size_t n) {
  flow(from, t, acc, n, true, -1, 0, nullptr, 0, false);
}
void Call::recv_reduce_send(int from, uint32_t rtag, int to, uint32_t stag, void* acc, size_t n) {
  flow(from, rtag, acc, n, true, to, stag, nullptr, 0, true);
}
void Call::recv_copy_send(int from, uint32_t rtag, int to, uint32_t stag, void* buf, size_t n) {
  flow(from, rtag, buf, n, false, to, stag, nullptr, 0, true);
}
void Call::exchange(int to, uint32_t stag, const void* sbuf, size_t sn, int from, uint32_t rtag, void* rbuf, size_t rn,
                    bool reduce, const void* base) {
  flow(from, rtag, rbuf, rn, reduce, to, stag, sbuf, sn, false, base);
}

}  // namespace dtrain

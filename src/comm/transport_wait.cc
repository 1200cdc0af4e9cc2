// comm/transport_wait.cc — the engine's waiting side (comm/transport.h, Transport::wait,
// Request::wait / test): the wait loop, liveness checks, timeouts and a peer's failure. The
// progress passes it drives (matching, sends, reads) are in comm/transport.cc.
#include <sched.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "comm/heartbeat.h"
#include "comm/transport_internal.h"

namespace dtrain {

using namespace detail;  // the engine's Op, constants and helpers (comm/transport_internal.h)

// Progress is driven by waiters: wait() runs progress passes over all peers (send what fits,
// read what arrived) until its operation completes, spinning for spin_s_ and then sleeping in
// the fabric until there is news or a 100 ms slice ends, when it checks that the peers it
// waits on are still alive.
//
// A peer fails for good: what it owed and what waited on it complete with its error, and so
// do pending any-source receives (a rank that left cleanly fails them only once this rank
// closed). A peer that stops answering (Fabric::peer_gone, checked every 100 ms of a wait on
// it) is drained of what it wrote before it went, then failed. A timed-out operation that
// moved no byte is cancelled and the link stays usable; one caught mid-transfer breaks it.

void Transport::fail_peer_locked(int peer, std::exception_ptr error) {
  Peer& p = *peers_[peer];
  if (!p.error) {
    p.error = error;
    try {
      std::rethrow_exception(error);
    } catch (const PeerFailure&) {
      if (!closed_) tell_launcher_a_peer_failed();  // a witness, not the culprit (comm/heartbeat.h)
    } catch (...) {
    }
  }
  for (auto& op : p.sends) complete_op(*op, p.error);
  p.sends.clear();
  for (auto& op : p.posted) complete_op(*op, p.error);
  p.posted.clear();
  if (p.target && !p.target->complete.load()) complete_op(*p.target, p.error);
  p.target.reset();
  p.buffer.reset();
  p.in_message = false;
  p.pad_left = 0;
  if (!any_posted_.empty() && (!p.left || closed_)) fail_any_locked(peer, p.error);
}

std::string Transport::peer_gone(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (peer == rank_ || peer < 0 || peer >= size_) return "";
  if (Peer& p = *peers_[peer]; p.error) {
    try {
      std::rethrow_exception(p.error);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  std::string why = fabric_->peer_gone(peer);
  if (!why.empty()) tell_launcher_a_peer_failed();
  return why;
}

void Transport::check_liveness_locked() {
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = *peers_[peer];
    if (peer == rank_ || p.error || (!p.busy() && (any_posted_.empty() || p.left))) continue;
    std::string why = fabric_->peer_gone(peer);
    if (why.empty()) continue;
    // Drain whatever the peer wrote before it went away, then fail what is left.
    try {
      progress_recv_locked(peer, nullptr, /*eager_all=*/true);
    } catch (const PeerFailure&) {
    }
    fail_peer_locked(peer, std::make_exception_ptr(PeerFailure(
                               "rank " + std::to_string(rank_) + " <-> rank " + std::to_string(peer) + ": " + why, peer)));
  }
}

void Transport::on_timeout_locked(Op& op, double timeout_s) {
  std::ostringstream msg;
  msg << describe(op) << ": timed out after " << timeout_s << " s";
  if (op.peer == kAnySource) {  // not matched yet, so nothing moved: cancel
    auto it = std::find_if(any_posted_.begin(), any_posted_.end(), [&](auto& o) { return o.get() == &op; });
    if (it != any_posted_.end()) any_posted_.erase(it);
    msg << " (no rank sent a message with this tag" << gone_peers_locked() << ")";
    complete_op(op, std::make_exception_ptr(Timeout(msg.str())));
    return;
  }
  Peer& p = *peers_[op.peer];
  if (!op.started) {
    // Cancel cleanly: nothing of it has moved, so the link stays usable.
    if (op.kind == Op::kSend) {
      p.sends.erase(std::find_if(p.sends.begin(), p.sends.end(), [&](auto& o) { return o.get() == &op; }));
    } else {
      auto it = std::find_if(p.posted.begin(), p.posted.end(), [&](auto& o) { return o.get() == &op; });
      if (it != p.posted.end()) p.posted.erase(it);
    }
    msg << (op.kind == Op::kRecv ? " (rank " + std::to_string(op.peer) + " sent nothing with this tag)"
                                 : " (rank " + std::to_string(op.peer) + " is not receiving)");
    complete_op(op, std::make_exception_ptr(Timeout(msg.str())));
  } else {
    msg << " mid-transfer (" << op.done << " of " << op.bytes << " bytes); the link to rank " << op.peer
        << " is broken";
    fail_peer_locked(op.peer, std::make_exception_ptr(Timeout(msg.str())));
  }
}

// ", ranks 2, 5 had left" for the peers this rank lost, or "".
std::string Transport::gone_peers_locked() const {
  std::string ranks;
  int n = 0;
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_ && peers_[peer]->error) ranks += (n++ ? ", " : " ") + std::to_string(peer);
  if (!n) return "";
  return std::string(n == 1 ? "; rank" : "; ranks") + ranks + (n == 1 ? " has" : " have") + " left or failed";
}

void Transport::wait(Op& op, double timeout_s) {
  timeout_s = resolve_timeout(timeout_s, opts_.timeout_s);
  Deadline deadline = Deadline::after(timeout_s);
  double spin_until = now_seconds() + spin_s_;
  const double yield_until = spin_until + yield_s_;
  double next_liveness = now_seconds() + 0.1;
  std::vector<int> want_write;
  while (!op.complete.load(std::memory_order_acquire)) {
    // The activity token is read only when the pass may end in sleep (it must precede that
    // pass); while spinning we leave the doorbell's cache line alone.
    const double t = now_seconds();
    bool may_sleep = t >= yield_until;
    const bool yield_now = !may_sleep && t >= spin_until;
    uint64_t token = may_sleep ? fabric_->activity_token() : 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      progress_locked(&op, /*eager=*/may_sleep);  // a pass before sleeping reads every stream
      if (op.complete.load(std::memory_order_acquire)) break;
      double now = now_seconds();
      if (now >= next_liveness) {
        check_liveness_locked();
        next_liveness = now + 0.1;
        if (op.complete.load(std::memory_order_acquire)) break;
      }
      if (deadline.expired()) {
        on_timeout_locked(op, timeout_s);
        break;
      }
      if (!may_sleep) {
        // Spin, or (oversubscribed) yield, then sleep below: sleeping on the fabric frees the
        // core for a peer that needs it and wakes as soon as the peer writes.
        if (!yield_now) {
          cpu_relax();
          continue;
        }
      } else {
        want_write.clear();
        for (int p = 0; p < size_; ++p)
          if (!peers_[p]->sends.empty()) want_write.push_back(p);
      }
    }
    if (yield_now) {
      sched_yield();  // outside the lock
      continue;
    }
    fabric_->sleep(token, std::min(deadline.remaining_ms(), 100), want_write);
  }
  if (op.error) std::rethrow_exception(op.error);
}

void Request::wait(double timeout_s) {
  DT_CHECK(op_, InvalidArgument, "wait on an empty Request");
  t_->wait(*op_, timeout_s);
}

int Request::source() const {
  if (!op_ || op_->kind != Op::kRecv || !op_->complete.load(std::memory_order_acquire) || op_->error) return -1;
  return op_->peer;
}

bool Request::test() {
  DT_CHECK(op_, InvalidArgument, "test on an empty Request");
  if (op_->complete.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(t_->mu_);
  // Eager, as a wait about to sleep: a loop of tests never sleeps, and what it waits for may
  // depend on a peer whose send waits for this rank to read (a pipeline's sends, tested).
  t_->progress_locked(op_.get(), /*eager=*/true);
  return op_->complete.load(std::memory_order_acquire);
}

void Transport::wait_all(std::span<Request> requests, double timeout_s) {
  std::exception_ptr first;
  for (auto& r : requests) {
    try {
      r.wait(timeout_s);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace dtrain

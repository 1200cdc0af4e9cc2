// tests/support/faulty_fabric.h — fault injection by decorating the real fabric.
//
// A FaultyFabric wraps the fabric a transport runs on (shm or tcp) and injects one fault into
// the byte stream this rank writes to a peer, at a message boundary: before the first byte of
// the peer's message number `at_message` (counted from 0 per peer, by parsing the transport's
// framing: a 16-byte header {tag, size} then `size` bytes). Faults:
//   kDelay  message K and later leave only after delay_s (the link stalls once, then recovers)
//   kDrop   message K and every later byte to that peer vanish (a lossy link: the peer's
//           receive runs into its timeout)
//   kClose  this rank closes its fabric at message K (peers see PeerFailure "closed")
//   kKill   as kClose, and every later operation of this rank fails too, as if the process died
// peer = -1 applies the fault to every peer's stream (each counted on its own).
// Messages before K pass untouched. Everything else (sleep, liveness) goes to the real fabric.
//
// Use it through TransportOptions::decorate_fabric (fault_injector() returns one), or wrap a
// fabric by hand and build a Transport on it. Faults are the test's input: no product code
// path changes (this replaces the DTRAIN_FAULT_* switches the product used to carry).
// Thread-safety: like the fabric it wraps (the transport serialises channel calls).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "comm/fabric.h"

namespace dtrain::testing {

struct Fault {
  enum Kind { kDelay, kDrop, kClose, kKill };
  Kind kind = kDrop;
  int peer = -1;            // the peer whose stream is faulted; -1 = every peer
  uint64_t at_message = 0;  // before this message (0 = the first)
  double delay_s = 0;       // kDelay
  std::atomic<int>* fired = nullptr;  // when set, incremented once when the fault fires
};

class FaultyFabric : public Fabric {
 public:
  FaultyFabric(std::unique_ptr<Fabric> inner, Fault fault);
  ~FaultyFabric() override;

  const char* kind() const override { return inner_->kind(); }
  Channel* channel(int peer) override;
  uint64_t activity_token() override { return inner_->activity_token(); }
  void sleep(uint64_t token, int timeout_ms, const std::vector<int>& want_write) override;
  std::string peer_gone(int peer) override;
  void close() override { inner_->close(); }
  void wake() override { inner_->wake(); }
  size_t payload_alignment() const override { return inner_->payload_alignment(); }
  bool holds_early_payloads() const override { return inner_->holds_early_payloads(); }

  // Whether the fault has fired (for assertions that it was reached).
  bool fired() const { return fired_; }

 private:
  void fire() {
    if (!fired_ && fault_.fired) fault_.fired->fetch_add(1);
    fired_ = true;
  }

  class FaultyChannel;
  friend class FaultyChannel;
  std::unique_ptr<Fabric> inner_;
  Fault fault_;
  std::map<int, std::unique_ptr<FaultyChannel>> channels_;
  bool fired_ = false, killed_ = false, delaying_ = false;
};

// A decorator for TransportOptions::decorate_fabric: wraps each fabric it is given with `fault`.
// Set it in the options of the rank to fault only (run_world's WorldOptions::fault does that).
std::function<std::unique_ptr<Fabric>(std::unique_ptr<Fabric>)> fault_injector(Fault fault);

}  // namespace dtrain::testing

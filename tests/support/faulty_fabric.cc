#include "support/faulty_fabric.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/clock.h"
#include "base/error.h"

namespace dtrain::testing {

// Follows the transport's framing on one outgoing stream so faults land on message boundaries.
class FaultyFabric::FaultyChannel : public Channel {
 public:
  FaultyChannel(FaultyFabric& owner, Channel* inner, int peer) : owner_(owner), inner_(inner), peer_(peer) {}

  size_t write_some(const void* data, size_t n) override {
    check_alive();
    const Fault& f = owner_.fault_;
    const bool targeted = f.peer < 0 || f.peer == peer_;
    if (targeted && at_boundary() && st_.message >= f.at_message) {
      switch (f.kind) {
        case Fault::kDrop:
          owner_.fire();
          return n;  // vanishes (parsing stops: everything after is dropped too)
        case Fault::kClose:
        case Fault::kKill:
          if (!owner_.fired_) {
            owner_.fire();
            owner_.killed_ = f.kind == Fault::kKill;
            owner_.inner_->close();
          }
          check_alive();
          // Nothing more leaves on this link; the peers learn of the close from the fabric.
          throw PeerFailure("link closed by fault injection (FaultyFabric kClose)", peer_);
        case Fault::kDelay:
          if (!delay_done_) {
            if (!owner_.fired_) {
              owner_.fire();
              owner_.delaying_ = true;
              delay_until_ = Deadline::after(f.delay_s);
            }
            if (!delay_until_.expired()) return 0;  // the link is stalled: nothing moves
            delay_done_ = true;
            owner_.delaying_ = false;
          }
          break;
      }
    }
    // Never write past the start of the faulted message in one call (the transport batches
    // small messages into one write): the next call, at the boundary, decides.
    size_t len = n;
    if (targeted && !delay_done_ && st_.message < f.at_message) len = offset_of(static_cast<const char*>(data), n, f.at_message);
    size_t m = inner_->write_some(data, len);
    advance(static_cast<const char*>(data), m);
    return m;
  }

  size_t read_some(void* data, size_t n) override {
    check_alive();
    return inner_->read_some(data, n);
  }

 private:
  void check_alive() const {
    if (owner_.killed_) throw PeerFailure("killed by fault injection (FaultyFabric kKill)", peer_);
  }
  bool at_boundary() const { return st_.header_got == 0 && st_.payload_left == 0; }

  struct Parse {
    uint64_t message = 0;  // index of the message being written (or next to be)
    char header[16];
    size_t header_got = 0;
    uint64_t payload_left = 0;
  };

  // Offset in p[0, n) where message k starts, parsing from the current state; n when it does not.
  size_t offset_of(const char* p, size_t n, uint64_t k) const {
    Parse copy = st_;
    for (size_t off = 0; off < n;) {
      if (copy.message >= k && copy.header_got == 0 && copy.payload_left == 0) return off;
      off += step(copy, p + off, n - off);
    }
    return n;
  }

  // Consumes bytes of one header or payload; returns how many.
  static size_t step(Parse& st, const char* p, size_t m) {
    if (st.header_got < 16) {
      size_t take = std::min(m, 16 - st.header_got);
      std::memcpy(st.header + st.header_got, p, take);
      st.header_got += take;
      if (st.header_got == 16) {
        std::memcpy(&st.payload_left, st.header + 8, 8);
        if (st.payload_left == 0) end_message(st);
      }
      return take;
    }
    size_t take = static_cast<size_t>(std::min<uint64_t>(m, st.payload_left));
    st.payload_left -= take;
    if (st.payload_left == 0) end_message(st);
    return take;
  }
  static void end_message(Parse& st) {
    st.header_got = 0;
    st.payload_left = 0;
    ++st.message;
  }

  void advance(const char* p, size_t m) {
    for (size_t off = 0; off < m;) off += step(st_, p + off, m - off);
  }

  FaultyFabric& owner_;
  Channel* inner_;
  int peer_;
  Parse st_;
  bool delay_done_ = false;
  Deadline delay_until_;
};

FaultyFabric::FaultyFabric(std::unique_ptr<Fabric> inner, Fault fault) : inner_(std::move(inner)), fault_(fault) {}
FaultyFabric::~FaultyFabric() = default;

Channel* FaultyFabric::channel(int peer) {
  auto& c = channels_[peer];
  if (!c) c = std::make_unique<FaultyChannel>(*this, inner_->channel(peer), peer);
  return c.get();
}

void FaultyFabric::sleep(uint64_t token, int timeout_ms, const std::vector<int>& want_write) {
  // A stalled link recovers with time, not with activity: wake up to check.
  if (delaying_) timeout_ms = std::min(timeout_ms, 1);
  inner_->sleep(token, timeout_ms, want_write);
}

std::string FaultyFabric::peer_gone(int peer) {
  if (killed_) return "this rank was killed by fault injection";
  return inner_->peer_gone(peer);
}

std::function<std::unique_ptr<Fabric>(std::unique_ptr<Fabric>)> fault_injector(Fault fault) {
  return [fault](std::unique_ptr<Fabric> inner) -> std::unique_ptr<Fabric> {
    return std::make_unique<FaultyFabric>(std::move(inner), fault);
  };
}

}  // namespace dtrain::testing

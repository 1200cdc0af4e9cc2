// comm/fabric.h — what a transport kind provides underneath the message engine.
//
// A Fabric is the set of byte streams from this rank to each peer (one Channel per peer,
// none for itself) plus the way to sleep until any of them may have news. The message
// engine (transport.h) does framing, tag matching, progress and errors once, on top of any
// fabric; a new kind of transport only writes a Fabric.
//
// Contract
// - Channel::write_some / read_some never block: they move up to n bytes and return how many
//   (0 when the stream is full / empty). They throw PeerFailure when the link is broken
//   (closed, reset, peer gone); bytes the peer wrote before closing are still delivered.
// - Fabric::activity_token() is read before a progress pass; sleep(token, ...) returns at
//   once if anything happened since (new data, freed space), else waits up to timeout_ms.
//   Spurious returns are allowed.
// - Fabric::peer_gone(p) is a slower check (a syscall) that says why peer p is gone, or ""
//   when it is alive; the engine calls it only while blocked on p.
// - close() tells every peer this rank is leaving; peers' pending operations then fail.
// Thread-safety: the engine serialises all channel calls under its own lock; activity_token
// and sleep may be called without it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtrain {

class Channel {
 public:
  virtual ~Channel() = default;
  virtual size_t write_some(const void* data, size_t n) = 0;
  virtual size_t read_some(void* data, size_t n) = 0;
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual const char* kind() const = 0;
  virtual Channel* channel(int peer) = 0;
  virtual uint64_t activity_token() = 0;
  // want_write: peers with bytes waiting to be sent (a socket fabric polls them for POLLOUT).
  virtual void sleep(uint64_t token, int timeout_ms, const std::vector<int>& want_write) = 0;
  virtual std::string peer_gone(int peer) = 0;
  virtual void close() = 0;
  // Wakes every thread sleeping in sleep() on this rank (used by close and by tests).
  virtual void wake() = 0;
  // > 0: the engine pads a large payload's place in the stream to the sender's address
  // modulo this (comm/transport.cc says why); 0: payloads follow their header directly.
  virtual size_t payload_alignment() const { return 0; }
  // true: bytes this rank has not read wait in buffers of the fabric's own (the kernel's
  // socket buffers), so the engine may leave an early payload there until its receive is
  // posted (comm/transport.cc); false: it reads every payload as it comes.
  virtual bool holds_early_payloads() const { return false; }
};

class Store;

struct FabricOptions {
  std::string bind_host = "127.0.0.1";  // tcp: address to listen on and publish
  size_t shm_ring_bytes = 1 << 20;      // shm: bytes per directed pair
  double connect_timeout_s = 60;
  std::string token;                     // tcp: presented by connecting ranks
  // tcp: the connections' congestion control. "auto": a connection within one host uses reno
  // where the system's default is another (bbr paces its sends, which throttles loopback;
  // with no network between the ends no algorithm has anything to manage); across hosts the
  // system's default. "system": never changed. Else an algorithm's name, set on every
  // connection (an error if the kernel refuses it).
  std::string tcp_congestion = "auto";
};

// Collective: every rank of the group calls it with the same store namespace.
std::unique_ptr<Fabric> make_tcp_fabric(Store& store, int rank, int size, const FabricOptions& opts);
std::unique_ptr<Fabric> make_shm_fabric(Store& store, int rank, int size, const FabricOptions& opts);

}  // namespace dtrain

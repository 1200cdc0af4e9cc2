// comm/transport_internal.h — the message engine's own pieces, shared by its two files:
// comm/transport.cc (creation, matching, sends and reads: the progress passes) and
// comm/transport_wait.cc (waiting on an operation, liveness, timeouts and a peer's failure).
//
// Contract
// - Not part of the library's interface: included by those two files only.
// - detail::Op is one send or receive; Transport::Unexpected an early message; Transport::Peer
//   one peer's stream and queues. The wire format's constants (kHeader, kPadShift, kLeaveTag,
//   ...) and the helpers complete_op, cpu_relax and online_cpus live here so both files agree.
// Thread-safety: every field is guarded by Transport::mu_, except Op::complete (atomic).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <string>

#include "comm/transport.h"

namespace dtrain {

namespace detail {
struct Op {
  enum Kind { kSend, kRecv } kind;
  int peer;
  uint64_t tag;
  char* data;
  size_t bytes;
  size_t done = 0;          // payload bytes moved
  // send: the header (+ a small payload) leaves in one write from here.
  static constexpr size_t kInline = 16 + 240;
  char inline_stage[kInline];
  std::string big_stage;    // header + payload of up to 4 KiB that do not fit inline
  const char* staged = nullptr;
  size_t staged_size = 0, staged_done = 0;
  bool started = false;     // any byte moved: can no longer be cancelled
  uint64_t order = 0;       // receives: when posted (matching across specific / any-source)
  std::atomic<bool> complete{false};
  std::exception_ptr error;
};
}  // namespace detail

struct Transport::Unexpected {
  uint64_t tag;
  uint64_t arrival = 0;    // Transport::arrivals_ when its header came
  BufferPool::Buffer buf;  // uninitialised, from early_buffers_ (see there)
  size_t size = 0;
  size_t got = 0;
  bool deferred = false;   // its bytes wait unread in the fabric (no buffer yet)
  char* data() { return buf.get(); }
  bool complete() const { return got == size; }
};

namespace detail {
// The first entry of a peer's queue (posted receives or early messages) with `tag`.
template <class Q>
typename Q::iterator find_tag(Q& q, uint64_t tag) {
  for (auto it = q.begin(); it != q.end(); ++it)
    if ((*it)->tag == tag) return it;
  return q.end();
}
}  // namespace detail

struct Transport::Peer {
  Channel* channel = nullptr;
  std::deque<std::shared_ptr<detail::Op>> sends;
  // Posted receives and early messages, each in arrival order across tags. A peer rarely has
  // more than a handful outstanding, so the first match of a tag is found by a short scan —
  // cheaper than a map of queues that allocates for every new tag (collective tags are new
  // every call) — and taking the first match keeps per-tag order.
  std::deque<std::shared_ptr<detail::Op>> posted;
  std::deque<std::shared_ptr<Unexpected>> unexpected;
  // The message being read.
  char header[16];
  size_t header_got = 0;
  size_t pad_left = 0;  // padding before the payload still to be read (kPadShift)
  bool in_message = false;
  size_t msg_size = 0, msg_got = 0;
  std::shared_ptr<detail::Op> target;  // a posted receive, or
  std::shared_ptr<Unexpected> buffer;  // an unexpected message, or neither (discard)
  std::exception_ptr error;
  bool left = false;  // said it was leaving (kLeaveTag): will send nothing more
  bool busy() const { return !sends.empty() || !posted.empty() || in_message; }
};

namespace detail {
inline constexpr size_t kHeader = 16;
inline constexpr size_t kStageLimit = 4096;  // payloads up to this go out with their header in one write
// Unexpected payloads from this size up wait unread where the fabric holds them (comm/transport.cc);
// smaller ones are buffered at once, which costs little and keeps the stream moving.
inline constexpr size_t kDeferBytes = size_t{64} << 10;
// The padding between a large payload's header and its bytes. Over tcp the kernel copies a
// send into pages of its own, starting at a page's offset 0 when the connection's earlier
// bytes were all read (a request after a pause: a parameter server's push, a pipeline's
// activation); the payload then lands at offset 16, behind its header. When that copy
// writes 1-63 bytes ahead of where it reads modulo 4 KiB it ran at half speed on the EPYC
// VM (a page-aligned 1 MiB ping-pong over loopback 275 us one way, 140 with the payload's
// place in the stream matching its address modulo 64; a plain C pair of processes the same,
// 300-323 against 135-152 us, whether the header was 8, 16, 32 or 48 bytes), which is where
// a tensor from the 2 MiB-aligned large blocks sits. So the sender pads until the payload's
// place modulo the fabric's payload_alignment matches its address's; the receiver learns
// the pad from the size word (bits 56-63) and drops it. Streams that never pause keep
// whatever alignment their history gives, as before. Payloads are below 2^56 bytes.
inline constexpr unsigned kPadShift = 56;
inline constexpr uint64_t kSizeMask = (uint64_t{1} << kPadShift) - 1;
// A header with this tag and no payload says "this rank is leaving" (close()).
inline constexpr uint64_t kLeaveTag = (uint64_t{1} << 62) + 1;

inline void complete_op(Op& op, std::exception_ptr err = nullptr) {
  op.error = err;
  op.complete.store(true, std::memory_order_release);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

inline int online_cpus() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}
}  // namespace detail

}  // namespace dtrain

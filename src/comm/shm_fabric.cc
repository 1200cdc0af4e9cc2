// comm/shm_fabric.cc — the shared-memory fabric: a pair of byte rings per peer pair.
//
// Each rank owns one shared-memory segment holding its INBOUND rings, one per peer, plus a
// doorbell. Rank s sends to rank r by copying into ring[s] of r's segment; r copies out.
// A ring is single-producer single-consumer: `head` (bytes ever written) belongs to the
// writer, `tail` (bytes ever read) to the reader, each on its own cache line; payload bytes
// are published with a release store of head and consumed after an acquire load (and the
// reverse for tail), so no lock is needed. Large messages stream through the ring in
// pieces of 64 KiB, each published as soon as it is copied, so the writer fills while the
// reader drains: a pipelined two-copy path.
//
// Sleeping: every rank has a 32-bit doorbell (a futex word) in its segment. A rank that
// wants to sleep reads the doorbell, announces itself in `waiters`, re-checks its rings for
// news, and sleeps with FUTEX_WAIT on the value it read. Whoever changes something a rank may
// wait for — new bytes in its inbound ring, or space freed in a ring it writes to — checks
// `waiters` after publishing (with a fence) and only then bumps the doorbell and calls
// FUTEX_WAKE, so the common case (nobody asleep) costs no atomic read-modify-write.
//
// Liveness: a rank that closes sets `closed` in its segment and rings everyone; a process
// that dies without closing is seen through a pidfd (readable once the process has exited).
// Segments are anonymous (comm/shm_segment.h: a memfd each peer opens through /proc), so
// nothing is ever left in /dev/shm, whichever rank fails or is killed at any point of setup.
// The owner closes its descriptor once every peer has mapped the segment.
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <random>
#include <cstdlib>
#include <sstream>

#include "base/copy.h"
#include "base/error.h"
#include "base/tsan.h"
#include "comm/fabric.h"
#include "comm/shm_segment.h"
#include "comm/socket.h"
#include "comm/store.h"

namespace dtrain {
namespace {

constexpr uint64_t kMagic = 0x6474726e73686d31ull;  // "dtrnshm1"
// Ring positions are published every kChunk bytes so writer and reader overlap on big copies.
constexpr size_t kChunk = 64 << 10;

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t size;
  uint32_t rank;
  int32_t pid;
  uint64_t ring_bytes;
  uint64_t id;  // random, the same in every process's mapping (names the rings for TSan)
  alignas(64) std::atomic<uint32_t> doorbell;
  alignas(64) std::atomic<uint32_t> waiters;
  alignas(64) std::atomic<uint32_t> closed;
};

struct RingControl {
  alignas(64) std::atomic<uint64_t> head;  // written by the sender
  alignas(64) std::atomic<uint64_t> tail;  // written by the receiver
};

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory rings need lock-free atomics");

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Under TSan each ring direction also releases / acquires a key every mapping computes the
// same way (base/tsan.h): segment id, sender rank, data or space.
void* ring_key(uint64_t segment_id, int from, bool data) {
  return tsan_key(segment_id, static_cast<uint64_t>(from) * 2 + (data ? 1 : 0));
}

struct Layout {
  size_t controls, data, total;
  Layout(int size, size_t ring_bytes) {
    controls = align_up(sizeof(SegmentHeader), 64);
    data = align_up(controls + sizeof(RingControl) * size, 4096);
    total = data + ring_bytes * size;
  }
};

// A mapped segment (ours or a peer's).
struct Segment {
  void* base = nullptr;
  size_t bytes = 0;
  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base); }
  RingControl* control(const Layout& l, int from) const {
    return reinterpret_cast<RingControl*>(static_cast<char*>(base) + l.controls) + from;
  }
  char* ring(const Layout& l, int from, size_t ring_bytes) const {
    return static_cast<char*>(base) + l.data + ring_bytes * from;
  }
  ~Segment() {
    if (base) ::munmap(base, bytes);
  }
};

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Wakes rank h if it is asleep (or about to sleep). The caller has just published ring
// positions; the fence orders those stores before the load of `waiters`. A sleeper increments
// `waiters` and then re-reads the ring positions (ShmFabric::sleep), also fenced: of the two
// (publish, then check waiters) and (register, then check rings) at least one sees the other,
// so either we wake it or it sees the news and does not sleep. While nobody sleeps this is a
// fence and a read of a line nobody writes, not an atomic read-modify-write per message.
void ring_doorbell(SegmentHeader* h) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h->waiters.load(std::memory_order_relaxed)) {
    h->doorbell.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&h->doorbell);
  }
}

void ring_doorbell_always(SegmentHeader* h) {
  h->doorbell.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&h->doorbell);
}

class ShmChannel : public Channel {
 public:
  ShmChannel(int me, int peer, size_t cap, RingControl* out, char* out_ring, SegmentHeader* peer_header,
             RingControl* in, char* in_ring, uint64_t my_segment_id)
      : me_(me), peer_rank_(peer), cap_(cap), out_(out), out_ring_(out_ring), peer_h_(peer_header), in_(in), in_ring_(in_ring),
        out_data_key_(ring_key(peer_header->id, me, true)), out_space_key_(ring_key(peer_header->id, me, false)),
        in_data_key_(ring_key(my_segment_id, peer, true)), in_space_key_(ring_key(my_segment_id, peer, false)) {}

  size_t write_some(const void* data, size_t n) override {
    if (peer_h_->closed.load(std::memory_order_acquire)) fail("rank " + std::to_string(peer_id()) + " closed its transport");
    uint64_t head = out_->head.load(std::memory_order_relaxed);
    uint64_t tail = out_->tail.load(std::memory_order_acquire);
    tsan_acquire(out_space_key_);
    size_t k = std::min<size_t>(n, cap_ - static_cast<size_t>(head - tail));
    if (k == 0) return 0;
    // Publish every chunk as it lands so the reader copies out while we copy in.
    const char* src = static_cast<const char*>(data);
    for (size_t done = 0; done < k;) {
      size_t c = std::min(k - done, kChunk);
      copy_in(out_ring_, head + done, src + done, c);
      done += c;
      tsan_release(out_data_key_);
      out_->head.store(head + done, std::memory_order_release);
      if (done == c || done == k) ring_doorbell(peer_h_);  // wake a sleeping reader early
    }
    return k;
  }

  bool readable() const {
    return in_->head.load(std::memory_order_acquire) != in_->tail.load(std::memory_order_relaxed) ||
           peer_h_->closed.load(std::memory_order_acquire);
  }
  bool writable() const {
    return out_->head.load(std::memory_order_relaxed) - out_->tail.load(std::memory_order_acquire) < cap_ ||
           peer_h_->closed.load(std::memory_order_acquire);
  }

  size_t read_some(void* data, size_t n) override {
    uint64_t tail = in_->tail.load(std::memory_order_relaxed);
    uint64_t head = in_->head.load(std::memory_order_acquire);
    tsan_acquire(in_data_key_);
    size_t k = std::min<size_t>(n, static_cast<size_t>(head - tail));
    if (k == 0) {
      if (n && peer_h_->closed.load(std::memory_order_acquire) && in_->head.load(std::memory_order_acquire) == tail)
        fail("rank " + std::to_string(peer_id()) + " closed its transport");
      return 0;
    }
    char* dst = static_cast<char*>(data);
    for (size_t done = 0; done < k;) {
      size_t c = std::min(k - done, kChunk);
      copy_out(in_ring_, tail + done, dst + done, c);
      done += c;
      tsan_release(in_space_key_);
      in_->tail.store(tail + done, std::memory_order_release);  // space for the writer, chunk by chunk
    }
    ring_doorbell(peer_h_);  // the writer may be waiting for space
    return k;
  }

 private:
  int peer_id() const { return peer_rank_; }
  void copy_in(char* ring, uint64_t pos, const char* src, size_t k) {
    size_t off = static_cast<size_t>(pos % cap_), first = std::min(k, cap_ - off);
    copy_memory(ring + off, src, first);
    copy_memory(ring, src + first, k - first);
  }
  void copy_out(const char* ring, uint64_t pos, char* dst, size_t k) {
    size_t off = static_cast<size_t>(pos % cap_), first = std::min(k, cap_ - off);
    copy_memory(dst, ring + off, first);
    copy_memory(dst + first, ring, k - first);
  }
  [[noreturn]] void fail(const std::string& why) {
    throw PeerFailure("rank " + std::to_string(me_) + " <-> rank " + std::to_string(peer_rank_) + " (shm): " + why,
                      peer_rank_);
  }

  int me_;
  int peer_rank_;
  size_t cap_;
  RingControl* out_;
  char* out_ring_;
  SegmentHeader* peer_h_;
  RingControl* in_;
  char* in_ring_;
  void* out_data_key_;   // TSan keys (null outside TSan builds)
  void* out_space_key_;
  void* in_data_key_;
  void* in_space_key_;
};

class ShmFabric : public Fabric {
 public:
  ShmFabric(int rank, int size, size_t ring_bytes) : rank_(rank), size_(size), ring_bytes_(ring_bytes), layout_(size, ring_bytes) {}
  const char* kind() const override { return "shm"; }
  Channel* channel(int peer) override { return channels_[peer].get(); }
  uint64_t activity_token() override { return me()->doorbell.load(std::memory_order_seq_cst); }
  void sleep(uint64_t token, int timeout_ms, const std::vector<int>& want_write) override {
    SegmentHeader* h = me();
    h->waiters.fetch_add(1, std::memory_order_seq_cst);
    if (h->doorbell.load(std::memory_order_seq_cst) == static_cast<uint32_t>(token) && !news(want_write)) {
      timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
      ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h->doorbell), FUTEX_WAIT, static_cast<uint32_t>(token), &ts,
                nullptr, 0);
    }
    h->waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
  // After registering as a waiter: is there anything progress could act on right now?
  bool news(const std::vector<int>& want_write) {
    for (int p = 0; p < size_; ++p)
      if (channels_[p] && channels_[p]->readable()) return true;
    for (int p : want_write)
      if (channels_[p] && channels_[p]->writable()) return true;
    return false;
  }
  std::string peer_gone(int peer) override {
    if (segments_[peer]->header()->closed.load(std::memory_order_acquire))
      return "rank " + std::to_string(peer) + " closed its transport";
    if (pidfds_[peer].valid()) {
      pollfd p{pidfds_[peer].get(), POLLIN, 0};
      if (::poll(&p, 1, 0) == 1)
        return "rank " + std::to_string(peer) + " (pid " + std::to_string(segments_[peer]->header()->pid) +
               ") exited without closing its transport";
    }
    return "";
  }
  void close() override {
    me()->closed.store(1, std::memory_order_release);
    for (int p = 0; p < size_; ++p)
      if (segments_[p]) ring_doorbell_always(segments_[p]->header());
  }
  void wake() override { ring_doorbell_always(me()); }

  SegmentHeader* me() { return segments_[rank_]->header(); }

  int rank_, size_;
  size_t ring_bytes_;
  Layout layout_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<std::unique_ptr<ShmChannel>> channels_;
  std::vector<Fd> pidfds_;
};

std::unique_ptr<Segment> map_segment(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  DT_CHECK(p != MAP_FAILED, IoError, "shm: cannot map " << name << " (" << bytes << " bytes): " << errno_string(errno));
  auto s = std::make_unique<Segment>();
  s->base = p;
  s->bytes = bytes;
  return s;
}

}  // namespace

std::unique_ptr<Fabric> make_shm_fabric(Store& store, int rank, int size, const FabricOptions& opts) {
  size_t ring = align_up(std::max<size_t>(opts.shm_ring_bytes, 4096), 4096);
  auto f = std::make_unique<ShmFabric>(rank, size, ring);
  f->segments_.resize(size);
  f->channels_.resize(size);
  f->pidfds_.resize(size);
  Layout layout(size, ring);

  std::random_device rd;
  ShmSegment own = create_shm_segment(layout.total, "dtrain-shm-rank" + std::to_string(rank));
  f->segments_[rank] = map_segment(own.fd.get(), layout.total, "rank " + std::to_string(rank) + "'s segment");
  SegmentHeader* h = new (f->segments_[rank]->base) SegmentHeader();
  h->magic = kMagic;
  h->size = static_cast<uint32_t>(size);
  h->rank = static_cast<uint32_t>(rank);
  h->pid = ::getpid();
  h->ring_bytes = ring;
  h->id = (static_cast<uint64_t>(rd()) << 32) | rd();
  for (int p = 0; p < size; ++p) new (f->segments_[rank]->control(layout, p)) RingControl();
  store.set("shm/" + std::to_string(rank), own.handle);

  Deadline deadline = Deadline::after(opts.connect_timeout_s);
  std::vector<std::string> keys;
  for (int p = 0; p < size; ++p) keys.push_back("shm/" + std::to_string(p));
  store.wait(keys, opts.connect_timeout_s);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    std::string handle = store.get("shm/" + std::to_string(p));
    std::string who = "rank " + std::to_string(p);
    Fd pfd = open_shm_segment(handle, layout.total, who, p);
    f->segments_[p] = map_segment(pfd.get(), layout.total, who + "'s segment");
    int pid = std::atoi(handle.c_str());
    SegmentHeader* ph = f->segments_[p]->header();
    DT_CHECK(ph->magic == kMagic && ph->size == static_cast<uint32_t>(size) && ph->ring_bytes == ring, InvalidArgument,
             "shm: rank " << p << "'s segment disagrees on the group (size " << ph->size << " vs " << size
                          << ", ring " << ph->ring_bytes << " vs " << ring << " bytes): set DTRAIN_SHM_RING_BYTES alike");
    if (pid != ::getpid()) {
      int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
      if (pidfd >= 0) f->pidfds_[p] = Fd(pidfd);
    }
  }
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const Segment& peer = *f->segments_[p];
    const Segment& mine = *f->segments_[rank];
    f->channels_[p] = std::make_unique<ShmChannel>(rank, p, ring, peer.control(layout, rank), peer.ring(layout, rank, ring),
                                                   peer.header(), mine.control(layout, p), mine.ring(layout, p, ring),
                                                   mine.header()->id);
  }
  // Everyone has mapped everyone: the names can go.
  store.set("shm/mapped/" + std::to_string(rank), "1");
  keys.clear();
  for (int p = 0; p < size; ++p) keys.push_back("shm/mapped/" + std::to_string(p));
  store.wait(keys, deadline.remaining_seconds());
  return f;  // `own` closes: the mappings keep the memory, and nothing has a name
}

}  // namespace dtrain

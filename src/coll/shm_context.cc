#include "coll/shm_context.h"
#include "coll/bytes.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <climits>
#include <cstddef>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "base/huge_pages.h"
#include "base/tsan.h"
#include "coll/reduce_kernels.h"
#include "comm/heartbeat.h"
#include "comm/shm_segment.h"

namespace dtrain {

struct ShmContext::Header {
  alignas(64) std::atomic<uint64_t> arrived{0};
  std::atomic<uint32_t> doorbell{0};  // futex word: bumped on every arrival
  std::atomic<uint32_t> sleepers{0};  // ranks sleeping on this doorbell
  // A digest of fp[k] on the arrival counter's cache line: a waiter compares calls with the
  // line it has just read, and reads the full records (another line) only on a mismatch.
  uint64_t fp_digest[2] = {0, 0};
  // allreduce_small's data when it is this small, per phase parity: on the line the waiters
  // read anyway, so a peer's arrival, call and data come in one cache-line transfer (one
  // fewer miss per peer, the largest part of an 8-byte all-reduce).
  alignas(8) unsigned char inline_data[2][ShmContext::kInlineBytes] = {};
  alignas(64) Fingerprint fp[2];
  // The call this rank is in, on any path (a seqlock: odd while being written), so a waiter
  // can tell a peer that is late from a peer that is in another call (publish_call).
  std::atomic<uint32_t> current_version{0};
  Fingerprint current;
  int64_t pid = 0;
  uint64_t id = 0;  // random, the same in every mapping: names this rank's arrivals for TSan
  // The round-trip probe (probe_peers): a counter on a line of its own, and rank 0's verdict
  // and the bytes of distance-dependent calls until the next probe, published before its
  // last count.
  alignas(64) std::atomic<uint64_t> probe{0};
  uint64_t slots_from = 0;
  uint64_t probe_every = 0;
  uint64_t path_mask = 0;  // PathTuner::decide's choice for the calls until the next probe
  // Ranks beyond the cores: rank 0's decisions, alternately in each (count_decision).
  std::atomic<uint64_t> decided_mask[2] = {0, 0};
};

namespace {
constexpr size_t kHeaderBytes = 384;

// The host's last-level cache: the largest cache level cpu0 lists in sysfs (what lscpu
// prints), 32 MiB where none is listed. Not sysconf(_SC_LEVEL3_CACHE_SIZE): on the EPYC VM
// glibc reads 256 MiB from the CPU (the whole package's) where sysfs and lscpu say 32 MiB.
// Every rank on the host reads the same value, so they agree on slots_allgather_max_bytes()
// without a message.
size_t last_level_cache_bytes() {
  size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), size_file(dir + "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size) || size.empty()) continue;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(size.c_str(), &end, 10);
    const size_t scale = *end == 'K' ? size_t{1} << 10 : *end == 'M' ? size_t{1} << 20 : *end == 'G' ? size_t{1} << 30 : 1;
    if (v > 0 && level > best_level) best = static_cast<size_t>(v) * scale, best_level = level;
  }
  return best > 0 ? best : size_t{32} << 20;
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, int timeout_us) {
  timespec ts{0, timeout_us * 1000L};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
// Waits for a peer's key while checking that the peer is alive: a peer that died before it
// published is a PeerFailure naming it, as on the message path, not a wait for the whole
// timeout.
std::string await_handle(Communicator& comm, const std::string& key, int q, const Deadline& deadline) {
  Store& store = comm.store();
  while (!store.check({key})) {
    std::string gone = comm.transport().peer_gone(q);
    if (!gone.empty())
      throw PeerFailure("rank " + std::to_string(comm.rank()) + ": building the shared-memory context failed: rank " +
                            std::to_string(q) + " is gone [" + gone + "]",
                        q);
    if (deadline.expired())
      DT_THROW(Timeout, "rank " << comm.rank() << ": building the shared-memory context timed out; never reached by rank "
                                << q);
    try {
      store.wait({key}, 0.05);
    } catch (const Timeout&) {
    }
  }
  return store.get(key);
}
}  // namespace

// Every rank creates an anonymous segment (comm/shm_segment.h: nothing in /dev/shm, whatever
// fails when), lets `init` fill its own, publishes it through the store and maps everyone
// else's; a barrier through the store (no collective sequence number is drawn) keeps each
// owner's descriptor open until everyone has mapped it.
std::vector<char*> map_host_segments(Communicator& comm, size_t bytes, const std::string& label,
                                     const std::function<void(char*)>& init) {
  const int rank = comm.rank(), size = comm.size();
  std::vector<char*> segs(size, nullptr);
  ShmSegment own = create_shm_segment(bytes, label + std::to_string(rank));
  auto map = [&](int f, const std::string& name) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    DT_CHECK(p != MAP_FAILED, IoError, "shared memory: mmap " << name << ": " << errno_string(errno));
    // Large segments (ddp's gradient and parameter windows) in 2 MiB pages where the kernel
    // gives shared memory huge pages on advice (shmem_enabled "advise"; "within_size" and
    // "always" need none, "never" refuses): the GEMMs and the reductions stream them
    // (base/huge_pages.h).
    if (bytes >= kHugePageBytes && huge_pages_wanted()) advise_huge_pages(p, bytes);
    return static_cast<char*>(p);
  };
  segs[rank] = map(own.fd.get(), "rank " + std::to_string(rank) + "'s segment");
  if (init) init(segs[rank]);
  std::string key = "shmctx/" + std::to_string(comm.next_setup_sequence()) + "/";
  try {
    comm.store().set(key + std::to_string(rank), own.handle);
    const Deadline deadline = Deadline::after(comm.timeout());
    for (int q = 0; q < size; ++q) {
      if (q == rank) continue;
      std::string who = "rank " + std::to_string(q);
      Fd f = open_shm_segment(await_handle(comm, key + std::to_string(q), q, deadline), bytes, who, q);
      segs[q] = map(f.get(), who + "'s segment");
    }
    comm.store().set(key + "mapped/" + std::to_string(rank), "1");
    for (int q = 0; q < size; ++q)
      if (q != rank) await_handle(comm, key + "mapped/" + std::to_string(q), q, deadline);
  } catch (...) {
    unmap_host_segments(segs, bytes);
    throw;
  }
  return segs;
}

void unmap_host_segments(std::vector<char*>& segs, size_t bytes) {
  for (char*& seg : segs)
    if (seg) ::munmap(std::exchange(seg, nullptr), bytes);
}

ShmWindow::ShmWindow(Communicator& comm, size_t bytes)
    : comm_(comm), rank_(comm.rank()), bytes_(std::max<size_t>(64, (bytes + 63) / 64 * 64)) {
  segs_ = map_host_segments(comm, bytes_, "dtrain-window-rank", nullptr);
}

ShmWindow::~ShmWindow() { unmap_host_segments(segs_, bytes_); }

int64_t ShmWindow::offset_of(const void* p, size_t len) const {
  const char* c = static_cast<const char*>(p);
  if (c < segs_[rank_] || c + len > segs_[rank_] + bytes_) return -1;
  return c - segs_[rank_];
}

ShmContext::ShmContext(Communicator& comm, size_t slot_bytes)
    : comm_(comm), rank_(comm.rank()), size_(comm.size()), slot_bytes_((slot_bytes + 63) / 64 * 64) {
  static_assert(sizeof(Header) <= kHeaderBytes, "header must fit");
  static_assert(offsetof(Header, inline_data) + sizeof(Header::inline_data) <= 64,
                "allreduce_small's inline data shares the arrival counter's cache line");
  seg_bytes_ = kHeaderBytes + 2 * slot_bytes_;
  segs_.assign(size_, nullptr);
  pids_.assign(size_, 0);
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // The job's ranks on this host, not this group's: a dp or pipeline group of 2 in an
  // 8-rank job on 2 cores shares them with the other 6, so it must not spin, nor run the
  // 2-rank round-trip probe (it spun ~0.1 s of CPU per rank there, for a meaningless verdict).
  host_ranks_ = std::max(size_, comm.transport().ranks_on_host());
  spin_ranks_per_core_ = static_cast<int>((static_cast<unsigned>(host_ranks_) + cores - 1) / cores);
  cores_ = cores;
  yield_ns_ = static_cast<int64_t>(comm.coll_config().shm_yield_us * 1000);
  std::random_device rd;
  segs_ = map_host_segments(comm, seg_bytes_, "dtrain-coll-rank", [&](char* mine) {
    new (mine) Header();
    reinterpret_cast<Header*>(mine)->pid = ::getpid();
    reinterpret_cast<Header*>(mine)->id = (static_cast<uint64_t>(rd()) << 32) | rd();
  });
  for (int q = 0; q < size_; ++q) pids_[q] = header(q)->pid;
  if (!oversubscribed()) slots_allgather_max_ = last_level_cache_bytes();
  // Ranks beyond the cores time both paths too (count_decision), without a verdict.
  if (size_ > 1 && oversubscribed() && comm.coll_config().shm_timed_paths && comm.coll_config().shm_reprobe_ms > 0) {
    timed_paths_ = true;
    bytes_to_decide_ = kDecideBytes;
  }
  if (size_ == 2 && !oversubscribed()) {
    const CoreDistance stated = comm.coll_config().shm_cores;
    if (stated == CoreDistance::kProbe) {
      distance_from_ = "probe";
      reprobe_ns_ = comm.coll_config().shm_reprobe_ms * 1000000;
      timed_paths_ = reprobe_ns_ > 0 && comm.coll_config().shm_timed_paths;  // decided at re-probes only
      probe_peers(Deadline::after(comm.timeout()), true);
    } else {
      distance_from_ = "DTRAIN_SHM_CORES";
      slots_allreduce_min_ = stated == CoreDistance::kClose ? kSlotsAllreduceCloseMinBytes : kSlotsAllreduceFarMinBytes;
      cores_far_ = stated == CoreDistance::kFar;
    }
  }
}

// Two ranks with a core each bounce a counter through their probe lines: the round trip
// tells whether their cores are close (share a cache: 0.06-0.21 us on this VM at times) or
// far apart (0.33-0.57 us at others, docs/history/sittings.md "the VM has two modes"), which
// decides where the slots beat cross-memory reads (coll/shm_direct.cc): the all-reduce's
// threshold, and whether the all-gather, reduce-scatter and broadcast take the slots at all.
// Rank 0 times batches of kProbeBatch round trips after a warm-up and takes the median
// batch (a preemption inside the probe spoils one batch, not the verdict), decides, and
// publishes the verdict, with how many bytes of distance-dependent calls to make before the
// next probe, before its last count, so both ranks take the same path from the same call on.
// The first probe (construction) times 32 batches, ~40-150 us; a re-probe (after_call) 8.
//
// The VM moves its vCPUs: a pinned pair of threads read 60, 140 or 560 ns a round trip,
// flipping within 0.1-2 s (20 s sampled every 100 ms: 179 close, 21 far, 8 flips), so one
// verdict per communicator is stale for much of a longer job. Re-probing is scheduled in
// the calls' bytes, not time, so that both ranks agree on when without a message: rank 0
// sets the next budget from the bytes' rate so that one probe falls every ~reprobe_ns_
// (DTRAIN_SHM_REPROBE_MS).
void ShmContext::probe_peers(const Deadline& deadline, bool first) {
  constexpr uint64_t kProbeBatch = 8;
  const uint64_t warm = first ? 32 : 4, batches = first ? 32 : 8;
  const int peer = 1 - rank_;
  std::atomic<uint64_t>& mine = header(rank_)->probe;
  const std::atomic<uint64_t>& theirs = header(peer)->probe;
  auto await = [&](uint64_t v) {
    for (uint64_t i = 1; theirs.load(std::memory_order_acquire) < v; ++i) {
      cpu_relax();
      if (i % 4096 != 0) continue;
      if (deadline.expired())
        DT_THROW(Timeout, "ShmContext: rank " << peer << " did not answer the round-trip probe in " << comm_.timeout()
                                              << " s (rank " << rank_ << " waiting)");
      if (i % (1u << 16) == 0) {
        const std::string gone = comm_.transport().peer_gone(peer);
        if (!gone.empty())
          throw PeerFailure("rank " + std::to_string(rank_) + ": the shared-memory round-trip probe failed: rank " +
                                std::to_string(peer) + " is gone [" + gone + "]",
                            peer);
      }
    }
  };
  const uint64_t base = probe_count_, last = base + warm + batches * kProbeBatch;
  if (rank_ == 0) {
    std::vector<int64_t> times;
    times.reserve(batches);
    int64_t t0 = 0;
    for (uint64_t i = base + 1; i <= last; ++i) {
      if (i > base + warm && (i - base - warm - 1) % kProbeBatch == 0) {
        const int64_t t = now_ns();
        if (t0) times.push_back(t - t0);
        t0 = t;
      }
      mine.store(i, std::memory_order_release);
      await(i);
    }
    times.push_back(now_ns() - t0);
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    round_trip_ns_ = times[times.size() / 2] / static_cast<int64_t>(kProbeBatch);
    // The next budget: the bytes charged since the last probe, scaled to reprobe_ns_ by the
    // time they took (at most 8x either way per probe), 0 when re-probing is off.
    const int64_t now = now_ns();
    uint64_t every = 0;
    // The rate comes from the interval just ended, whatever its budget was; the budget moves
    // at most 8x either way from the last regular one (an exploring interval is shorter).
    if (reprobe_ns_ > 0) {
      every = kFirstProbeBytes;
      if (!first && probe_every_ > 0) {
        const double scale = static_cast<double>(reprobe_ns_) / static_cast<double>(std::max<int64_t>(1, now - last_probe_ns_));
        const double regular = static_cast<double>(regular_every_);
        every = static_cast<uint64_t>(std::clamp(std::clamp(static_cast<double>(probe_every_) * scale, regular / 8, regular * 8),
                                                 static_cast<double>(kProbeCallFloorBytes),
                                                 static_cast<double>(kMaxProbeBytes)));
      }
      regular_every_ = every;
    }
    last_probe_ns_ = now;
    header(rank_)->slots_from = round_trip_ns_ < kCloseRoundTripNs ? kSlotsAllreduceCloseMinBytes : kSlotsAllreduceFarMinBytes;
    uint64_t explore_bytes = 0;
    header(rank_)->path_mask = timed_paths_ ? tuner_.decide(round_trip_ns_ >= kCloseRoundTripNs, &explore_bytes) : 0;
    // While a path is being tried, the next probe comes as soon as it can have been timed.
    if (explore_bytes > 0) every = std::clamp<uint64_t>(explore_bytes, kProbeCallFloorBytes, every);
    header(rank_)->probe_every = every;
    mine.store(last + 1, std::memory_order_release);
  } else {
    for (uint64_t i = base + 1; i <= last; ++i) {
      await(i);
      mine.store(i, std::memory_order_release);
    }
    await(last + 1);
  }
  probe_count_ = last + 1;
  const bool was_far = cores_far_;
  slots_allreduce_min_ = static_cast<size_t>(header(0)->slots_from);
  cores_far_ = slots_allreduce_min_ >= kSlotsAllreduceFarMinBytes;
  probe_every_ = header(0)->probe_every;
  path_mask_ = header(0)->path_mask;
  bytes_to_probe_ = probe_every_;
  ++probes_;
  if (!first && was_far != cores_far_) ++flips_;
}

// Ranks beyond the cores have no verdict of their cores' distance (a probe between two of
// them times the scheduler, not the caches), yet it decides their paths as it does with a
// core each: 4 ranks on the EPYC VM's 2 cores (bench collectives, the slots against
// DTRAIN_SHM_SLOTS_BYTES=0, 2026-11-30), the cores far, the reads took 0.3-0.6x the slots'
// time from 256 KiB (all-reduce 16 MiB 5.3 against 15.1 ms, reduce-scatter 4 MiB 0.54
// against 2.3, all-gather 1 MiB 172 against 342 us), while close the slots were 1.0-1.7x
// ahead (all-reduce 1 MiB 288-361 against 383-618 us). So the tuner times both paths as
// the calls go, under one verdict, and decides every kDecideBytes of calls. Every rank
// counts the same calls, so all reach each decision after the same call N; rank 0 decides
// and writes the mask into its header, and every rank applies it from call N + 2: by then
// call N + 1's full phase has shown each rank that rank 0 arrived there, after writing.
// Rank 0 overwrites that header slot only two decisions later, after call N + 2 has
// completed, so after every rank has read it (a take_slots comes before the call's phases).
// Where a decision follows every call (calls of kDecideBytes and more) two wait at once, one
// per slot, and take effect in order; one that no take_slots read before its slot came round
// again is dropped, on every rank at the same call.
void ShmContext::count_decision(size_t bytes) {
  ++calls_;
  const uint64_t charge = std::max<uint64_t>(bytes, kProbeCallFloorBytes);
  if (charge < bytes_to_decide_) {
    bytes_to_decide_ -= charge;
    return;
  }
  bytes_to_decide_ = kDecideBytes;
  const int slot = static_cast<int>(decisions_ & 1);
  if (rank_ == 0) {
    uint64_t explore_bytes = 0;  // a try lasts a whole interval here (the interval is short)
    header(0)->decided_mask[slot].store(tuner_.decide(false, &explore_bytes), std::memory_order_relaxed);
  }
  ++decisions_;
  // (A decision two before, in this slot, that no take_slots applied is dropped, on every
  // rank at this same call.)
  mask_from_[slot] = calls_ + 1;
}

bool ShmContext::paths_exploring(CollOp op, size_t bytes) const {
  if (rank_ != 0 || !timed_paths_ || bytes > comm_.coll_config().shm_slots_bytes) return false;
  return tuner_.exploring(cores_far_, PathTuner::entry(op, bytes));
}

bool ShmContext::take_slots(CollOp op, size_t bytes) {
  // The decisions due, the older first: with calls of kDecideBytes or more a decision comes
  // after every call, and each must still take effect two calls later (one pending decision
  // replaced by the next never did: every 4-rank call from 16 MiB stayed on the fixed rule).
  // The last decision wrote slot (decisions_ - 1) & 1, the one before it slot decisions_ & 1.
  const int older = static_cast<int>(decisions_ & 1);
  for (const int slot : {older, 1 - older}) {
    if (mask_from_[slot] >= 0 && calls_ >= mask_from_[slot]) {
      path_mask_ = header(0)->decided_mask[slot].load(std::memory_order_relaxed);
      mask_from_[slot] = -1;
    }
  }
  const bool fixed = shm_direct_takes_slots(op, comm_, this, bytes);
  const int e = timed_paths_ ? PathTuner::entry(op, bytes) : -1;
  if (e < 0) return fixed;
  const bool slots = PathTuner::decided(path_mask_, e)
                         ? PathTuner::takes_slots(path_mask_, e) && bytes <= comm_.coll_config().shm_slots_bytes
                         : fixed;
  (slots ? slots_calls_ : reads_calls_) += 1;
  if (rank_ == 0) {
    timed_entry_ = e;
    timed_slots_ = slots;
    timed_far_ = cores_far_;
    timed_bytes_ = bytes;
    timed_start_ns_ = now_ns();
  }
  return slots;
}

// The call timed since take_slots has completed on rank 0; a call of other bytes is another
// call (one whose timing was never ended: it threw, or fell back to another algorithm).
void ShmContext::end_timing(size_t bytes) {
  if (bytes == timed_bytes_) tuner_.record(timed_far_, timed_entry_, timed_slots_, now_ns() - timed_start_ns_, bytes);
  timed_entry_ = -1;
}

void ShmContext::count_call(size_t bytes, double timeout_s) {
  (cores_far_ ? far_calls_ : close_calls_) += 1;
  const uint64_t charge = std::max<uint64_t>(bytes, kProbeCallFloorBytes);
  if (charge < bytes_to_probe_) {
    bytes_to_probe_ -= charge;
    return;
  }
  bytes_to_probe_ = 0;
  probe_peers(Deadline::after(timeout_s), false);
}

ShmContext::~ShmContext() { unmap_host_segments(segs_, seg_bytes_); }

ShmContext::Header* ShmContext::header(int rank) const { return reinterpret_cast<Header*>(segs_[rank]); }

char* ShmContext::slot(int rank, uint64_t phase) const {
  return segs_[rank] + kHeaderBytes + (phase & 1) * slot_bytes_;
}

char* ShmContext::small_area(int rank, uint64_t phase, size_t bytes) const {
  return bytes <= kInlineBytes ? reinterpret_cast<char*>(header(rank)->inline_data[phase & 1]) : slot(rank, phase);
}

void ShmContext::publish_call(const Fingerprint& fp) {
  Header* h = header(rank_);
  uint32_t v = h->current_version.load(std::memory_order_relaxed);
  h->current_version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  h->current = fp;
  h->current_version.store(v + 2, std::memory_order_release);
}

bool ShmContext::current_call(int q, Fingerprint* out) const {
  const Header* h = header(q);
  uint32_t v1 = h->current_version.load(std::memory_order_acquire);
  if (v1 == 0 || (v1 & 1)) return false;
  *out = h->current;
  std::atomic_thread_fence(std::memory_order_acquire);
  return h->current_version.load(std::memory_order_relaxed) == v1;
}

void ShmContext::check_peer_call(int q, const Fingerprint& mine, uint64_t phase) {
  // A peer that has not arrived is either late or elsewhere: in another call with this number,
  // or already past it (it skipped this one). "Past it" needs a second look: the peer may
  // have arrived, finished this call and entered the next one since we last read its arrival
  // counter. It publishes its next call only after that arrival, so once we have read the
  // next call (an acquire), a fresh read of the counter shows the arrival if it happened.
  Fingerprint theirs;
  if (!current_call(q, &theirs)) return;
  if (theirs.seq < mine.seq || (theirs.seq == mine.seq && same_call(theirs, mine))) return;
  if (header(q)->arrived.load(std::memory_order_acquire) >= phase) return;
  DT_THROW(Desync, report_desync(comm_, mine, q, theirs));
}

namespace {
uint64_t digest(const Fingerprint& f) {
  // Every field same_call compares, mixed (splitmix64 steps); equal calls give equal digests.
  uint64_t x = f.seq * 0x9E3779B97F4A7C15ull;
  auto mix = [&](uint64_t v) {
    x ^= v + 0x9E3779B97F4A7C15ull + (x << 6) + (x >> 2);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
  };
  mix(f.count);
  mix((uint64_t{f.algorithm} << 56) | (static_cast<uint64_t>(static_cast<uint32_t>(f.root)) << 24) |
      (uint64_t{f.op} << 16) | (uint64_t{f.dtype} << 8) | f.redop);
  return x;
}
}  // namespace

void ShmContext::arrive(uint64_t phase, const Fingerprint* fp) {
  Header* h = header(rank_);
  if (fp) {
    h->fp[phase & 1] = *fp;
    h->fp_digest[phase & 1] = digest(*fp);
  }
  tsan_release(tsan_key(h->id, 0));  // see base/tsan.h
  h->arrived.store(phase, std::memory_order_release);
  // The doorbell (an eventcount) wakes a peer that went to sleep. Bumping it is a locked
  // read-modify-write of the line the peers have just read: the core stalls until that line
  // is its own again, which with the cores far apart is a round trip between them on every
  // call (2-rank 8-byte all-reduce 0.64-0.67 us, OpenMPI 0.51-0.54; with this 0.48-0.51,
  // 2026-12-01, three interleaved rounds, cores far). With a core per rank a peer sleeps only
  // after spinning kSpinNs (wait_for), so the bump is skipped while no peer sleeps: the plain
  // store retires into the store buffer and the wait below reads the peer's line meanwhile.
  // The sleepers count read here may be stale (no StoreLoad fence: that fence is the stall
  // avoided), so a peer that began to sleep in that instant may miss this wake; it wakes at
  // its 1 ms timeout (wait_for) and finds the arrival. With more ranks than cores the peers
  // sleep within microseconds, often, and the full eventcount stays.
  if (!oversubscribed() && h->sleepers.load(std::memory_order_relaxed) == 0) return;
  h->doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (h->sleepers.load(std::memory_order_seq_cst) > 0) futex_wake(&h->doorbell);
}

void ShmContext::wait_all(uint64_t phase, const Deadline& deadline, const std::function<std::string()>& what,
                          size_t busy_bytes, const Fingerprint* fp) {
  for (int q = 0; q < size_; ++q)
    if (q != rank_) wait_for(q, phase, deadline, what, busy_bytes, fp);
  // Everyone arrived: at this phase, in the same call? (A rank in another call would read
  // this phase's slots as something else.)
  if (fp) {
    const uint64_t mine = header(rank_)->fp_digest[phase & 1];
    for (int q = 0; q < size_; ++q)
      if (header(q)->fp_digest[phase & 1] != mine && !same_call(header(q)->fp[phase & 1], *fp)) throw_desync(phase);
  }
}

void ShmContext::wait_for(int q, uint64_t phase, const Deadline& deadline, const std::function<std::string()>& what,
                          size_t busy_bytes, const Fingerprint* fp) {
  // Three stages, each bounded, until the peer arrives:
  // - spin (pause loop) for kSpinNs while ranks fit the cores: the peer is running and
  //   about to arrive, and a sleeping rank costs a wake-up (tens of us on a VM, where waking
  //   an idle vCPU is an inter-processor interrupt through the hypervisor);
  // - yield for up to yield_ns_ (DTRAIN_SHM_YIELD_US) when ranks outnumber the cores: the core goes to another
  //   rank of this job that is runnable on it (the one we are waiting for, often), which is
  //   how OpenMPI's --oversubscribe mode keeps small collectives at a few us. On a machine
  //   busy with other processes one yield can cost a whole time slice (~1 ms, measured in
  //   the transport); the budget is wall time, so that case falls through to sleeping
  //   after the first yield;
  // - sleep on the peer's doorbell (an eventcount: read the doorbell, re-check, sleep only
  //   if it has not moved), waking at least every millisecond to check the deadline and
  //   whether the peer's process still exists.
  constexpr int64_t kSpinNs = 50000;
  const bool oversubscribed = spin_ranks_per_core_ > 1;
  const int64_t busy_ns = static_cast<int64_t>(std::min<size_t>(busy_bytes / 4, 2000000));
  Header* h = header(q);
  if (h->arrived.load(std::memory_order_acquire) < phase) {
    // Spinning, the clock starts at the 64th pause: most small calls' peers arrive before
    // it, and a clock read is tens of ns on a VM (kvm-clock).
    int64_t until = oversubscribed ? now_ns() + yield_ns_ + busy_ns : -1;
    for (int i = 0; h->arrived.load(std::memory_order_acquire) < phase; ++i) {
      if (oversubscribed) {
        if (now_ns() > until) break;
        sched_yield();
      } else {
        if (i % 64 == 63) {
          const int64_t t = now_ns();
          if (until < 0) until = t + kSpinNs + busy_ns;
          else if (t > until) break;
        }
        cpu_relax();
      }
    }
    while (h->arrived.load(std::memory_order_acquire) < phase) {
      h->sleepers.fetch_add(1, std::memory_order_seq_cst);
      uint32_t seen = h->doorbell.load(std::memory_order_seq_cst);
      if (h->arrived.load(std::memory_order_acquire) < phase) futex_wait(&h->doorbell, seen, 1000);
      h->sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (h->arrived.load(std::memory_order_acquire) >= phase) break;
      // The same liveness verdict the transport gives its own waiters (a closed transport,
      // an exited process), so a dead rank reads alike on every path.
      std::string gone = comm_.transport().peer_gone(q);
      if (gone.empty() && pids_[q] != ::getpid() && ::kill(static_cast<pid_t>(pids_[q]), 0) != 0 && errno == ESRCH) {
        gone = "rank " + std::to_string(q) + " (pid " + std::to_string(pids_[q]) + ") exited";
        tell_launcher_a_peer_failed();
      }
      if (fp) check_peer_call(q, *fp, phase);
      if (!gone.empty())
        throw PeerFailure("rank " + std::to_string(rank_) + ": " + what() + " failed: rank " + std::to_string(q) +
                              " is gone [" + gone + "]",
                          q);
      if (deadline.expired()) {
        std::ostringstream os;
        os << "rank " << rank_ << ": " << what() << " timed out; never reached by";
        for (int r = 0; r < size_; ++r)
          if (r != rank_ && header(r)->arrived.load(std::memory_order_acquire) < phase) os << " rank " << r;
        DT_THROW(Timeout, os.str());
      }
    }
  }
  tsan_acquire(tsan_key(h->id, 0));  // pairs with arrive(); base/tsan.h
}

bool ShmContext::same_call(const Fingerprint& a, const Fingerprint& b) {
  return a.seq == b.seq && a.count == b.count && a.dtype == b.dtype && a.redop == b.redop && a.op == b.op &&
         a.root == b.root && a.algorithm == b.algorithm;
}

void ShmContext::throw_desync(uint64_t phase) {
  // Every rank sees every rank's call, so each names the same culprits: the ranks whose call
  // differs from what most ranks called (all of them when no call has a majority).
  // A record from another call number is stale (a pipelined path arrives at its chunk
  // phases without one): the call the peer has published as its current one names it better.
  std::vector<Fingerprint> records(static_cast<size_t>(size_));
  std::vector<const Fingerprint*> calls(static_cast<size_t>(size_));
  for (int q = 0; q < size_; ++q) {
    records[q] = header(q)->fp[phase & 1];
    Fingerprint now;
    if (q != rank_ && records[q].seq != header(rank_)->fp[phase & 1].seq && current_call(q, &now)) records[q] = now;
    calls[q] = &records[q];
  }
  int common = 0, common_votes = 0;
  for (int q = 0; q < size_; ++q) {
    int votes = 0;
    for (int r = 0; r < size_; ++r) votes += same_call(*calls[q], *calls[r]);
    if (votes > common_votes) common = q, common_votes = votes;
  }
  const bool majority = common_votes * 2 > size_;
  std::ostringstream m, agreeing;
  m << "rank " << rank_ << ": collective desync:";
  int n_agree = 0;
  for (int q = 0; q < size_; ++q) {
    if (majority && same_call(*calls[q], *calls[common]))
      agreeing << (n_agree++ ? ", " : " ") << q;
    else
      m << " rank " << q << " called " << calls[q]->describe() << " as collective #" << calls[q]->seq << ";";
  }
  if (majority)
    m << " rank" << (n_agree > 1 ? "s" : "") << agreeing.str() << " called " << calls[common]->describe()
      << " as collective #" << calls[common]->seq;
  for (int q = 0; q < size_; ++q)  // for the ranks on the message path, which learn of it second-hand
    if (!same_call(*calls[q], *calls[rank_])) {
      report_desync(comm_, *calls[rank_], q, *calls[q]);
      break;
    }
  DT_THROW(Desync, m.str());
}

uint64_t ShmContext::start_exchange_small(const void* mine, size_t bytes, size_t write_bytes, const Fingerprint& fp) {
  DT_CHECK(bytes <= slot_bytes_ && write_bytes <= bytes, InvalidArgument,
           "ShmContext: " << bytes << " bytes exceed the slot");
  const uint64_t phase = next_phase();
  publish_call(fp);
  const bool broadcast = fp.op == static_cast<uint8_t>(CollOp::kBroadcast);
  if (broadcast ? broadcast_streams(write_bytes) : streams_to_peers(write_bytes))
    copy_bytes_streaming(small_area(rank_, phase, bytes), mine, write_bytes);
  else
    copy_bytes(small_area(rank_, phase, bytes), mine, write_bytes);
  arrive(phase, &fp);
  return phase;
}

void ShmContext::finish_exchange_small(uint64_t phase, size_t bytes, const Fingerprint& fp, const Deadline& deadline) {
  // The error text's lambda captures one reference, so std::function keeps it inline (no
  // allocation per call: a capture of three references did allocate).
  wait_all(
      phase, deadline,
      [&fp] {
        std::ostringstream what;
        what << coll_op_name(static_cast<CollOp>(fp.op)) << " #" << fp.seq << " (shm_direct, "
             << dtype_name(static_cast<DType>(fp.dtype)) << " x " << fp.count << ")";
        return what.str();
      },
      0, &fp);
  small_phase_ = phase;
  small_bytes_ = bytes;
}

const char* ShmContext::small_of(int rank) const { return small_area(rank, small_phase_, small_bytes_); }

void ShmContext::reduce_small(void* out, size_t offset, size_t count, DType t, ReduceOp op) {
  std::vector<const void*>& in_rank_order = inputs_;
  in_rank_order.resize(static_cast<size_t>(size_));
  for (int q = 0; q < size_; ++q) in_rank_order[q] = small_of(q) + offset;
  if (count) reduce_ordered(t, op, out, in_rank_order.data(), size_, count);
  if (op == ReduceOp::kAvg) finish_avg(t, out, count, size_);
}

void ShmContext::allreduce_small(void* buf, size_t count, DType t, ReduceOp op, const Fingerprint& fp,
                                 const Deadline& deadline) {
  const size_t bytes = count * dtype_size(t);
  exchange_small(buf, bytes, bytes, fp, deadline);
  reduce_small(buf, 0, count, t, op);
}

}  // namespace dtrain

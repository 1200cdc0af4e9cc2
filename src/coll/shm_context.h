// coll/shm_context.h — persistent shared memory among the ranks of one host, for the
// shared-memory fast paths of the collectives.
//
// Contract
// - ShmContext(comm, slot_bytes) is collective over comm (every rank on one host: each maps
//   every other rank's segment, an anonymous memfd published through comm.store() and opened
//   through /proc, comm/shm_segment.h: nothing is ever left in /dev/shm). It meets through
//   the store only (no collective sequence number is drawn) and names a peer that died
//   meanwhile. A communicator on an shm transport builds its own with it (kShmContextKey,
//   unless DTRAIN_SHM_CONTEXT=0), which every collective uses; a caller may also build one and
//   pass it in the options (CollOptions::shm); it must outlive the calls that use it.
// - A segment holds an arrival counter (own cache line), two fingerprint records and two
//   data slots of slot_bytes, used alternately: phase k writes slot k%2 only after every rank
//   has arrived at phase k-1, so nobody still reads it.
// - Full phases (arrive + wait_all) keep that rule by themselves. A pipelined path (reserve
//   phases with next_phases, arrive at each without waiting for all, wait_for one peer) keeps
//   it by writing only the slot of its first phase and ending with a full phase whose number
//   has that slot's parity (so its fingerprint record was last compared two full phases ago).
// - arrive(k) publishes "I reached phase k" and rings the rank's doorbell (a futex word);
//   wait_all(k, deadline) spins for ~10 us when ranks fit the cores, then sleeps on each
//   missing peer's doorbell until every rank has arrived, throwing Timeout naming the ranks
//   that did not arrive, and PeerFailure ("rank q is gone") when the peer's transport is
//   closed or its process has exited (Transport::peer_gone, checked every millisecond).
// - exchange_small(): one phase that carries each rank's data (broadcast, all-gather and
//   reduce-scatter of a few KiB take it, coll/collectives.cc); allreduce_small() is built on it.
// - allreduce_small(): the all-reduce of a buffer that fits a slot in ONE phase: write data +
//   fingerprint, arrive, wait, check every rank's fingerprint (Desync naming the ranks whose
//   call differs from the majority's, and what each called),
//   reduce all slots in rank order (bit-identical everywhere, deterministic). Up to
//   kInlineBytes the data goes on the arrival counter's cache line instead of the slot (same
//   parity rule), so a waiter gets a peer's arrival and data in one transfer.
// Thread-safety: one collective at a time per context, like the communicator.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "base/clock.h"
#include "coll/call.h"
#include "coll/communicator.h"
#include "coll/config.h"
#include "coll/path_tuner.h"
#include "coll/types.h"

namespace dtrain {

// The key under which a communicator keeps its own context (Communicator::attachment): built
// with the communicator when its transport is shm and CollConfig::shm_context is on.
inline constexpr const char* kShmContextKey = "coll/shm_context";

class ShmContext {
 public:
  static constexpr size_t kInlineBytes = 16;
  explicit ShmContext(Communicator& comm, size_t slot_bytes = 64 << 10);
  ~ShmContext();
  ShmContext(const ShmContext&) = delete;
  ShmContext& operator=(const ShmContext&) = delete;

  Communicator& comm() { return comm_; }
  // More of the job's ranks on this host than cores (all of them, not only this group's):
  // waits yield and sleep rather than spin.
  bool oversubscribed() const { return spin_ranks_per_core_ > 1; }
  // Whether the host has cores beyond one per rank of the job (for a rank's helper threads).
  bool spare_cores() const { return cores_ > static_cast<unsigned>(host_ranks_); }
  size_t slot_bytes() const { return slot_bytes_; }
  bool serves(const Communicator& c) const { return &c == &comm_; }
  // This rank's process id when the context was built (the shm-direct paths ask it, not the
  // kernel, on every call).
  int64_t own_pid() const { return pids_[rank_]; }

  // Next phase number (same on every rank as long as all use the context in the same order).
  uint64_t next_phase() { return ++phase_; }
  // Reserves m consecutive phase numbers and returns the first (the pipelined paths).
  uint64_t next_phases(uint64_t m) {
    const uint64_t first = phase_ + 1;
    phase_ += m;
    return first;
  }
  char* my_slot(uint64_t phase) { return slot(rank_, phase); }
  const char* slot_of(int rank, uint64_t phase) { return slot(rank, phase); }
  // fp (when given) is the call this phase belongs to: waiters compare it (Desync on mismatch).
  void arrive(uint64_t phase, const Fingerprint* fp = nullptr);
  // `what` names the operation in a Timeout/PeerFailure message; it is only called then.
  // busy_bytes: how much the slowest peer may still be copying before it arrives (0 when
  // unknown); while ranks fit the cores the waiter spins that much longer (at ~4 GB/s,
  // capped at 2 ms) instead of sleeping, because waking a sleeper costs more than the wait.
  // fp (when given): every rank's phase must carry the same call, and a peer found (while
  // waiting) in another call with this number, or past it, is a Desync naming both calls.
  void wait_all(uint64_t phase, const Deadline& deadline, const std::function<std::string()>& what,
                size_t busy_bytes = 0, const Fingerprint* fp = nullptr);
  // Waits for peer q alone to reach phase (a pipelined path's per-chunk handshake): the same
  // spin/yield/sleep stages, liveness verdict and deadline as wait_all; fp (when given) turns
  // a peer found in another call into a Desync. Compares no fingerprint records.
  void wait_for(int q, uint64_t phase, const Deadline& deadline, const std::function<std::string()>& what,
                size_t busy_bytes = 0, const Fingerprint* fp = nullptr);
  // Publishes the call this rank has entered (every collective that was given this context
  // does, on either path), for check_peer_call on the waiting ranks.
  void publish_call(const Fingerprint& fp);
  // The call rank q last published (false while it has published none, or is rewriting it).
  bool current_call(int q, Fingerprint* out) const;

  // Whether the ranks agreed that cross-memory reads (process_vm_readv) work among them:
  // -1 not probed yet, 0 refused, 1 allowed. Set once by the shm-direct algorithms.
  int cross_memory_reads() const { return cross_memory_reads_; }
  void set_cross_memory_reads(bool ok) { cross_memory_reads_ = ok ? 1 : 0; }

  // One full phase that carries data: writes write_bytes of `mine` into this rank's area for
  // a `bytes`-sized exchange (every rank passes the same `bytes`; write_bytes may be 0, as
  // a broadcast's readers pass), arrives, waits for every rank and compares the calls (fp).
  // Afterwards small_of(q) is rank q's area, readable until the phase after next: the
  // caller reads what it needs before its next collective on this context.
  void exchange_small(const void* mine, size_t bytes, size_t write_bytes, const Fingerprint& fp,
                      const Deadline& deadline) {
    finish_exchange_small(start_exchange_small(mine, bytes, write_bytes, fp), bytes, fp, deadline);
  }
  // The same phase in two halves, so that work needing nothing from the peers (an
  // all-gather's own block into place) runs between arriving and waiting, while the slowest
  // rank still writes: start returns the phase, which finish waits for.
  uint64_t start_exchange_small(const void* mine, size_t bytes, size_t write_bytes, const Fingerprint& fp);
  void finish_exchange_small(uint64_t phase, size_t bytes, const Fingerprint& fp, const Deadline& deadline);
  const char* small_of(int rank) const;
  // After exchange_small: out = the `count` elements at byte `offset` of every rank's area,
  // reduced in rank order (avg finished), as the all-reduce and reduce-scatter need.
  void reduce_small(void* out, size_t offset, size_t count, DType t, ReduceOp op);
  void allreduce_small(void* buf, size_t count, DType t, ReduceOp op, const Fingerprint& fp, const Deadline& deadline);
  // Up to how many bytes a call is exchange_small's one phase (coll/collectives.cc): every
  // rank reads every area, p x bytes each, which beyond 64 KiB costs more than shm_direct's
  // one read of each peer's slice. Never more than the slot.
  size_t small_allreduce_bytes() const { return std::min(slot_bytes_, kSmallAllreduceBytes); }
  static constexpr size_t kSmallAllreduceBytes = size_t{64} << 10;
  // The all-reduce's one phase with two ranks' cores far apart: to 32 KiB. Its areas are
  // written with stores that bypass the caches there (streams_to_peers), without which one
  // phase lost to the reads from 16 KiB (2 ranks, EPYC VM, 8-byte round trip 0.3-0.4 us: 32
  // KiB 9.8-10.0 us against 7.9-8.3 through the reads, 64 KiB 13.7-14.4 against 9.5-10.1).
  // Streamed (2026-12-01, two interleaved rounds, the cores far): 32 KiB 7.5-8.0 us against
  // 8.8-9.0 through the reads, 64 KiB 13.7-15.0 against 12.5-13.1.
  static constexpr size_t kSmallAllreduceFarBytes = size_t{32} << 10;
  // Whether exchange_small writes an area of `bytes` with non-temporal stores: with two
  // ranks whose cores are far apart, from kStreamToPeersMinBytes. Its lines were read by the
  // peer's core at the call before; rewriting them with plain stores first takes each back
  // across the cores, which on the EPYC VM runs at 2.3 GB/s with the cores far (9 GB/s
  // close), where streaming stores write at 28 and the peer reads them back from memory at
  // 28-34 (a two-thread ping-pong of 128 KiB-1 MiB). Far, one phase of 16 KiB (two
  // interleaved rounds): all-gather 4.7-5.4 -> 1.9-2.3 us, reduce-scatter 5.1-5.4 -> 2.8-2.9,
  // all-reduce 10.8-11.0 -> 4.3-4.4, broadcast 7.4-7.5 -> 1.6; 4 KiB: all-reduce 3.4 -> 1.8,
  // broadcast 1.5 -> 0.8. Close they lost: the peer reads from memory what it would have read
  // from the shared last-level cache (the reduce-scatter of 64 KiB 5.7 -> 8.7-9.0 us).
  bool streams_to_peers(size_t bytes) const { return cores_far_ && bytes >= kStreamToPeersMinBytes; }
  // A broadcast's one phase streams the root's write with the cores close too, from
  // kBroadcastStreamsBytes, at two ranks with a core each: there only the peer reads the area
  // back, and it reads it once (2 ranks close, four interleaved pairs, us: 16 KiB 1.91-2.27
  // -> 1.66-1.76, 32 KiB 3.89-4.26 -> 2.72-3.04, 64 KiB 7.65-8.19 -> 5.02-5.60). The
  // all-gather's did not gain (16 and 32 KiB lost 10-40%, 64 KiB even), nor where the writer
  // reads its own area back (the reduce-scatter and the all-reduce).
  bool broadcast_streams(size_t bytes) const {
    return streams_to_peers(bytes) || (size_ == 2 && !oversubscribed() && bytes >= kBroadcastStreamsBytes);
  }
  static constexpr size_t kBroadcastStreamsBytes = size_t{16} << 10;
  static constexpr size_t kStreamToPeersMinBytes = size_t{4} << 10;
  static constexpr size_t kProbedCallMinBytes = size_t{16} << 10;
  // Up to how many bytes an all-reduce is that one phase: small_allreduce_bytes(), but
  // kSmallAllreduceFarBytes with two ranks' cores far apart, and with
  // more ranks than cores kOnePhaseOversubscribedBytes / (ranks per core). There the ranks
  // share the cores, so one phase's p full reductions per call cost p times the CPU of the
  // slots' two phases, where each rank reduces 1/p of the buffer (allreduce_slots); the extra
  // phase is cheaper than that from a few KiB. Measured crossovers on 2 cores (EPYC VM,
  // bench collectives, one phase against the slots): 4 ranks 8 KiB (13.1 against 12.0 us;
  // 64 KiB 63 against 32), 8 ranks 4 KiB (27.8 against 28.4 us; 16 KiB 110 against 31-35).
  size_t one_phase_allreduce_bytes() const {
    const size_t limit = std::min(small_allreduce_bytes(), cores_far_ ? kSmallAllreduceFarBytes : kSmallAllreduceBytes);
    if (spin_ranks_per_core_ <= 1) return limit;
    return std::min(limit, kOnePhaseOversubscribedBytes / static_cast<size_t>(spin_ranks_per_core_));
  }
  static constexpr size_t kOnePhaseOversubscribedBytes = size_t{16} << 10;

  // From how many bytes an all-reduce with a core per rank takes the slots: decided once, at
  // construction, by a round-trip probe between two ranks (kSlotsAllreduceCloseMinBytes when
  // their cores proved close, else kSlotsAllreduceFarMinBytes; the same on both ranks), or by
  // CollConfig::shm_cores where that states the distance (no probe then).
  size_t slots_allreduce_min_bytes() const { return slots_allreduce_min_; }
  // Whether two ranks with a core each have their cores far apart (the probe's verdict or the
  // stated one, the same on both ranks; false for other rank counts). Then
  // all-gather, reduce-scatter and broadcast skip the slots at every size: with the cores far
  // apart each of a slot pipeline's phases costs a slow round trip, and the cross-memory
  // reads were 1.2-3x faster at every size from 64 KiB to 256 MiB (coll/shm_direct.cc).
  bool cores_far() const { return cores_far_; }
  // Up to how many bytes (the whole output) an all-gather takes the slots where the verdict
  // allows them: the host's last-level cache with a core per rank, every size when ranks
  // outnumber the cores. The slots copy every block twice (owner into its slot, slot into
  // each reader's output) where the cross-memory reads copy it once; while the output fits
  // the shared cache the second copy is nearly free and the slots' cheaper handshake wins,
  // past it both copies go to memory. 2 ranks on the EPYC VM (L3 32 MiB), three interleaved
  // rounds of slots against reads (DTRAIN_SHM_SLOTS_BYTES=0), both cores close: 16-32 MiB
  // 0.90-0.92x the reads' time, 64 MiB 1.34x, 128 MiB 1.45x, 256 MiB 1.26x (20-27 against
  // 17-19 ms at 64 MiB; OpenMPI 17-21 ms in the same minutes). Reduce-scatter keeps the slots
  // at every size: its reads reduce out of the peer's memory too, and the slots were
  // 0.44-0.90x the reads' time from 256 KiB to 256 MiB in the same rounds.
  size_t slots_allgather_max_bytes() const { return slots_allgather_max_; }
  // That probe's mean round trip of a cache line between the two ranks, on rank 0 (0 where
  // none ran: other rank counts, ranks beyond the cores, rank 1).
  int64_t round_trip_ns() const { return round_trip_ns_; }
  // Where the 2-rank verdict came from: "probe" or "DTRAIN_SHM_CORES" (stated); "" where
  // none was needed (other rank counts, ranks beyond the cores).
  const char* core_distance_from() const { return distance_from_; }
  // After a call of `bytes` on this context (the one phase or shm_direct) has completed on
  // this rank; every rank of the call makes it, in the same order. With two ranks whose
  // distance is probed (not stated), a call past kProbedCallMinBytes (16 KiB: below it the
  // verdict decides only whether the one phase streams its writes) counts towards the next
  // re-probe, which it runs when due: the VM moves its vCPUs within seconds, and the verdict follows every ~DTRAIN_SHM_REPROBE_MS
  // (CollConfig::shm_reprobe_ms; 0: the construction's probe only). ~10-40 us a probe,
  // which waits for the peer up to timeout_s. Inline: on every collective's way out, and
  // nothing to do for most of them.
  // With more ranks than cores the calls count towards the next decision of the paths
  // instead (no probe: count_decision says why).
  void after_call(size_t bytes, double timeout_s) {
    if (timed_entry_ >= 0) end_timing(bytes);
    if (bytes_to_probe_ != 0 && bytes > kProbedCallMinBytes) count_call(bytes, timeout_s);
    if (bytes_to_decide_ != 0) count_decision(bytes);
  }
  // Whether a shm_direct call of op and `bytes` on this context takes the slots (true) or the
  // cross-memory reads: where two ranks with a core each re-probe their distance, or ranks
  // outnumber the cores, the timed choice (coll/path_tuner.h) where it has decided this
  // call's op and size class, else the fixed rule (shm_direct_takes_slots); never the slots
  // past CollConfig::shm_slots_bytes.
  // Counts the call's path, and on rank 0 starts timing it (after_call ends that).
  bool take_slots(CollOp op, size_t bytes);
  // Rank 0: whether the timed choice for op and `bytes` is still learning (PathTuner::exploring,
  // under the current verdict): false where nothing is timed, or the slots cannot carry the
  // call (past CollConfig::shm_slots_bytes). Other ranks: false.
  bool paths_exploring(CollOp op, size_t bytes) const;
  // Calls take_slots counted on each path since construction (0 where nothing is timed);
  // the same on every rank.
  int64_t slots_calls() const { return slots_calls_; }
  int64_t reads_calls() const { return reads_calls_; }
  // Probes run (the construction's included), verdicts that changed at a re-probe, and the
  // distance-dependent calls made under each verdict (0 where no probe runs).
  int64_t probes() const { return probes_; }
  int64_t flips() const { return flips_; }
  int64_t close_calls() const { return close_calls_; }
  int64_t far_calls() const { return far_calls_; }
  // Re-probes are due by bytes, each call charged at least kProbeCallFloorBytes: both ranks
  // see the same bytes, and time per byte varies far less across sizes than time per call
  // does (an interval counted in calls and set among 64 KiB calls would last minutes among
  // 64 MiB ones). The first re-probe comes after kFirstProbeBytes; later budgets follow the
  // bytes' rate, up to kMaxProbeBytes.
  static constexpr uint64_t kProbeCallFloorBytes = uint64_t{64} << 10;
  static constexpr uint64_t kFirstProbeBytes = uint64_t{4} << 20;
  static constexpr uint64_t kMaxProbeBytes = uint64_t{1} << 40;
  // With more ranks than cores, the bytes between two decisions of the paths (each call
  // charged at least kProbeCallFloorBytes): ~5-15 ms of calls on the EPYC VM's 2 cores at 4
  // ranks, so a try of the slower path costs a few calls and a flip of the vCPUs' placement
  // is followed within the tuner's kExploreEvery decisions.
  static constexpr uint64_t kDecideBytes = uint64_t{16} << 20;
  // Decisions made (with more ranks than cores; 0 elsewhere), the same on every rank.
  int64_t decisions() const { return decisions_; }

 private:
  struct Header;
  Header* header(int rank) const;
  static bool same_call(const Fingerprint& a, const Fingerprint& b);
  void check_peer_call(int q, const Fingerprint& mine, uint64_t phase);
  [[noreturn]] void throw_desync(uint64_t phase);
  char* slot(int rank, uint64_t phase) const;
  // allreduce_small's data area: the header's inline bytes up to kInlineBytes, else the slot.
  char* small_area(int rank, uint64_t phase, size_t bytes) const;

  Communicator& comm_;
  int rank_, size_;
  size_t slot_bytes_, seg_bytes_;
  uint64_t phase_ = 0;
  std::vector<char*> segs_;
  std::vector<int64_t> pids_;
  std::vector<const void*> inputs_;  // reduce_small's areas in rank order
  uint64_t small_phase_ = 0;  // the last exchange_small's phase and size (small_of)
  size_t small_bytes_ = 0;
  int spin_ranks_per_core_ = 1;
  int host_ranks_ = 1;  // the job's ranks on this host (at least this group's)
  unsigned cores_ = 1;
  int64_t yield_ns_ = 100000;  // CollConfig::shm_yield_us
  int cross_memory_reads_ = -1;
  size_t slots_allreduce_min_ = kSlotsAllreduceFarMinBytes;  // probe_peers may lower it
  bool cores_far_ = false;                                 // probe_peers may set it
  int64_t round_trip_ns_ = 0;
  size_t slots_allgather_max_ = std::numeric_limits<size_t>::max();
  const char* distance_from_ = "";
  // Re-probing (probe_peers, after_call): the last value this rank stored on its probe line,
  // the bytes left before the next probe (0: none due), the budget rank 0 published and its
  // last regular one (a budget while a path is tried is shorter), rank 0's clock at the last
  // probe, and the counts reported above.
  uint64_t probe_count_ = 0, bytes_to_probe_ = 0, probe_every_ = 0, regular_every_ = kFirstProbeBytes;
  int64_t reprobe_ns_ = 0, last_probe_ns_ = 0;
  int64_t probes_ = 0, flips_ = 0, close_calls_ = 0, far_calls_ = 0;
  // The timed path choice (take_slots): rank 0's timings, the mask in force, the call being
  // timed (its entry, -1 for none; path; verdict; start; bytes) and the counts.
  bool timed_paths_ = false;
  PathTuner tuner_;
  uint64_t path_mask_ = 0;
  int timed_entry_ = -1;
  bool timed_slots_ = false, timed_far_ = false;
  int64_t timed_start_ns_ = 0;
  size_t timed_bytes_ = 0;
  // Ranks beyond the cores (count_decision): the bytes left before the next decision (0:
  // none made here), the calls completed, and the decisions waiting to take effect, per
  // header slot rank 0 wrote them in (decisions alternate): the call count from which each
  // holds, -1 for none.
  uint64_t bytes_to_decide_ = 0;
  int64_t calls_ = 0, decisions_ = 0;
  int64_t mask_from_[2] = {-1, -1};
  int64_t slots_calls_ = 0, reads_calls_ = 0;
  void end_timing(size_t bytes);
  void probe_peers(const Deadline& deadline, bool first);
  void count_call(size_t bytes, double timeout_s);
  void count_decision(size_t bytes);
};

// Whether the shared-memory direct algorithm of `op` (kShmDirect) carries a call of `bytes`
// through ctx's slots rather than cross-memory reads by the fixed rule: the choice
// coll/shm_direct.cc makes where the context times no paths (ShmContext::take_slots, which
// may override it), and for reports (`dtrain bench collectives` prints it). ctx null: never. A
// broadcast or all-reduce takes the slots when ranks outnumber the cores; with a core per
// rank the all-reduce from slots_allreduce_min_bytes() (an all-reduce up to
// small_allreduce_bytes() never gets here: it is one phase through the slots, decided by
// coll/collectives.cc), the broadcast up to 256 KiB, the
// all-gather up to slots_allgather_max_bytes() and the reduce-scatter at every size, none of
// them when cores_far(); always up to CollConfig::shm_slots_bytes.
bool shm_direct_takes_slots(CollOp op, const Communicator& comm, const ShmContext* ctx, size_t bytes);
// The same choice under the verdict `cores_far` in place of the context's current one (for
// reports of calls made under an earlier verdict: the context re-probes as calls go).
bool shm_direct_takes_slots_under(CollOp op, const Communicator& comm, const ShmContext* ctx, size_t bytes,
                                  bool cores_far);
// Whether a shm_direct call of `bytes` (the all-reduce's and broadcast's buffer, the
// all-gather's output of equal blocks, the reduce-scatter's input) is the context's one
// phase that carries the data (exchange_small): up to small_allreduce_bytes(), the
// all-reduce up to one_phase_allreduce_bytes().
bool shm_direct_one_phase(CollOp op, const Communicator& comm, const ShmContext* ctx, size_t bytes);
// Whether auto takes shm_direct for `bytes` without asking the cost model: up to
// kSmallAllreduceBytes (never past the slot), one phase or not (the all-reduce past its one
// phase: the slots' two phases with more ranks than cores, shm_direct_takes_slots; the reads
// for two ranks whose cores are far apart, 32-64 KiB).
bool shm_direct_preferred(CollOp op, const Communicator& comm, const ShmContext* ctx, size_t bytes);

// A window (MPI_Win_allocate_shared's shape): a buffer of `bytes` per rank in shared memory
// that every rank of the host maps. Collective over comm, through the store only, like
// ShmContext; every rank must be on one host. A buffer placed in it can be read by the peers
// where it lies: ddp keeps its gradients in one, and allreduce_apply given the window reads
// each rank's input straight from it, with no copy into the slots (coll/collectives.h).
// Thread-safety: the mapping is immutable; what is written in it is the users' business.
class ShmWindow {
 public:
  ShmWindow(Communicator& comm, size_t bytes);
  ~ShmWindow();
  ShmWindow(const ShmWindow&) = delete;
  ShmWindow& operator=(const ShmWindow&) = delete;

  char* mine() const { return segs_[rank_]; }
  char* of(int rank) const { return segs_[rank]; }
  size_t bytes() const { return bytes_; }
  bool serves(const Communicator& c) const { return &c == &comm_; }
  // Where [p, p + len) lies in this rank's buffer (bytes from its start); -1 outside it.
  int64_t offset_of(const void* p, size_t len) const;

 private:
  Communicator& comm_;
  int rank_;
  size_t bytes_;
  std::vector<char*> segs_;
};

// Creates this rank's segment of `bytes` (init fills it before anyone sees it), publishes it
// and maps every rank's (ShmContext and ShmWindow): index = rank.
std::vector<char*> map_host_segments(Communicator& comm, size_t bytes, const std::string& label,
                                     const std::function<void(char*)>& init);
// Unmaps what map_host_segments mapped (null entries skipped) and nulls the entries.
void unmap_host_segments(std::vector<char*>& segs, size_t bytes);

}  // namespace dtrain

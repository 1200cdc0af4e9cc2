#include "coll/path_tuner.h"

#include <algorithm>
#include <bit>

namespace dtrain {

int PathTuner::entry(CollOp op, size_t bytes) {
  int o = -1;
  switch (op) {
    case CollOp::kAllreduce: o = 0; break;
    case CollOp::kAllgather: o = 1; break;
    case CollOp::kReduceScatter: o = 2; break;
    case CollOp::kBroadcast: o = 3; break;
    default: return -1;
  }
  // Size class k holds (4^(k+7), 4^(k+8)] bytes: up to 64 KiB, 256 KiB, 1 MiB, ... (the
  // first and last take everything below and above).
  const int lg = bytes <= 1 ? 0 : static_cast<int>(std::bit_width(bytes - 1));  // ceil(log2)
  const int k = std::clamp((lg - 15) / 2, 0, kSizeClasses - 1);
  return o * kSizeClasses + k;
}

void PathTuner::record(bool far, int e, bool slots, int64_t ns, size_t bytes) {
  if (e < 0 || e >= kEntries) return;
  Entry& en = table_[far][e];
  Path& p = en.path[slots];
  en.used_at = decisions_;
  en.calls_since_try += 1;
  en.bytes_since_try += static_cast<double>(bytes);
  if (!p.warm) {  // the first call after a switch: not what the path costs (cold pages, caches)
    p.warm = true;
    if (bytes < kWarmBelowBytes) return;
  }
  p.ns += static_cast<double>(std::max<int64_t>(ns, 0));
  p.bytes += static_cast<double>(bytes);
  p.calls += 1;
}

bool PathTuner::exploring(bool far, int e) const {
  if (e < 0 || e >= kEntries) return false;
  const Entry& en = table_[far][e];
  if (en.used_at < 0) return false;  // no call timed: nothing to learn
  return en.trying >= 0 || en.path[0].estimate < 0 || en.path[1].estimate < 0;
}

uint64_t PathTuner::decide(bool far, uint64_t* explore_bytes) {
  *explore_bytes = 0;
  for (auto& verdict : table_)
    for (Entry& en : verdict)
      for (Path& p : en.path) {
        if (p.calls == 0 || (p.calls < kMinCalls && p.bytes < kMinBytes)) continue;
        const double now = p.ns / p.bytes;
        const bool stale = p.estimate < 0 || decisions_ - p.estimated_at >= kExploreEvery;
        p.estimate = stale ? now : 0.5 * p.estimate + 0.5 * now;
        p.estimated_at = decisions_;
        p.ns = p.bytes = 0;
        p.calls = 0;
      }
  uint64_t mask = 0;
  for (int e = 0; e < kEntries; ++e) {
    Entry& en = table_[far][e];
    const Path& reads = en.path[0];
    const Path& slots = en.path[1];
    if (reads.estimate < 0 && slots.estimate < 0) continue;  // undecided: the fixed rule
    int choice = reads.estimate < 0 ? 1 : slots.estimate < 0 ? 0 : slots.estimate < reads.estimate ? 1 : 0;
    const Path& other = en.path[1 - choice];
    // Calls of other entries come between (a bucket of each size per step; probes may be
    // due after every call): an entry counts as in use for kExploreEvery decisions.
    const bool used = en.used_at >= 0 && decisions_ - en.used_at < kExploreEvery;
    // A try lasts until the tried path has been timed (folded at this decision), or until
    // the entry's calls stop.
    if (en.trying >= 0 && (en.path[en.trying].estimated_at == decisions_ || !used)) en.trying = -1;
    // A new try costs a few calls on what may be the slower path: at most one in
    // kExploreEvery of the entry's calls (by count, or by bytes for calls of many MiB, where a
    // sitting's 0.2 s row of 256 MiB calls holds only a few of them).
    const bool paid = en.calls_since_try >= kExploreEvery * kMinCalls ||
                      en.bytes_since_try >= static_cast<double>(kExploreEvery * kMinBytes);
    bool trial = en.trying >= 0;
    if (en.trying >= 0) {
      choice = en.trying;
    } else if (used && paid && (other.estimate < 0 || decisions_ - other.estimated_at >= kExploreEvery)) {
      choice = 1 - choice;
      en.trying = choice;
      en.calls_since_try = 0;
      en.bytes_since_try = 0;
      trial = true;
    } else if (used && en.current >= 0 && choice != en.current) {
      trial = true;  // taken over from the other path on a few calls: on trial too
    }
    // A path on trial: the next probe comes after enough of its calls to be folded (a choice
    // made on a few calls may be wrong, and would otherwise last a whole interval). (A first
    // choice without a try is the path the fixed rule took: the one timed.)
    if (trial) {
      const uint64_t class_bytes = uint64_t{1} << (2 * (e % kSizeClasses) + 16);  // the class's largest call
      *explore_bytes = std::max(*explore_bytes, std::min((kMinCalls + 1) * class_bytes, kMinBytes + class_bytes));
    }
    en.current = choice;
    mask |= uint64_t{1} << e;
    if (choice == 1) mask |= uint64_t{1} << (kEntries + e);
    en.path[1 - choice].warm = false;
  }
  ++decisions_;
  return mask;
}

}  // namespace dtrain

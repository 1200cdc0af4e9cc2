// base/clock.h — monotonic time and deadlines.
//
// Contract: Deadline is a point on the steady clock; Deadline::after(seconds) with seconds <= 0
// means "already expired"; a negative one (kForever) is infinite. remaining_ms() is clamped to [0, INT_MAX]
// and is what poll()/futex timeouts take. Deadline::from_first_check starts its clock at its
// first check. Thread-safety: value types (a from_first_check one checked by one thread).
//
// Timeouts everywhere are seconds as a double, with two reserved values:
//   kDefaultTimeout  "the owner's default": a store's, a transport's or a communicator's
//                    timeout (DTRAIN_TIMEOUT for the job's world, 300 s unless set). Every
//                    blocking call's timeout parameter defaults to it.
//   kForever         wait without bound (any other negative value means the same).
// resolve_timeout(requested, owner_default) is the one place that reads kDefaultTimeout.
#pragma once

#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

namespace dtrain {

using Clock = std::chrono::steady_clock;

inline double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
// The calling thread's CPU time: unlike wall time it does not count the time other threads
// or processes hold the core.
inline double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

inline constexpr double kDefaultTimeout = -2;
inline constexpr double kForever = -1;

inline double resolve_timeout(double requested, double owner_default) {
  return requested == kDefaultTimeout ? owner_default : requested;
}

class Deadline {
 public:
  static Deadline after(double seconds) {
    Deadline d;
    if (seconds < 0) {
      d.infinite_ = true;
    } else {
      d.at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    }
    return d;
  }
  // The same limit counted from the deadline's first check (expired, remaining_*,
  // time_point) instead of from now, so that a call that is done before anything checks
  // reads no clock for it: a small collective's waits check only once they sleep, after
  // spinning, and most calls never get there. The limit falls later than after(seconds)'s by
  // the time until that first check. Checked by one thread (the call's own).
  static Deadline from_first_check(double seconds) {
    Deadline d;
    if (seconds < 0) d.infinite_ = true;
    else d.pending_s_ = seconds;
    return d;
  }
  static Deadline never() { return after(kForever); }
  bool infinite() const { return infinite_; }
  bool expired() const { return !infinite_ && Clock::now() >= at(); }
  double remaining_seconds() const {
    if (infinite_) return 1e18;
    double r = std::chrono::duration<double>(at() - Clock::now()).count();
    return r > 0 ? r : 0;
  }
  int remaining_ms() const {
    if (infinite_) return INT_MAX;
    double ms = remaining_seconds() * 1000.0;
    return ms >= INT_MAX ? INT_MAX : static_cast<int>(ms + 0.999);
  }
  Clock::time_point time_point() const { return infinite_ ? Clock::time_point::max() : at(); }

 private:
  Clock::time_point at() const {
    if (pending_s_ >= 0) {
      at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(pending_s_));
      pending_s_ = -1;
    }
    return at_;
  }
  mutable Clock::time_point at_{};
  mutable double pending_s_ = -1;  // from_first_check: the limit, not started yet
  bool infinite_ = false;
};

}  // namespace dtrain

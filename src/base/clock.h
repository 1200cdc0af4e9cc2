// base/clock.h — monotonic time and deadlines.
//
// Contract: Deadline is a point on the steady clock; Deadline::after(seconds) with seconds <= 0
// means "already expired"; a negative one (kForever) is infinite. remaining_ms() is clamped to [0, INT_MAX]
// and is what poll()/futex timeouts take. Thread-safety: value types.
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

namespace dtrain {

using Clock = std::chrono::steady_clock;

inline double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
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
  static Deadline never() { return after(kForever); }
  bool infinite() const { return infinite_; }
  bool expired() const { return !infinite_ && Clock::now() >= at_; }
  double remaining_seconds() const {
    if (infinite_) return 1e18;
    double r = std::chrono::duration<double>(at_ - Clock::now()).count();
    return r > 0 ? r : 0;
  }
  int remaining_ms() const {
    if (infinite_) return INT_MAX;
    double ms = remaining_seconds() * 1000.0;
    return ms >= INT_MAX ? INT_MAX : static_cast<int>(ms + 0.999);
  }
  Clock::time_point time_point() const { return infinite_ ? Clock::time_point::max() : at_; }

 private:
  Clock::time_point at_{};
  bool infinite_ = false;
};

}  // namespace dtrain

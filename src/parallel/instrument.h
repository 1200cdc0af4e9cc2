// parallel/instrument.h — where a rank's time goes: compute, communication, waiting.
//
// Every distributed strategy reports three numbers per rank, and optionally a timeline:
//   compute_seconds  the training thread busy with forward, backward, optimizer steps;
//   comm_seconds     wall time during which a collective or point-to-point exchange of this
//                    rank was in flight (on the training thread or on a progress thread, so it
//                    may overlap compute);
//   wait_seconds     the training thread blocked on communication: exposed (un-hidden)
//                    communication plus time spent waiting for slower peers. A blocking
//                    call (blocking()) is both communication and wait over its interval.
// hidden_fraction() = 1 - wait/comm is the share of communication that overlapped compute
// (0 when every byte was waited for, 1 when none was).
//
// Contract
// - Instrument is per rank. span_*(...) record an interval [t0, t1] in seconds of
//   now_seconds(); they add to the totals and, when an EventSink is attached, forward the
//   event (track 0 = the training thread, track 1 = the communication thread).
// - An EventSink receives every span; trace/ implements one that writes a Chrome trace.
//   parallel/ only knows this interface (the layering: parallel does not link trace).
// - Scoped helpers (Instrument::Scope) time a block on the training thread.
// Thread-safety: every method may be called from any thread (one mutex; a few calls per step).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "base/clock.h"

namespace dtrain {

enum class SpanKind { kCompute, kComm, kWait };

struct TimeSplit {
  double compute_seconds = 0;
  double comm_seconds = 0;
  double wait_seconds = 0;
  int64_t comm_bytes = 0;  // payload bytes this rank contributed to collectives / sent
  int64_t comm_calls = 0;
  double hidden_fraction() const {
    if (comm_seconds <= 0) return 0;
    double h = 1.0 - wait_seconds / comm_seconds;
    return h < 0 ? 0 : (h > 1 ? 1 : h);
  }
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  // One finished interval. `args` is a JSON object body without braces (may be empty),
  // e.g. "\"algorithm\":\"ring\",\"bytes\":1048576".
  virtual void span(int track, const std::string& name, SpanKind kind, double t0, double t1,
                    const std::string& args) = 0;
};

class Instrument {
 public:
  explicit Instrument(EventSink* sink = nullptr) : sink_(sink) {}

  void span(int track, const std::string& name, SpanKind kind, double t0, double t1, int64_t bytes = 0,
            const std::string& args = "") {
    std::lock_guard<std::mutex> lock(mu_);
    const double d = t1 > t0 ? t1 - t0 : 0;
    switch (kind) {
      case SpanKind::kCompute: split_.compute_seconds += d; break;
      case SpanKind::kComm:
        split_.comm_seconds += d;
        split_.comm_bytes += bytes;
        ++split_.comm_calls;
        break;
      case SpanKind::kWait: split_.wait_seconds += d; break;
    }
    if (sink_) sink_->span(track, name, kind, t0, t1, args);
  }
  void compute(const std::string& name, double t0, double t1) { span(0, name, SpanKind::kCompute, t0, t1); }
  void wait(const std::string& name, double t0, double t1) { span(0, name, SpanKind::kWait, t0, t1); }
  // Communication on `track` (0 when the training thread itself communicated, 1 on a
  // progress thread).
  void comm(int track, const std::string& name, double t0, double t1, int64_t bytes, const std::string& args = "") {
    span(track, name, SpanKind::kComm, t0, t1, bytes, args);
  }
  // Communication that blocked the training thread for [t0, t1]: nothing overlapped it, so
  // it is waiting too ("wait:NAME"). Every blocking call records itself so; recording only
  // the communication read as 100% hidden.
  void blocking(const std::string& name, double t0, double t1, int64_t bytes, const std::string& args = "") {
    comm(0, name, t0, t1, bytes, args);
    span(0, "wait:" + name, SpanKind::kWait, t0, t1);
  }

  TimeSplit totals() const {
    std::lock_guard<std::mutex> lock(mu_);
    return split_;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    split_ = {};
  }

  // Times a block on the training thread: Instrument::Scope s(inst, "forward", SpanKind::kCompute);
  class Scope {
   public:
    Scope(Instrument* inst, const char* name, SpanKind kind)
        : inst_(inst), name_(name), kind_(kind), t0_(inst ? now_seconds() : 0) {}
    ~Scope() {
      if (inst_) inst_->span(0, name_, kind_, t0_, now_seconds());
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Instrument* inst_;
    const char* name_;
    SpanKind kind_;
    double t0_;
  };

 private:
  mutable std::mutex mu_;
  EventSink* sink_;
  TimeSplit split_;
};

}  // namespace dtrain

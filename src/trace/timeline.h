// trace/timeline.h — a timeline recorder that writes Chrome trace-event JSON (Perfetto,
// chrome://tracing).
//
// Format (the "JSON Object Format" of the Trace Event spec): {"traceEvents": [...],
// "displayTimeUnit": "ms"}. Every interval is a complete event {"ph":"X", "name", "cat",
// "pid", "tid", "ts", "dur", "args"} with ts/dur in microseconds; metadata events
// ({"ph":"M", "name":"process_name"/"thread_name"}) label the tracks. dtrain uses one process
// per rank (pid = rank, named "rank R") and one thread per activity (tid 0 "compute", the
// training thread; tid 1 "comm", the progress thread), so overlap shows as two stacked rows.
//
// Contract
// - Timeline::add(...) records one interval (seconds on any common clock; `origin` passed to
//   the constructor is subtracted). Cheap: a mutex and a push_back.
// - serialize()/parse() move a rank's events between processes as a byte string (JSON), so
//   rank 0 can merge every rank's events: merge(parts) concatenates them.
// - write_chrome_trace(path, events, ranks) writes the file atomically enough for a viewer
//   (one write of the whole document) and throws IoError naming the path on failure.
// Thread-safety: add() may be called from any thread; the rest from one thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dtrain::trace {

struct Event {
  std::string name;
  std::string cat;   // "compute", "comm", "wait"
  int pid = 0;       // rank
  int tid = 0;       // 0 compute, 1 comm
  double ts_us = 0;  // start, microseconds since the origin
  double dur_us = 0;
  std::string args;  // JSON object body without braces, may be empty
};

class Timeline {
 public:
  Timeline(int rank, double origin_seconds) : rank_(rank), origin_(origin_seconds) {}
  void add(int tid, const std::string& name, const std::string& cat, double t0_seconds, double t1_seconds,
           const std::string& args = "");
  std::vector<Event> events() const;
  size_t size() const;
  void set_origin(double origin_seconds) { origin_ = origin_seconds; }
  int rank() const { return rank_; }

 private:
  int rank_;
  double origin_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

std::string serialize(const std::vector<Event>& events);
std::vector<Event> parse(const std::string& bytes);

// The whole document as a string: metadata for `ranks` processes, then the events.
std::string chrome_json(const std::vector<Event>& events, int ranks);
void write_chrome_trace(const std::string& path, const std::vector<Event>& events, int ranks);

}  // namespace dtrain::trace

#include "trace/timeline.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace dtrain::trace {
namespace {

nlohmann::json args_object(const std::string& body) {
  if (body.empty()) return nlohmann::json::object();
  try {
    return nlohmann::json::parse("{" + body + "}");
  } catch (const std::exception&) {
    return nlohmann::json{{"text", body}};
  }
}

}  // namespace

void Timeline::add(int tid, const std::string& name, const std::string& cat, double t0, double t1,
                   const std::string& args) {
  Event e;
  e.name = name;
  e.cat = cat;
  e.pid = rank_;
  e.tid = tid;
  e.ts_us = (t0 - origin_) * 1e6;
  e.dur_us = t1 > t0 ? (t1 - t0) * 1e6 : 0;
  e.args = args;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

std::vector<Event> Timeline::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

size_t Timeline::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::string serialize(const std::vector<Event>& events) {
  nlohmann::json a = nlohmann::json::array();
  for (const Event& e : events) a.push_back({e.name, e.cat, e.pid, e.tid, e.ts_us, e.dur_us, e.args});
  return a.dump();
}

std::vector<Event> parse(const std::string& bytes) {
  std::vector<Event> out;
  if (bytes.empty()) return out;
  nlohmann::json a;
  try {
    a = nlohmann::json::parse(bytes);
  } catch (const std::exception& ex) {
    DT_THROW(Corrupt, "trace events: not JSON (" << ex.what() << ")");
  }
  DT_CHECK(a.is_array(), Corrupt, "trace events: expected an array");
  for (const auto& r : a) {
    DT_CHECK(r.is_array() && r.size() == 7, Corrupt, "trace events: malformed record " << r.dump());
    Event e;
    e.name = r[0].get<std::string>();
    e.cat = r[1].get<std::string>();
    e.pid = r[2].get<int>();
    e.tid = r[3].get<int>();
    e.ts_us = r[4].get<double>();
    e.dur_us = r[5].get<double>();
    e.args = r[6].get<std::string>();
    out.push_back(std::move(e));
  }
  return out;
}

std::string chrome_json(const std::vector<Event>& events, int ranks) {
  nlohmann::json ev = nlohmann::json::array();
  for (int r = 0; r < ranks; ++r) {
    ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"tid", 0}, {"args", {{"name", "rank " + std::to_string(r)}}}});
    ev.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"tid", 0}, {"args", {{"sort_index", r}}}});
    ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", 1}, {"args", {{"name", "comm"}}}});
  }
  for (const Event& e : events)
    ev.push_back({{"ph", "X"},
                  {"name", e.name},
                  {"cat", e.cat},
                  {"pid", e.pid},
                  {"tid", e.tid},
                  {"ts", e.ts_us},
                  {"dur", e.dur_us},
                  {"args", args_object(e.args)}});
  nlohmann::json doc{{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

void write_chrome_trace(const std::string& path, const std::vector<Event>& events, int ranks) {
  const std::string text = chrome_json(events, ranks);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  DT_CHECK(out.good(), IoError, "cannot write --trace file '" << path << "'");
  out << text << "\n";
  out.flush();
  DT_CHECK(out.good(), IoError, "error writing --trace file '" << path << "'");
}

}  // namespace dtrain::trace

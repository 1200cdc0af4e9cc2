// plan/calibration_carry.cc — see calibration_carry.h.
//
// The carry walks each verdict table of the previous file (by_cores_by_ranks: each rank
// count's) and copies a verdict the fresh file does not have, and within a verdict both have
// the collectives' tables only the previous one has, dated by the calibration that measured
// them: the previous file's own time, or, where the previous file had itself carried them
// (or a part of them), the oldest time it was carried with. Dates, not a count of carries,
// decide the age.
#include "plan/calibration_carry.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "plan/cluster.h"

namespace dtrain::plan {
namespace {

// Whether a verdict's gap factor may be carried: it says it came of enough passes.
bool gap_factor_carries(const nlohmann::json& verdict_tables) {
  const auto it = verdict_tables.find("gap_passes");
  return it != verdict_tables.end() && it->is_number() && it->get<double>() >= kGapFactorMinPasses;
}

std::vector<std::string> split_dots(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) out.push_back(part);
  return out;
}

// The object at `parts` under j, or nullptr where any step is missing or not an object.
const nlohmann::json* find_object(const nlohmann::json& j, const std::vector<std::string>& parts) {
  const nlohmann::json* at = &j;
  for (const std::string& p : parts) {
    if (!at->is_object() || !at->contains(p)) return nullptr;
    at = &(*at)[p];
  }
  return at->is_object() ? at : nullptr;
}

nlohmann::json& make_object(nlohmann::json& j, const std::vector<std::string>& parts) {
  nlohmann::json* at = &j;
  for (const std::string& p : parts) {
    if (!(*at)[p].is_object()) (*at)[p] = nlohmann::json::object();
    at = &(*at)[p];
  }
  return *at;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ".") + p;
  return out;
}

// The CPU's model name from /proc/cpuinfo: x86 says "model name", some ARM kernels "Hardware"
// or "CPU part"; "" where none is there.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    for (const char* key : {"model name", "Hardware", "CPU part"})
      if (line.rfind(key, 0) == 0) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
  return "";
}

}  // namespace

nlohmann::json machine_fingerprint() {
  return {{"cpu", cpu_model()},
          {"cpus", static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))},
          {"cache_bytes", sysfs_llc_bytes()}};
}

std::string utc_minutes(double unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

void stamp_calibration(nlohmann::json& j, double unix_s) {
  j["machine"] = machine_fingerprint();
  j["calibrated_unix"] = std::floor(unix_s);
  j["calibrated_at"] = utc_minutes(unix_s);
}

std::vector<Carried> carry_placements(const nlohmann::json& previous, nlohmann::json* fresh, double now_unix,
                                      double max_age_days, std::string* why_none) {
  why_none->clear();
  std::vector<Carried> out;
  if (!previous.is_object() || !previous.contains("machine")) {
    *why_none = "the file it replaces records no machine (written before 2026-11-30, or by hand)";
    return out;
  }
  if (!fresh->contains("machine") || previous["machine"] != (*fresh)["machine"]) {
    *why_none = "the file it replaces was taken on another machine (" + previous["machine"].dump() + ")";
    return out;
  }
  if (previous.value("version", 0) != fresh->value("version", -1)) {
    *why_none = "the file it replaces has another version (" + std::to_string(previous.value("version", 0)) + ")";
    return out;
  }
  if (!previous.contains("calibrated_unix") || !previous["calibrated_unix"].is_number()) {
    *why_none = "the file it replaces records no calibration time";
    return out;
  }
  const double previous_unix = previous["calibrated_unix"].get<double>();
  std::map<std::string, double> measured_at;  // tables the previous file had itself carried
  if (previous.contains("carried") && previous["carried"].is_array())
    for (const auto& c : previous["carried"])
      if (c.is_object() && c.contains("table") && c.contains("measured_unix"))
        measured_at[c["table"].get<std::string>()] = c["measured_unix"].get<double>();

  // Each verdict table's path: those of kVerdictTables, by_cores_by_ranks once per rank count.
  std::vector<std::vector<std::string>> tables;
  for (const char* t : kVerdictTables) {
    std::vector<std::string> parts = split_dots(t);
    if (parts.back() != "*") {
      tables.push_back(parts);
      continue;
    }
    parts.pop_back();
    if (const nlohmann::json* by = find_object(previous, parts))
      for (const auto& [key, v] : by->items()) {
        tables.push_back(parts);
        tables.back().push_back(key);
      }
  }
  // When a table (or any part of it) was measured: the oldest date the previous file's
  // "carried" gives it or a part of it, else the previous file's own time.
  auto when_of = [&](const std::string& name) {
    double when = previous_unix;
    for (const auto& [table, at] : measured_at)
      if (table == name || table.rfind(name + ".", 0) == 0 || name.rfind(table + ".", 0) == 0) when = std::min(when, at);
    return when;
  };
  auto too_old = [&](double when) { return now_unix - when > max_age_days * 86400; };
  for (const auto& parts : tables) {
    const nlohmann::json* old = find_object(previous, parts);
    if (!old) continue;
    for (const auto& [verdict, v] : old->items()) {
      const nlohmann::json* now = find_object(*fresh, parts);
      const std::string name = join(parts) + "." + verdict;
      if (!now || !now->contains(verdict)) {
        if (const double when = when_of(name); !too_old(when)) {
          nlohmann::json copy = v;
          if (copy.is_object() && copy.contains("gap_factor") && !gap_factor_carries(copy)) copy.erase("gap_factor");
          make_object(*fresh, parts)[verdict] = copy;
          out.push_back({name, when});
        }
        continue;
      }
      // Both have this verdict: its collectives' tables (arrays of points) and figures (the
      // gap factor) that the fresh one lacks. A pass filed under a verdict may time some of
      // them and not others (cal-i5, 2026-11-30: its far 4-rank passes held only ddp's window
      // all-reduce; a gap factor counts only where a gap pass and its back-to-back pass read
      // one verdict).
      const nlohmann::json& mine = (*now)[verdict];
      if (!v.is_object() || !mine.is_object()) continue;
      for (const auto& [op, points] : v.items()) {
        const bool table = points.is_array() && !points.empty();
        const std::string part = name + "." + op;
        // Both timed this table: the sizes only the previous one has, point by point. A
        // calibration files each row under the verdict most of its calls ran under, so a
        // placement that came and went during a pass leaves a table of a few sizes, which
        // then barred the older file's whole one (cal-m1 and cal-n1, 2026-11-30: the close
        // 2-rank window all-reduce held only 16 KiB and 64 MiB, and a 1 MiB call was priced
        // between them at 274 us where cal-k1 had timed 107).
        if (table && mine.contains(op) && mine[op].is_array() && !mine[op].empty()) {
          std::set<double> have;
          for (const auto& pt : mine[op])
            if (pt.is_array() && !pt.empty() && pt[0].is_number()) have.insert(pt[0].get<double>());
          nlohmann::json merged = mine[op];
          for (const auto& pt : points) {
            if (!pt.is_array() || pt.size() != 2 || !pt[0].is_number() || have.count(pt[0].get<double>())) continue;
            const std::string point = part + "." + std::to_string(static_cast<int64_t>(pt[0].get<double>()));
            if (const double when = when_of(point); !too_old(when)) {
              merged.push_back(pt);
              out.push_back({point, when});
            }
          }
          if (merged.size() != mine[op].size()) {
            std::vector<nlohmann::json> sorted(merged.begin(), merged.end());
            std::sort(sorted.begin(), sorted.end(),
                      [](const nlohmann::json& a, const nlohmann::json& b) { return a[0].get<double>() < b[0].get<double>(); });
            make_object(*fresh, parts)[verdict][op] = sorted;
          }
          continue;
        }
        if ((!table && !(op == "gap_factor" && points.is_number() && gap_factor_carries(v))) ||
            (mine.contains(op) && !(mine[op].is_array() && mine[op].empty())))
          continue;
        if (const double when = when_of(part); !too_old(when)) {
          make_object(*fresh, parts)[verdict][op] = points;
          if (op == "gap_factor") make_object(*fresh, parts)[verdict]["gap_passes"] = v["gap_passes"];
          out.push_back({part, when});
        }
      }
    }
  }
  if (!out.empty()) {
    nlohmann::json& list = (*fresh)["carried"] = nlohmann::json::array();
    for (const Carried& c : out)
      list.push_back({{"table", c.table}, {"measured_unix", c.measured_unix}, {"measured_at", utc_minutes(c.measured_unix)}});
  } else {
    fresh->erase("carried");
  }
  return out;
}

}  // namespace dtrain::plan

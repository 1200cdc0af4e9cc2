// plan/calibration_carry.cc — see calibration_carry.h.
//
// The carry walks each verdict table of the previous file (by_cores_by_ranks: each rank
// count's) and copies a verdict the fresh file does not have, dated by the calibration that
// measured it: the previous file's own time, or, where the previous file had itself carried
// that table, the time it was carried with. Dates, not a count of carries, decide the age.
#include "plan/calibration_carry.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "plan/cluster.h"

namespace dtrain::plan {
namespace {

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
  for (const auto& parts : tables) {
    const nlohmann::json* old = find_object(previous, parts);
    if (!old) continue;
    const nlohmann::json* now = find_object(*fresh, parts);
    for (const auto& [verdict, v] : old->items()) {
      if (now && now->contains(verdict)) continue;
      const std::string name = join(parts) + "." + verdict;
      const auto it = measured_at.find(name);
      const double when = it != measured_at.end() ? it->second : previous_unix;
      if (now_unix - when > max_age_days * 86400) continue;
      make_object(*fresh, parts)[verdict] = v;
      now = find_object(*fresh, parts);
      out.push_back({name, when});
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

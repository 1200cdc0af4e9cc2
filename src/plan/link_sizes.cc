// plan/link_sizes.cc — a calibration's link tables (plan/cluster.h LinkSizes) in and out of
// its file: the points by size, by rank count and by the cores' verdict, each checked as it is
// read (sizes increasing, times positive, rank counts and verdicts that exist), and where the
// all-reduce's passes took the shared-memory slots from (slots_from_sizes).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "plan/cluster.h"

namespace dtrain::plan {

namespace {

std::vector<std::pair<double, double>> points(const nlohmann::json& j, const char* key, const std::string& where) {
  std::vector<std::pair<double, double>> out;
  if (!j.contains(key)) return out;
  DT_CHECK(j[key].is_array(), InvalidArgument, where << "." << key << " must be [[bytes, seconds], ...]");
  for (const auto& pt : j[key]) {
    DT_CHECK(pt.is_array() && pt.size() == 2 && pt[0].is_number() && pt[1].is_number() && pt[0].get<double>() > 0 &&
                 pt[1].get<double>() > 0 && (out.empty() || pt[0].get<double>() > out.back().first),
             InvalidArgument, where << "." << key << ": each point is [bytes > 0, seconds > 0], bytes increasing");
    out.push_back({pt[0].get<double>(), pt[1].get<double>()});
  }
  return out;
}

}  // namespace

LinkSizes link_sizes_from_json(const nlohmann::json& j, const std::string& where) {
  DT_CHECK(j.is_object(), InvalidArgument, where << " must be an object {\"p\", \"allreduce\", \"exchange\"}");
  LinkSizes t;
  t.p = j.value("p", 2);
  DT_CHECK(t.p >= 2, InvalidArgument, where << ".p must be >= 2 (ranks the all-reduce points were measured with)");
  t.allreduce = points(j, "allreduce", where);
  t.exchange = points(j, "exchange", where);
  t.send = points(j, "send", where);
  for (auto [key, dst] : {std::pair<const char*, std::map<int, std::vector<std::pair<double, double>>>*>{
                              "allreduce_by_ranks", &t.allreduce_by_ranks},
                          {"reducescatter_by_ranks", &t.reducescatter_by_ranks},
                          {"allgather_by_ranks", &t.allgather_by_ranks},
                          {"broadcast_by_ranks", &t.broadcast_by_ranks},
                          {"allreduce_window_by_ranks", &t.allreduce_window_by_ranks}}) {
    if (!j.contains(key)) continue;
    DT_CHECK(j[key].is_object(), InvalidArgument, where << "." << key << " must be {\"ranks\": [[bytes, s]]}");
    for (const auto& [k, v] : j[key].items()) {
      const int p = std::atoi(k.c_str());
      DT_CHECK(p >= 2, InvalidArgument, where << "." << key << ": key '" << k << "' is not a rank count >= 2");
      (*dst)[p] = points(j[key], k.c_str(), where + "." + key);
    }
  }
  // {"ranks": number >= least} by rank count (>= 2), named `what` in the errors.
  auto numbers_by_ranks = [&](const char* key, double least, const char* what, std::map<int, double>* dst) {
    if (!j.contains(key)) return;
    const auto& g = j[key];
    DT_CHECK(g.is_object(), InvalidArgument, where << "." << key << " must be {\"ranks\": " << what << " >= " << least << "}");
    for (const auto& [k, v] : g.items()) {
      const int p = std::atoi(k.c_str());
      DT_CHECK(p >= 2 && v.is_number() && v.get<double>() >= least, InvalidArgument,
               where << "." << key << ": '" << k << "' must be a rank count >= 2 with a " << what << " >= " << least);
      (*dst)[p] = v.get<double>();
    }
  };
  numbers_by_ranks("gap_factor_by_ranks", 1, "factor", &t.gap_factor_by_ranks);
  numbers_by_ranks("meeting_penalty_by_ranks", 0, "penalty", &t.meeting_penalty_by_ranks);
  if (j.contains("allreduce_slots_from_by_ranks")) {
    const auto& g = j["allreduce_slots_from_by_ranks"];
    DT_CHECK(g.is_object(), InvalidArgument, where << ".allreduce_slots_from_by_ranks must be {\"ranks\": bytes}");
    for (const auto& [k, v] : g.items()) {
      const int p = std::atoi(k.c_str());
      DT_CHECK(p >= 2 && v.is_number() && v.get<double>() > 0, InvalidArgument,
               where << ".allreduce_slots_from_by_ranks: '" << k << "' must be a rank count >= 2 with bytes > 0");
      t.allreduce_slots_from_by_ranks[p] = v.get<double>();
    }
  }
  // {"close": {tables}, "far": {tables}} under `at`.
  auto by_verdict = [&](const nlohmann::json& g, const std::string& at) {
    std::map<std::string, LinkSizes::VerdictTables> out;
    DT_CHECK(g.is_object(), InvalidArgument, at << " must be {\"close\"|\"far\": {...}}");
    for (const auto& [k, v] : g.items()) {
      const std::string here = at + "." + k;
      DT_CHECK((k == "close" || k == "far") && v.is_object(), InvalidArgument,
               here << ": the verdict must be close or far, with an object of tables");
      LinkSizes::VerdictTables r;
      for (auto [key, dst] : {std::pair<const char*, std::vector<std::pair<double, double>>*>{"allreduce", &r.allreduce},
                              {"reducescatter", &r.reducescatter},
                              {"allgather", &r.allgather},
                              {"broadcast", &r.broadcast},
                              {"allreduce_window", &r.allreduce_window}})
        *dst = points(v, key, here);
      r.allreduce_slots_from = v.value("allreduce_slots_from", 0.0);
      DT_CHECK(r.allreduce_slots_from >= 0, InvalidArgument, here << ".allreduce_slots_from must be bytes >= 0");
      r.gap_factor = v.value("gap_factor", 0.0);
      DT_CHECK(r.gap_factor == 0 || r.gap_factor >= 1, InvalidArgument, here << ".gap_factor must be >= 1 (or absent)");
      out[k] = r;
    }
    return out;
  };
  if (j.contains("two_rank_by_cores")) t.two_rank_by_cores = by_verdict(j["two_rank_by_cores"], where + ".two_rank_by_cores");
  if (j.contains("by_cores_by_ranks")) {
    const auto& g = j["by_cores_by_ranks"];
    DT_CHECK(g.is_object(), InvalidArgument, where << ".by_cores_by_ranks must be {\"ranks\": {\"close\"|\"far\": {...}}}");
    for (const auto& [k, v] : g.items()) {
      const int p = std::atoi(k.c_str());
      DT_CHECK(p >= 3, InvalidArgument, where << ".by_cores_by_ranks: '" << k << "' must be a rank count >= 3 (2 ranks: two_rank_by_cores)");
      t.by_cores_by_ranks[p] = by_verdict(v, where + ".by_cores_by_ranks." + k);
    }
  }
  return t;
}

namespace {

nlohmann::json verdict_tables_json(const LinkSizes::VerdictTables& r) {
  nlohmann::json j = {{"allreduce", r.allreduce},
                      {"reducescatter", r.reducescatter},
                      {"allgather", r.allgather},
                      {"broadcast", r.broadcast},
                      {"allreduce_slots_from", r.allreduce_slots_from}};
  if (r.gap_factor > 0) j["gap_factor"] = r.gap_factor;
  if (!r.allreduce_window.empty()) j["allreduce_window"] = r.allreduce_window;
  return j;
}

}  // namespace

double slots_from_sizes(const std::map<double, bool>& took_slots) {
  double from = 0;
  for (auto it = took_slots.rbegin(); it != took_slots.rend() && it->second; ++it) from = it->first;
  return from;
}

nlohmann::json link_sizes_json(const LinkSizes& t) {
  nlohmann::json j = {{"p", t.p}, {"allreduce", t.allreduce}, {"exchange", t.exchange}};
  if (!t.send.empty()) j["send"] = t.send;
  for (const auto& [p, v] : t.allreduce_by_ranks) j["allreduce_by_ranks"][std::to_string(p)] = v;
  for (const auto& [p, v] : t.allreduce_window_by_ranks) j["allreduce_window_by_ranks"][std::to_string(p)] = v;
  for (const auto& [p, v] : t.reducescatter_by_ranks) j["reducescatter_by_ranks"][std::to_string(p)] = v;
  for (const auto& [p, v] : t.allgather_by_ranks) j["allgather_by_ranks"][std::to_string(p)] = v;
  for (const auto& [p, v] : t.broadcast_by_ranks) j["broadcast_by_ranks"][std::to_string(p)] = v;
  for (const auto& [p, f] : t.gap_factor_by_ranks) j["gap_factor_by_ranks"][std::to_string(p)] = f;
  for (const auto& [p, a] : t.meeting_penalty_by_ranks) j["meeting_penalty_by_ranks"][std::to_string(p)] = a;
  for (const auto& [p, b] : t.allreduce_slots_from_by_ranks) j["allreduce_slots_from_by_ranks"][std::to_string(p)] = b;
  for (const auto& [k, r] : t.two_rank_by_cores) j["two_rank_by_cores"][k] = verdict_tables_json(r);
  for (const auto& [p, by] : t.by_cores_by_ranks)
    for (const auto& [k, r] : by) j["by_cores_by_ranks"][std::to_string(p)][k] = verdict_tables_json(r);
  return j;
}

}  // namespace dtrain::plan

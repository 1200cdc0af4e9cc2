#include "plan/unit_memory.h"

#include <map>

namespace dtrain::plan {
namespace {

UnitCost memory(double act_per_elem, double peak_per_elem, double per_score = 0) {
  UnitCost u;
  u.act_b_per_elem = act_per_elem;
  u.peak_b_per_elem = peak_per_elem;
  u.act_b_per_score = per_score;
  u.peak_b_per_score = per_score;
  return u;
}

}  // namespace

const UnitCost* default_unit_memory(const std::string& kind) {
  // Bytes per element, kept / at the high-water mark; a block keeps one float (4 bytes) per
  // attention probability at both.
  static const std::map<std::string, UnitCost> figures = {
      {"gpt_embedding", memory(12.04, 24.04)},
      {"gpt_block", memory(5.18, 9.06, 4.01)},
      {"gpt_head", memory(4.02, 9.14)},
      {"mlp_layer", memory(1.22, 2.45)},
  };
  auto it = figures.find(kind);
  return it == figures.end() ? nullptr : &it->second;
}

const UnitCost* unit_memory_for(const Cluster& c, const std::string& kind, const std::string& spec) {
  const UnitCost* uc = c.unit_for(kind, spec);
  return uc && uc->has_memory() ? uc : default_unit_memory(kind);
}

}  // namespace dtrain::plan

#include "coll/config.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace dtrain {

std::string algorithm_setting_name(CollOp op) {
  std::string var = std::string("DTRAIN_") + coll_op_name(op) + "_ALGO";
  for (char& ch : var) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return var;
}

CollConfig coll_config_from(const Settings& s) {
  CollConfig c;
  c.segment_bytes = static_cast<size_t>(std::max<int64_t>(s.bytes("DTRAIN_SEGMENT_BYTES"), 1));
  c.check = s.flag("DTRAIN_COLL_CHECK");
  c.shm_context = s.flag("DTRAIN_SHM_CONTEXT");
  c.shm_yield_us = s.number("DTRAIN_SHM_YIELD_US");
  c.shm_slot_bytes = static_cast<size_t>(std::max<int64_t>(s.bytes("DTRAIN_SHM_SLOT_BYTES"), 64));
  c.shm_slots_bytes = static_cast<size_t>(std::max<int64_t>(s.bytes("DTRAIN_SHM_SLOTS_BYTES"), 0));
  const std::string cores = s.choice("DTRAIN_SHM_CORES");
  c.shm_cores = cores == "close" ? CoreDistance::kClose : cores == "far" ? CoreDistance::kFar : CoreDistance::kProbe;
  const double reprobe = s.number("DTRAIN_SHM_REPROBE_MS");
  DT_CHECK(reprobe >= 0, InvalidArgument,
           "DTRAIN_SHM_REPROBE_MS=" << reprobe << ": must be 0 (probe once) or a positive number of milliseconds");
  c.shm_reprobe_ms = static_cast<int64_t>(reprobe);
  c.shm_timed_paths = s.flag("DTRAIN_SHM_TIMED_PATHS");
  c.calibration_path = s.calibration_path();
  if (s.has("DTRAIN_HOST_ID")) c.host_id = s.text("DTRAIN_HOST_ID");
  const bool global = s.has("DTRAIN_ALGO");
  for (size_t i = 0; i < c.forced.size(); ++i) {
    const std::string var = algorithm_setting_name(static_cast<CollOp>(i));
    // "auto" forces nothing: the same as leaving the variable unset (so the small-call and
    // shared-memory preferences of auto hold; a per-op "auto" also lifts a DTRAIN_ALGO).
    const bool own = s.has(var);
    const std::string name = own ? s.text(var) : global ? s.text("DTRAIN_ALGO") : "";
    if (!name.empty() && name != "auto") c.forced[i] = ForcedAlgorithm{name, !own};
  }
  return c;
}

}  // namespace dtrain

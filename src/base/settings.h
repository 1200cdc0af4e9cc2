// base/settings.h — the one registry of dtrain's DTRAIN_* environment settings, and a
// snapshot of their values.
//
// Contract
// - setting_table() lists every DTRAIN_* variable the product reads: name, type, the default
//   that applies when it is unset (as text; prose when it depends on something else), what it
//   means, and which part of dtrain takes it. It is a process-wide immutable table; `dtrain env`
//   prints it with the values in force and docs/SETTINGS.md is settings_markdown() verbatim
//   (tests/base/settings_test.cc checks both).
// - A Settings is an immutable snapshot: from_env() reads every registered variable (plus
//   HOME and XDG_DATA_HOME, from which per-user paths derive) once; from_map() builds one
//   for tests. Settings::process() is this process's snapshot, taken on first use.
// - Who reads: only the entry points — the world (comm/world.cc, Communicator::from_env), the
//   launcher and the commands in src/cli, and the three process-wide switches with no owner
//   object (DTRAIN_LOG in base/log.cc, DTRAIN_ISA in tensor/cpu_features.cc and
//   coll/reduce_kernels.cc, DTRAIN_HUGE_PAGES in base/huge_pages.cc, for the allocator) — consult a
//   Settings; they copy the values into option structs (TransportOptions, CollConfig, ...)
//   that the layers below take. Nothing else calls getenv (scripts/check_layers.py checks).
// - Typed getters return the variable's value when it is set and non-empty, else the table's
//   default parsed. A value of the wrong type is an InvalidArgument naming the variable, its
//   value and the expected form. Asking for a name that is not in the table is an
//   InvalidArgument too (register it in base/settings.cc). A setting whose default is prose
//   ("DTRAIN_TIMEOUT") must be tested with has() first; its typed getter throws otherwise.
// Thread-safety: the table and snapshots are immutable; Settings::process() is initialised
// once, thread-safely.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

enum class SettingType { kString, kInteger, kSeconds, kMicroseconds, kBytes, kFlag, kChoice, kPath };
const char* setting_type_name(SettingType t);

struct SettingInfo {
  const char* name;
  SettingType type;
  const char* default_text;  // what applies when unset
  const char* meaning;
  const char* read_by;       // the part of dtrain that takes it
  const char* choices = "";  // kChoice: "a|b|c"
};

const std::vector<SettingInfo>& setting_table();
// The entry named `name`, or nullptr.
const SettingInfo* find_setting(std::string_view name);
// The table as Markdown (docs/SETTINGS.md holds exactly this text).
std::string settings_markdown();

class Settings {
 public:
  Settings() = default;  // nothing set: every setting at its default
  static Settings from_env();
  // For tests: DTRAIN_* names must be registered; HOME and XDG_DATA_HOME are accepted too.
  static Settings from_map(const std::map<std::string, std::string>& values);
  // This process's snapshot, read from the environment on first use and never changed.
  static const Settings& process();

  // Whether the variable is set to a non-empty value.
  bool has(std::string_view name) const;
  // The value as given, or the table's default text when unset.
  std::string text(std::string_view name) const;
  int64_t integer(std::string_view name) const;  // kInteger, kFlag
  double number(std::string_view name) const;    // kSeconds, kMicroseconds, kInteger
  int64_t bytes(std::string_view name) const;    // kBytes: "4096", "64K", "1M", "2G"
  bool flag(std::string_view name) const;        // kFlag: 0 or 1
  // kChoice: the value, checked against the choices.
  std::string choice(std::string_view name) const;

  // Per-user paths: DTRAIN_DATA_DIR, else $XDG_DATA_HOME/dtrain, else $HOME/.local/share/dtrain.
  std::string data_dir() const;
  // DTRAIN_CALIBRATION, else $HOME/.cache/dtrain/calibration.json ("" without HOME).
  std::string calibration_path() const;

 private:
  const SettingInfo& info(std::string_view name) const;
  std::optional<std::string> raw(std::string_view name) const;
  std::map<std::string, std::string, std::less<>> values_;  // set variables only
  std::string home_, xdg_data_home_;
};

}  // namespace dtrain

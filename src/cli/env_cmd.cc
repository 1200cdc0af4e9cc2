// cli/env_cmd.cc — `dtrain env`: every DTRAIN_* setting with the value in force, and
// `dtrain data`: the named datasets, where each was looked for, and how to obtain it.
//
// Contract: `dtrain env` prints one block per setting of the registry (base/settings.h): the
// name, the value in force (marked "(set)" when it comes from the environment, else the
// default), its type and meaning. `--markdown` prints the registry's table exactly as
// docs/SETTINGS.md holds it. A value of the wrong type is shown with what was expected instead
// of failing. `dtrain data` prints the data directory in force and, per named dataset, found
// or not, the places looked in and how to obtain it; it exits 0 either way.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "base/settings.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "data/registry.h"

namespace dtrain::cli {

int env_main(const Args& args) {
  Flags f("env", args);
  bool markdown = f.get_bool("markdown", "print the table as docs/SETTINGS.md holds it");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("[--markdown]").c_str());
    return 0;
  }
  f.finish();
  if (markdown) {
    std::printf("%s", settings_markdown().c_str());
    return 0;
  }
  const Settings& s = Settings::process();
  for (const auto& info : setting_table()) {
    std::string value = s.text(info.name);
    if (s.has(info.name)) {
      // Parse it as the product will, so a malformed value shows here rather than mid-job.
      try {
        switch (info.type) {
          case SettingType::kInteger: s.integer(info.name); break;
          case SettingType::kSeconds:
          case SettingType::kMicroseconds: s.number(info.name); break;
          case SettingType::kBytes: s.bytes(info.name); break;
          case SettingType::kFlag: s.flag(info.name); break;
          case SettingType::kChoice: s.choice(info.name); break;
          default: break;
        }
        value += "  (set)";
      } catch (const Error& e) {
        value += "  (set, INVALID: " + std::string(e.what()) + ")";
      }
    }
    const std::string type = info.type == SettingType::kChoice ? info.choices : setting_type_name(info.type);
    std::printf("%-26s %s\n%-26s %s; %s (read by %s)\n", info.name, value.c_str(), "", type.c_str(), info.meaning,
                info.read_by);
  }
  std::printf("\ndata directory in force: %s  (see 'dtrain data')\n", s.data_dir().c_str());
  return 0;
}

int data_main(const Args& args) {
  Flags f("data", args);
  if (f.help_requested()) {
    std::printf("%s", f.help_text("").c_str());
    return 0;
  }
  f.finish();
  const std::string dir = Settings::process().data_dir();
  std::printf("data directory: %s\n  (DTRAIN_DATA_DIR, else $XDG_DATA_HOME/dtrain, else ~/.local/share/dtrain)\n\n",
              dir.c_str());
  for (const auto& d : data::named_datasets(dir)) {
    std::printf("%-16s %s\n", d.name.c_str(), d.found.empty() ? "not found" : ("found in " + d.found).c_str());
    std::printf("  %s\n", d.what.c_str());
    for (const auto& p : d.places) std::printf("  looked for %s\n", p.c_str());
    if (d.found.empty()) std::printf("  to obtain: %s\n", d.obtain.c_str());
  }
  std::printf("\nAny other file: --data libsvm:FILE[,TESTFILE], csv:FILE[,TESTFILE], text:FILE, mnist:DIR, "
              "fashion-mnist:DIR\n");
  return 0;
}

}  // namespace dtrain::cli

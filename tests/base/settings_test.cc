// The settings registry: typed reads with defaults and clear errors, per-user paths, and the
// docs' table (docs/SETTINGS.md) equal to the registry's text.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "base/clock.h"
#include "base/error.h"
#include "base/settings.h"

namespace dtrain {
namespace {

template <class F>
std::string invalid_argument_of(F&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument";
  return "";
}

TEST(Settings, UnsetMeansTheTablesDefault) {
  Settings s;
  EXPECT_FALSE(s.has("DTRAIN_TIMEOUT"));
  EXPECT_EQ(s.number("DTRAIN_TIMEOUT"), 300);
  EXPECT_EQ(s.bytes("DTRAIN_SHM_RING_BYTES"), 1 << 20);
  EXPECT_EQ(s.bytes("DTRAIN_SEGMENT_BYTES"), 1 << 20);
  EXPECT_TRUE(s.flag("DTRAIN_COLL_CHECK"));
  EXPECT_TRUE(s.flag("DTRAIN_SHM_CONTEXT"));
  EXPECT_EQ(s.choice("DTRAIN_TRANSPORT"), "auto");
  EXPECT_EQ(s.text("DTRAIN_BIND_ADDR"), "127.0.0.1");
}

TEST(Settings, SetValuesAreParsedByType) {
  auto s = Settings::from_map({{"DTRAIN_TIMEOUT", "2.5"},
                               {"DTRAIN_SHM_RING_BYTES", "64K"},
                               {"DTRAIN_COLL_CHECK", "0"},
                               {"DTRAIN_TRANSPORT", "tcp"},
                               {"DTRAIN_PROGRESS_FD", "7"},
                               {"DTRAIN_BIND_ADDR", ""}});
  EXPECT_TRUE(s.has("DTRAIN_TIMEOUT"));
  EXPECT_EQ(s.number("DTRAIN_TIMEOUT"), 2.5);
  EXPECT_EQ(s.bytes("DTRAIN_SHM_RING_BYTES"), 64 << 10);
  EXPECT_FALSE(s.flag("DTRAIN_COLL_CHECK"));
  EXPECT_EQ(s.choice("DTRAIN_TRANSPORT"), "tcp");
  EXPECT_EQ(s.integer("DTRAIN_PROGRESS_FD"), 7);
  // Empty counts as unset.
  EXPECT_FALSE(s.has("DTRAIN_BIND_ADDR"));
  EXPECT_EQ(s.text("DTRAIN_BIND_ADDR"), "127.0.0.1");
}

TEST(Settings, AMalformedValueNamesTheVariableAndTheExpectedForm) {
  auto s = Settings::from_map({{"DTRAIN_TIMEOUT", "soon"}, {"DTRAIN_TRANSPORT", "carrier-pigeon"},
                               {"DTRAIN_BIND", "yes"}});
  std::string msg = invalid_argument_of([&] { s.number("DTRAIN_TIMEOUT"); });
  EXPECT_NE(msg.find("DTRAIN_TIMEOUT='soon'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("seconds"), std::string::npos) << msg;
  msg = invalid_argument_of([&] { s.choice("DTRAIN_TRANSPORT"); });
  EXPECT_NE(msg.find("auto|shm|tcp"), std::string::npos) << msg;
  msg = invalid_argument_of([&] { s.flag("DTRAIN_BIND"); });
  EXPECT_NE(msg.find("0 or 1"), std::string::npos) << msg;
}

TEST(Settings, UnregisteredNamesAreRejected) {
  std::string msg = invalid_argument_of([] { Settings().has("DTRAIN_NO_SUCH_THING"); });
  EXPECT_NE(msg.find("base/settings.cc"), std::string::npos) << msg;
  invalid_argument_of([] { Settings::from_map({{"DTRAIN_TYPO", "1"}}); });
  // A prose default is not a value: callers must test has() first.
  invalid_argument_of([] { Settings().number("DTRAIN_CONNECT_TIMEOUT"); });
}

TEST(Settings, PerUserPathsFollowTheXdgOrder) {
  EXPECT_EQ(Settings::from_map({{"HOME", "/h"}}).data_dir(), "/h/.local/share/dtrain");
  EXPECT_EQ(Settings::from_map({{"HOME", "/h"}, {"XDG_DATA_HOME", "/x"}}).data_dir(), "/x/dtrain");
  EXPECT_EQ(Settings::from_map({{"HOME", "/h"}, {"XDG_DATA_HOME", "/x"}, {"DTRAIN_DATA_DIR", "/d"}}).data_dir(), "/d");
  EXPECT_EQ(Settings::from_map({{"HOME", "/h"}}).calibration_path(), "/h/.cache/dtrain/calibration.json");
  EXPECT_EQ(Settings::from_map({{"DTRAIN_CALIBRATION", "/c.json"}}).calibration_path(), "/c.json");
  EXPECT_EQ(Settings().calibration_path(), "");
}

TEST(Settings, TheTableIsCompleteAndUnique) {
  std::set<std::string> names;
  for (const auto& s : setting_table()) {
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate " << s.name;
    EXPECT_EQ(std::string(s.name).rfind("DTRAIN_", 0), 0u) << s.name;
    EXPECT_NE(std::string(s.meaning), "") << s.name;
    EXPECT_NE(std::string(s.default_text), "") << s.name;
    if (s.type == SettingType::kChoice) {
      EXPECT_NE(std::string(s.choices), "") << s.name;
    }
  }
  EXPECT_NE(find_setting("DTRAIN_TIMEOUT"), nullptr);
  EXPECT_EQ(find_setting("DTRAIN_SHARED_DATA"), nullptr);  // replaced by DTRAIN_DATA_DIR
}

TEST(Settings, DocsTableIsTheRegistrysText) {
  // Tests run in the source tree (see cmake/DtrainLayer.cmake).
  std::ifstream in("docs/SETTINGS.md");
  ASSERT_TRUE(in.good()) << "docs/SETTINGS.md not found from " << "the source tree";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- begin: dtrain env --markdown -->\n", end = "<!-- end: dtrain env --markdown -->";
  auto b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/SETTINGS.md lacks the marker " << begin;
  ASSERT_NE(e, std::string::npos) << "docs/SETTINGS.md lacks the marker " << end;
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), settings_markdown())
      << "docs/SETTINGS.md is out of date: replace the table between the markers with the output of "
         "'build/bin/dtrain env --markdown'";
}

TEST(Timeouts, OneWayToSayTheDefault) {
  EXPECT_EQ(resolve_timeout(kDefaultTimeout, 42), 42);
  EXPECT_EQ(resolve_timeout(5, 42), 5);
  EXPECT_EQ(resolve_timeout(kForever, 42), kForever);
  EXPECT_TRUE(Deadline::after(kForever).infinite());
}

// A deadline from its first check: its limit counts from the first time anything asks (a
// small collective's waits ask only once they sleep), then stays put; 0 has expired at once
// and a negative limit is infinite, as with after().
TEST(Timeouts, DeadlineFromFirstCheck) {
  EXPECT_TRUE(Deadline::from_first_check(kForever).infinite());
  EXPECT_FALSE(Deadline::from_first_check(kForever).expired());
  EXPECT_TRUE(Deadline::from_first_check(0).expired());
  const Clock::time_point made = Clock::now();
  const Deadline d = Deadline::from_first_check(10);
  while (Clock::now() < made + std::chrono::milliseconds(2)) {
  }  // the clock moves on before the first check (bounded: 2 ms)
  const Clock::time_point first = d.time_point();
  EXPECT_GE(first - made, std::chrono::seconds(10) + std::chrono::milliseconds(2)) << "counted from the first check";
  EXPECT_LE(first - Clock::now(), std::chrono::seconds(10));
  EXPECT_FALSE(d.expired());
  EXPECT_EQ(d.time_point(), first) << "fixed once checked";
  EXPECT_GT(d.remaining_seconds(), 9.0);
  EXPECT_LE(d.remaining_ms(), 10000);
}

}  // namespace
}  // namespace dtrain

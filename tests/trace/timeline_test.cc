// The Chrome trace writer: events survive serialize/parse between ranks, and the document
// has the trace-event shape Perfetto reads (complete events with microsecond ts/dur,
// process and thread names per rank).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "trace/timeline.h"

namespace dtrain::trace {
namespace {

TEST(Timeline, RecordsRelativeMicrosecondsFromAnyThread) {
  Timeline t(3, 100.0);
  std::thread a([&] { for (int i = 0; i < 100; ++i) t.add(1, "allreduce", "comm", 100.5, 100.75, "\"bytes\":8"); });
  for (int i = 0; i < 100; ++i) t.add(0, "backward", "compute", 101.0, 101.5);
  a.join();
  auto ev = t.events();
  ASSERT_EQ(ev.size(), 200u);
  for (const auto& e : ev) {
    EXPECT_EQ(e.pid, 3);
    if (e.name == "allreduce") {
      EXPECT_DOUBLE_EQ(e.ts_us, 500000.0);
      EXPECT_DOUBLE_EQ(e.dur_us, 250000.0);
      EXPECT_EQ(e.tid, 1);
    }
  }
}

TEST(Timeline, SerializeParseRoundTripsAndRejectsGarbage) {
  Timeline t(1, 0);
  t.add(0, "step \"quoted\"", "compute", 1, 2, "\"algorithm\":\"ring\",\"bytes\":4096");
  auto back = parse(serialize(t.events()));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].name, "step \"quoted\"");
  EXPECT_EQ(back[0].args, "\"algorithm\":\"ring\",\"bytes\":4096");
  EXPECT_DOUBLE_EQ(back[0].dur_us, 1e6);
  EXPECT_TRUE(parse("").empty());
  EXPECT_THROW(parse("{not json"), Corrupt);
  EXPECT_THROW(parse("[[1,2]]"), Corrupt);
}

TEST(Timeline, ChromeDocumentNamesTracksAndCarriesArgs) {
  Timeline a(0, 0), b(1, 0);
  a.add(0, "forward", "compute", 0.001, 0.002);
  b.add(1, "allreduce bucket 0", "comm", 0.0015, 0.003, "\"algorithm\":\"ring\",\"bytes\":1024");
  std::vector<Event> all = a.events();
  for (auto& e : b.events()) all.push_back(e);
  auto doc = nlohmann::json::parse(chrome_json(all, 2));
  int names = 0, complete = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++names;
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("pid") && e.contains("tid"));
      if (e["name"] == "allreduce bucket 0") {
        EXPECT_EQ(e["args"]["algorithm"], "ring");
        EXPECT_EQ(e["args"]["bytes"], 1024);
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1500.0);
      }
    }
  }
  EXPECT_EQ(names, 2);
  EXPECT_EQ(complete, 2);
  const std::string path = (std::filesystem::temp_directory_path() / "dtrain_timeline_test.json").string();
  write_chrome_trace(path, all, 2);
  std::ifstream in(path);
  EXPECT_NO_THROW(nlohmann::json::parse(in));
  std::filesystem::remove(path);
  EXPECT_THROW(write_chrome_trace("/nonexistent-dir/x.json", all, 2), IoError);
}

}  // namespace
}  // namespace dtrain::trace

// A calibration keeps the verdict tables it did not measure from the file it replaces, on the
// same machine and within the age limit, dated by the calibration that measured them.
#include "plan/calibration_carry.h"

#include <gtest/gtest.h>

#include <map>

namespace dtrain::plan {
namespace {

constexpr double kDay = 86400;
constexpr double kNow = 1.8e9;

// A calibration file's verdict-keyed parts, with `verdict` in each and one rank count.
nlohmann::json file_with(const std::string& verdict, double value, double unix_s) {
  nlohmann::json j;
  j["version"] = 3;
  stamp_calibration(j, unix_s);
  j["compute"]["handoff"]["by_cores"][verdict] = {{"write_after_read_ns_per_byte", value}};
  j["compute"]["mix_gbps_by_cores"][verdict] = nlohmann::json::array({nlohmann::json::array({1 << 20, value})});
  j["links_by_size"]["intra"]["two_rank_by_cores"][verdict] = {{"allreduce", value}};
  j["links_by_size"]["intra"]["by_cores_by_ranks"]["4"][verdict] = {{"gap_factor", value}, {"gap_passes", 3}};
  return j;
}

TEST(CalibrationCarry, KeepsTheOtherPlacementAndNeverReplacesAFreshOne) {
  const nlohmann::json previous = file_with("close", 1.0, kNow - kDay);
  nlohmann::json fresh = file_with("far", 2.0, kNow);
  fresh["links_by_size"]["intra"]["two_rank_by_cores"]["close"] = {{"allreduce", 3.0}};  // measured both
  std::string why;
  const auto carried = carry_placements(previous, &fresh, kNow, kCarryMaxAgeDays, &why);
  EXPECT_EQ(why, "");
  std::vector<std::string> names;
  for (const auto& c : carried) {
    names.push_back(c.table);
    EXPECT_EQ(c.measured_unix, kNow - kDay);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"compute.handoff.by_cores.close", "compute.mix_gbps_by_cores.close",
                                             "links_by_size.intra.by_cores_by_ranks.4.close"}));
  EXPECT_EQ(fresh["compute"]["handoff"]["by_cores"]["close"]["write_after_read_ns_per_byte"], 1.0);
  EXPECT_EQ(fresh["compute"]["handoff"]["by_cores"]["far"]["write_after_read_ns_per_byte"], 2.0);
  EXPECT_EQ(fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["close"]["gap_factor"], 1.0);
  EXPECT_EQ(fresh["links_by_size"]["intra"]["two_rank_by_cores"]["close"]["allreduce"], 3.0);  // its own
  ASSERT_EQ(fresh["carried"].size(), 3u);
  EXPECT_EQ(fresh["carried"][0]["measured_unix"], kNow - kDay);
  EXPECT_EQ(fresh["carried"][0]["measured_at"], utc_minutes(kNow - kDay));
}

TEST(CalibrationCarry, ARankCountTheFreshFileLacksIsCarriedWhole) {
  nlohmann::json previous = file_with("close", 1.0, kNow - kDay);
  previous["links_by_size"]["intra"]["by_cores_by_ranks"]["8"]["far"] = {{"gap_factor", 5.0}, {"gap_passes", 2}};
  nlohmann::json fresh = file_with("close", 2.0, kNow);
  std::string why;
  const auto carried = carry_placements(previous, &fresh, kNow, kCarryMaxAgeDays, &why);
  ASSERT_EQ(carried.size(), 1u);
  EXPECT_EQ(carried[0].table, "links_by_size.intra.by_cores_by_ranks.8.far");
  EXPECT_EQ(fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["8"]["far"]["gap_factor"], 5.0);
}

TEST(CalibrationCarry, WithinAVerdictBothHaveTheTablesOnlyThePreviousOneTimedAreCarried) {
  nlohmann::json previous = file_with("far", 1.0, kNow - kDay);
  previous["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["far"]["allreduce"] = {{1 << 20, 9e-4}};
  nlohmann::json fresh = file_with("far", 2.0, kNow);
  fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["far"]["allreduce_window"] = {{1 << 20, 8e-4}};
  fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["far"]["allgather"] = nlohmann::json::array();
  previous["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["far"]["allgather"] = {{1 << 20, 1e-4}};
  std::string why;
  const auto carried = carry_placements(previous, &fresh, kNow, kCarryMaxAgeDays, &why);
  std::vector<std::string> names;
  for (const auto& c : carried) names.push_back(c.table);
  EXPECT_EQ(names, (std::vector<std::string>{"links_by_size.intra.by_cores_by_ranks.4.far.allgather",
                                             "links_by_size.intra.by_cores_by_ranks.4.far.allreduce"}));
  const auto& far = fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["far"];
  EXPECT_EQ(far["allreduce"], nlohmann::json({{1 << 20, 9e-4}}));
  EXPECT_EQ(far["allreduce_window"], nlohmann::json({{1 << 20, 8e-4}}));  // its own, kept
  EXPECT_EQ(far["gap_factor"], 2.0);                                        // scalars stay its own
  // A verdict's gap factor the fresh file could not time (no gap pass read one placement
  // with its back-to-back pass) comes from the previous file.
  previous["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["close"] = {{"gap_factor", 1.2}, {"gap_passes", 2}};
  fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["close"] = {{"allreduce", {{1 << 20, 1e-4}}}};
  carry_placements(previous, &fresh, kNow, kCarryMaxAgeDays, &why);
  EXPECT_EQ(fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["close"]["gap_factor"], 1.2);
  // The hand-off's verdict is one measurement: never merged field by field.
  EXPECT_EQ(fresh["compute"]["handoff"]["by_cores"]["far"]["write_after_read_ns_per_byte"], 2.0);
}

TEST(CalibrationCarry, InATableBothTimedTheSizesOnlyThePreviousOneHasAreCarriedPointByPoint) {
  nlohmann::json previous = file_with("close", 1.0, kNow - 2 * kDay);
  auto& old = previous["links_by_size"]["intra"]["two_rank_by_cores"]["close"];
  old = {{"allreduce_window", {{16384, 9e-6}, {65536, 1e-5}, {1048576, 1.07e-4}, {67108864, 3e-2}}}};
  nlohmann::json fresh = file_with("close", 2.0, kNow - kDay);
  auto& mine = fresh["links_by_size"]["intra"]["two_rank_by_cores"]["close"];
  mine = {{"allreduce_window", {{16384, 8e-6}, {67108864, 9e-3}}}};
  std::string why;
  const auto carried = carry_placements(previous, &fresh, kNow - kDay, kCarryMaxAgeDays, &why);
  std::vector<std::string> names;
  for (const auto& c : carried) {
    names.push_back(c.table);
    EXPECT_EQ(c.measured_unix, kNow - 2 * kDay);
  }
  const std::string table = "links_by_size.intra.two_rank_by_cores.close.allreduce_window";
  EXPECT_EQ(names, (std::vector<std::string>{table + ".65536", table + ".1048576"}));
  // Its own points kept, the previous one's added at the sizes it lacked, in size order.
  EXPECT_EQ(fresh["links_by_size"]["intra"]["two_rank_by_cores"]["close"]["allreduce_window"],
            nlohmann::json({{16384, 8e-6}, {65536, 1e-5}, {1048576, 1.07e-4}, {67108864, 9e-3}}));
  // Carried again, the points keep the date of the calibration that timed them and age out by it.
  nlohmann::json next = file_with("close", 3.0, kNow);
  next["links_by_size"]["intra"]["two_rank_by_cores"]["close"] = {{"allreduce_window", {{16384, 7e-6}}}};
  const auto again = carry_placements(fresh, &next, kNow, kCarryMaxAgeDays, &why);
  std::map<std::string, double> when;
  for (const auto& c : again) when[c.table] = c.measured_unix;
  EXPECT_EQ(when.at(table + ".65536"), kNow - 2 * kDay);
  EXPECT_EQ(when.at(table + ".67108864"), kNow - kDay);
  nlohmann::json late = file_with("close", 4.0, kNow + 13 * kDay);
  late["links_by_size"]["intra"]["two_rank_by_cores"]["close"] = {{"allreduce_window", {{16384, 7e-6}}}};
  carry_placements(next, &late, kNow + 13 * kDay, kCarryMaxAgeDays, &why);
  EXPECT_EQ(late["links_by_size"]["intra"]["two_rank_by_cores"]["close"]["allreduce_window"],
            nlohmann::json({{16384, 7e-6}, {67108864, 9e-3}}));  // 15 days: 64 KiB and 1 MiB stay behind
}

// A gap factor travels only with the passes it is the lowest of: one pass, or a file that
// does not say, carries its tables but not the factor.
TEST(CalibrationCarry, AGapFactorOfOnePassOrOfAnOlderFileIsNotCarried) {
  nlohmann::json previous = file_with("far", 1.0, kNow - kDay);
  auto& four = previous["links_by_size"]["intra"]["by_cores_by_ranks"]["4"];
  four["far"] = {{"gap_factor", 1.69}, {"allreduce", {{1 << 20, 8e-4}}}};  // written before gap_passes
  four["close"] = {{"gap_factor", 1.95}, {"gap_passes", 1}, {"allreduce", {{1 << 20, 3e-4}}}};
  previous["links_by_size"]["intra"]["by_cores_by_ranks"]["8"]["far"] = {{"gap_factor", 1.3}, {"gap_passes", 2}};
  nlohmann::json fresh = file_with("close", 2.0, kNow);
  fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["4"]["close"] = {{"allreduce", {{1 << 20, 2e-4}}}};
  fresh["links_by_size"]["intra"]["by_cores_by_ranks"]["8"]["far"] = {{"allreduce", {{1 << 20, 9e-4}}}};
  std::string why;
  carry_placements(previous, &fresh, kNow, kCarryMaxAgeDays, &why);
  const auto& got = fresh["links_by_size"]["intra"]["by_cores_by_ranks"];
  EXPECT_EQ(got["4"]["far"]["allreduce"], nlohmann::json({{1 << 20, 8e-4}}));  // the tables come
  EXPECT_FALSE(got["4"]["far"].contains("gap_factor"));                         // the factor does not
  EXPECT_FALSE(got["4"]["close"].contains("gap_factor"));                       // one pass
  EXPECT_EQ(got["8"]["far"]["gap_factor"], 1.3);                                // two passes
  EXPECT_EQ(got["8"]["far"]["gap_passes"], 2);                                  // and says so again
}

TEST(CalibrationCarry, AgesByTheCalibrationThatMeasuredATableNotByTheLastCarry) {
  // Day 0 measured "close"; day 10 and day 13 saw only "far" and carried it; on day 15 the
  // close tables are 15 days old and stay behind, however recently they were carried.
  const double day0 = kNow - 15 * kDay;
  nlohmann::json f0 = file_with("close", 1.0, day0);
  nlohmann::json f10 = file_with("far", 2.0, day0 + 10 * kDay);
  std::string why;
  EXPECT_EQ(carry_placements(f0, &f10, day0 + 10 * kDay, kCarryMaxAgeDays, &why).size(), 4u);
  nlohmann::json f13 = file_with("far", 3.0, day0 + 13 * kDay);
  const auto at13 = carry_placements(f10, &f13, day0 + 13 * kDay, kCarryMaxAgeDays, &why);
  ASSERT_EQ(at13.size(), 4u);
  for (const auto& c : at13) EXPECT_EQ(c.measured_unix, day0) << c.table;
  nlohmann::json f15 = file_with("far", 4.0, kNow);
  EXPECT_TRUE(carry_placements(f13, &f15, kNow, kCarryMaxAgeDays, &why).empty());
  EXPECT_EQ(why, "");
  EXPECT_FALSE(f15.contains("carried"));
  EXPECT_FALSE(f15["compute"]["handoff"]["by_cores"].contains("close"));
}

TEST(CalibrationCarry, AnotherMachineOrVersionOrAnUnstampedFileCarriesNothingAndSaysWhy) {
  nlohmann::json fresh = file_with("far", 2.0, kNow);
  const nlohmann::json untouched = fresh;
  std::string why;
  nlohmann::json other = file_with("close", 1.0, kNow - kDay);
  other["machine"]["cpus"] = 64;
  EXPECT_TRUE(carry_placements(other, &fresh, kNow, kCarryMaxAgeDays, &why).empty());
  EXPECT_NE(why.find("another machine"), std::string::npos) << why;
  nlohmann::json older = file_with("close", 1.0, kNow - kDay);
  older["version"] = 2;
  EXPECT_TRUE(carry_placements(older, &fresh, kNow, kCarryMaxAgeDays, &why).empty());
  EXPECT_NE(why.find("another version"), std::string::npos) << why;
  nlohmann::json unstamped = file_with("close", 1.0, kNow - kDay);
  unstamped.erase("machine");
  EXPECT_TRUE(carry_placements(unstamped, &fresh, kNow, kCarryMaxAgeDays, &why).empty());
  EXPECT_NE(why.find("records no machine"), std::string::npos) << why;
  EXPECT_TRUE(carry_placements(nullptr, &fresh, kNow, kCarryMaxAgeDays, &why).empty());
  EXPECT_EQ(fresh, untouched);
}

TEST(CalibrationCarry, TheFingerprintNamesThisHost) {
  const nlohmann::json m = machine_fingerprint();
  EXPECT_GE(m["cpus"].get<int>(), 1);
  EXPECT_TRUE(m["cpu"].is_string());
  EXPECT_GE(m["cache_bytes"].get<double>(), 0);
  EXPECT_EQ(m, machine_fingerprint());  // the same twice
  nlohmann::json j;
  stamp_calibration(j, kNow + 0.7);
  EXPECT_EQ(j["calibrated_unix"], kNow);
  EXPECT_EQ(j["calibrated_at"], utc_minutes(kNow));
  EXPECT_EQ(utc_minutes(0), "1970-01-01 00:00 UTC");
}

}  // namespace
}  // namespace dtrain::plan

// A run's prediction takes the cores' verdict it was probed with: sampled while it ran, else
// before the ranks started and after the last step (where those differ, half each).
#include "cli/plan_predict.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace dtrain::cli {
namespace {

TEST(PlanPredict, ARunWhoseCoresMovedIsPricedHalfWithEachVerdict) {
  // This process's settings are read on first use: point them at the test's calibration
  // before anything reads them (each test runs in a process of its own under ctest).
  const std::string cal = ::testing::TempDir() + "/predict-cal-" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream o(cal);
    o << R"({"version": 3, "shm": {"alpha_us": 2, "beta_gbps": 3, "gamma_gbps": 4},
             "tcp": {"alpha_us": 10, "beta_gbps": 1, "gamma_gbps": 4},
             "links_by_size": {"intra": {"p": 2, "allreduce": [[1024, 1e-5], [1048576, 1e-3]],
               "allreduce_by_ranks": {"4": [[1024, 1e-4], [1048576, 1e-3]]},
               "by_cores_by_ranks": {"4": {"close": {"allreduce": [[1024, 1e-4], [1048576, 1e-3]]},
                                           "far": {"allreduce": [[1024, 1e-3], [1048576, 1e-2]]}}}}}})";
  }
  ::setenv("DTRAIN_CALIBRATION", cal.c_str(), 1);
  TrainConfig f;
  f.strategy = "localsgd";  // its averages are all-reduces at 4 ranks, priced by the tables
  f.ranks = 4;
  f.model = "mlp:784-256-128-10";
  f.batch = 64;
  auto step_ms = [&](const char* start, const char* end) {
    nlohmann::json measured = {{"cores_probed", start}};
    if (end) measured["cores_probed_end"] = end;
    const nlohmann::json p = prediction_for_run(f, measured);
    EXPECT_FALSE(p.contains("error")) << p.dump();
    return p;
  };
  const auto close = step_ms("close", "close"), far = step_ms("far", "far");
  const auto moved = step_ms("close", "far"), back = step_ms("far", "close");
  ASSERT_GT(far["step_ms"].get<double>(), close["step_ms"].get<double>());
  EXPECT_NEAR(moved["step_ms"].get<double>(), (close["step_ms"].get<double>() + far["step_ms"].get<double>()) / 2, 1e-9);
  EXPECT_NEAR(back["step_ms"].get<double>(), moved["step_ms"].get<double>(), 1e-9);
  EXPECT_EQ(moved["cores"], "far");  // the later probe names it
  EXPECT_EQ(moved["cores_far_share"], 0.5);
  EXPECT_FALSE(close.contains("cores_far_share"));
  EXPECT_NE(prediction_line(moved).find("priced half for cores close and half far (they were close before the run and "
                                        "far after it)"),
            std::string::npos)
      << prediction_line(moved);
  // A run from before the second probe: the launcher's alone.
  EXPECT_EQ(step_ms("far", nullptr)["step_ms"], far["step_ms"]);
  // Sampled while it ran: each verdict in the share of the samples that read it, whatever
  // the probes before and after said; too few samples leave it to the probes.
  auto sampled = [&](int closes, int fars) {
    const nlohmann::json measured = {{"cores_probed", "close"}, {"cores_probed_end", "close"},
                                     {"cores_sampled", {{"close", closes}, {"far", fars}}}};
    return prediction_for_run(f, measured);
  };
  const auto mostly_far = sampled(1, 3);
  EXPECT_NEAR(mostly_far["step_ms"].get<double>(),
              0.25 * close["step_ms"].get<double>() + 0.75 * far["step_ms"].get<double>(), 1e-9);
  EXPECT_EQ(mostly_far["cores"], "far");
  EXPECT_EQ(mostly_far["cores_samples"], 4);
  EXPECT_NE(prediction_line(mostly_far).find("priced for cores far in 75% and close in 25% (4 samples while it ran)"),
            std::string::npos)
      << prediction_line(mostly_far);
  EXPECT_EQ(sampled(0, 5)["step_ms"], far["step_ms"]);
  EXPECT_EQ(sampled(0, 2)["step_ms"], close["step_ms"]);  // two samples: the probes (close, close)
  std::remove(cal.c_str());
}

}  // namespace
}  // namespace dtrain::cli

// A run's prediction takes the cores' verdict it was probed with: sampled while it ran, else
// before the ranks started and after the last step (where those differ, half each).
#include "cli/plan_predict.h"

#include "base/error.h"
#include "cli/commands.h"
#include "plan/cluster.h"
#include "plan/simulator.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace dtrain::cli {
namespace {

// A calibration with 4-rank all-reduce tables for each verdict of the cores, at a fresh path,
// named by DTRAIN_CALIBRATION. This process's settings are read on first use: a test points
// them at its file before anything reads them (each test runs in a process of its own under
// ctest).
std::string use_calibration(const std::string& name) {
  const std::string cal = ::testing::TempDir() + "/" + name + "-" + std::to_string(::getpid()) + ".json";
  std::ofstream o(cal);
  o << R"({"version": 3, "shm": {"alpha_us": 2, "beta_gbps": 3, "gamma_gbps": 4},
           "tcp": {"alpha_us": 10, "beta_gbps": 1, "gamma_gbps": 4},
           "links_by_size": {"intra": {"p": 2, "allreduce": [[1024, 1e-5], [1048576, 1e-3]],
             "allreduce_by_ranks": {"4": [[1024, 1e-4], [1048576, 1e-3]]},
             "by_cores_by_ranks": {"4": {"close": {"allreduce": [[1024, 1e-4], [1048576, 1e-3]]},
                                         "far": {"allreduce": [[1024, 1e-3], [1048576, 1e-2]]}}}}}})";
  ::setenv("DTRAIN_CALIBRATION", cal.c_str(), 1);
  return cal;
}

// The run the tests price: an MLP on 4 ranks, batch 64.
TrainConfig mlp_run(const char* strategy) {
  TrainConfig f;
  f.strategy = strategy;
  f.ranks = 4;
  f.model = "mlp:784-256-128-10";
  f.batch = 64;
  return f;
}

TEST(PlanPredict, ARunWhoseCoresMovedIsPricedHalfWithEachVerdict) {
  const std::string cal = use_calibration("predict-cal");
  const TrainConfig f = mlp_run("localsgd");  // its averages are all-reduces at 4 ranks, priced by the tables
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

// A run that went over tcp is priced on the tcp link, whatever its cores' verdict (which
// chooses among shared-memory paths); across hosts, on the link between them, calibrated or
// this host's loopback (and the source says which).
TEST(PlanPredict, ARunOverTcpIsPricedOnTheTcpLink) {
  const std::string cal = use_calibration("predict-tcp");
  const TrainConfig f = mlp_run("localsgd");
  const nlohmann::json shm = prediction_for_run(f, {{"cores_probed", "close"}, {"transport", "shm"}});
  const nlohmann::json tcp = prediction_for_run(f, {{"cores_probed", "close"}, {"transport", "tcp"}, {"hosts", 1}});
  ASSERT_FALSE(tcp.contains("error")) << tcp.dump();
  EXPECT_GT(tcp["comm_ms"].get<double>(), shm["comm_ms"].get<double>());
  EXPECT_EQ(tcp["fabric"]["transport"], "tcp");
  EXPECT_FALSE(tcp.contains("cores")) << tcp.dump();  // no verdict's shared-memory tables
  EXPECT_FALSE(shm.contains("fabric"));
  EXPECT_NE(tcp["cluster"].get<std::string>().find("over tcp (loopback)"), std::string::npos) << tcp.dump();
  const nlohmann::json hosts =
      prediction_for_run(f, {{"transport", "tcp"}, {"hosts", 2}, {"ranks_per_host", 2}});
  EXPECT_EQ(hosts["fabric"]["hosts"], 2);
  EXPECT_NE(hosts["cluster"].get<std::string>().find("no calibration across hosts"), std::string::npos) << hosts.dump();
  // Namespaces of one machine that the launcher called two hosts but whose ranks shared memory.
  const nlohmann::json same = prediction_for_run(f, {{"cores_probed", "close"}, {"transport", "shm"}, {"hosts", 2}});
  EXPECT_EQ(same["step_ms"], shm["step_ms"]);
  std::remove(cal.c_str());
}

// `dtrain plan train --transport tcp` plans a job over this machine's tcp link, `--hosts H` one
// across H hosts of it; neither with a --cluster file (which has its own links) or --measure
// (which runs the layouts here over shared memory), and H must divide the ranks.
TEST(PlanPredict, PlanTrainPlansForTheFabricAsked) {
  const std::string cal = use_calibration("plan-tcp");
  auto run = [&](std::vector<std::string> extra) {
    Args args = {"train", "--model", "mlp:784-256-128-10", "--ranks", "2", "--top", "1", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(plan_main(args), 0);
    return nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  };
  const nlohmann::json shm = run({}), tcp = run({"--transport", "tcp"}), hosts = run({"--hosts", "2"});
  EXPECT_GT(tcp["layouts"][0]["comm_ms"].get<double>(), shm["layouts"][0]["comm_ms"].get<double>());
  EXPECT_EQ(tcp["cluster"]["nodes"], 1);
  EXPECT_EQ(hosts["cluster"]["nodes"], 2);
  EXPECT_EQ(hosts["cluster"]["ranks_per_node"], 1);
  auto refused = [](std::vector<std::string> args, const std::string& why) {
    args.insert(args.begin(), "train");
    try {
      plan_main(args);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({"--ranks", "3", "--hosts", "2"}, "--hosts 2 must divide --ranks 3");
  refused({"--transport", "tcp", "--cluster", "x.json"}, "a --cluster file describes its own");
  refused({"--hosts", "2", "--measure", "2"}, "--measure runs the layouts here over shared memory");
  refused({"--transport", "udp"}, "--transport takes shm or tcp");
  std::remove(cal.c_str());
}

// A prediction whose unit was priced far past the calibration's shapes says which and how to
// time the model's own lines.
TEST(PlanPredict, TheLineNamesAUnitPricedPastTheTimedShapes) {
  nlohmann::json p = {{"step_ms", 8.7}, {"memory_mb", 47.1}, {"calibrated", true}, {"cluster", "calibrated(x)"}};
  EXPECT_EQ(prediction_line(p).find("priced past"), std::string::npos) << prediction_line(p);
  p["extrapolated"] = {{"unit", "fc1"}, {"kind", "mlp_layer"}, {"params", 1049600.0}, {"largest_timed_params", 200960.0},
                       {"calibrate", "dtrain bench calibrate --models 'mlp:784-1024-1024-1024-10'"}};
  const std::string line = prediction_line(p);
  EXPECT_NE(line.find("its fc1 (1049600 parameters) is priced past the largest unit of its kind the calibration timed "
                      "(200960)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("`dtrain bench calibrate --models 'mlp:784-1024-1024-1024-10'` times this model's own"),
            std::string::npos)
      << line;
}

// `dtrain plan train` says the same where its model's unit is priced far past the timed
// shapes: a note under the table, "extrapolated" in its JSON.
TEST(PlanPredict, PlanTrainNamesAUnitPricedPastTheTimedShapes) {
  plan::Cluster c;
  c.cores_per_node = 2;
  const std::string timed = plan::gpt_block_spec(8, 128, 64);
  const double block_params = plan::ModelSpec::parse(timed).units[1].params;
  plan::UnitCost blk({0, 1e-9}, {0, 2e-9});
  blk.timed[{timed, block_params}] = {{2, 1e-3, 2e-3}, {6, 3e-3, 6e-3}};
  c.units["gpt_block"] = blk;
  const std::string path = ::testing::TempDir() + "/plan-train-cluster-" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream o(path);
    o << plan::cluster_to_json(c).dump();
  }
  auto run = [&](const std::string& model, bool json) {
    Args args = {"train", "--model", model, "--ranks", "2", "--cluster", path, "--top", "1"};
    if (json) args.push_back("--json");
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(plan_main(args), 0);
    return ::testing::internal::GetCapturedStdout();
  };
  const std::string wide = "gpt:layers=2,heads=16,width=1024,context=64";
  const std::string table = run(wide, false);
  EXPECT_NE(table.find("note: its block0 (12596224 parameters) is priced past the largest unit of its kind the "
                       "calibration timed (" +
                       std::to_string(static_cast<int64_t>(block_params)) + ")"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("`dtrain bench calibrate --models '" + wide + "'`"), std::string::npos) << table;
  const nlohmann::json j = nlohmann::json::parse(run(wide, true));
  EXPECT_EQ(j["extrapolated"]["unit"], "block0");
  EXPECT_EQ(j["extrapolated"]["largest_timed_params"].get<double>(), block_params);
  // The timed shape itself: no note.
  EXPECT_EQ(run("gpt:layers=2,heads=8,width=128,context=64", false).find("note:"), std::string::npos);
  std::remove(path.c_str());
}

// `dtrain plan run` prices a recorded run again: the same object the run's own report holds,
// from the run's measurements and its flags; flags that contradict the report are refused.
TEST(PlanPredict, PlanRunPricesARecordedRunAgain) {
  const std::string cal = use_calibration("plan-run-cal");
  TrainConfig f = mlp_run("ps");
  f.servers = 1;
  f.sync = true;
  nlohmann::json run = {{"strategy", "ps"}, {"world_size", 4}, {"model", f.model}, {"batch", 64},
                        {"examples_per_second", 40000.0}, {"train_heap_mb", 4.2},
                        {"cores_sampled", {{"close", 1}, {"far", 3}}}};
  run["prediction"] = prediction_for_run(f, run);
  run["prediction"]["measured_peak_rss_mb"] = 123.0;
  const std::string path = ::testing::TempDir() + "/plan-run-" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream o(path);
    o << run.dump();
  }
  const Args flags = {"-n", "4", "--strategy", "ps", "--servers", "1", "--sync", "--model", f.model, "--batch", "64"};
  Args args = {"run", path};
  args.insert(args.end(), flags.begin(), flags.end());
  ::testing::internal::CaptureStdout();
  const int rc = plan_main(args);
  const nlohmann::json again = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  EXPECT_EQ(rc, 0);
  EXPECT_DOUBLE_EQ(again["step_ms"].get<double>(), run["prediction"]["step_ms"].get<double>());
  // (Settings are read once a process: run alone, as ctest runs each test, the calibration
  // above has far and close tables and the run is priced 3 parts far to 1 close.)
  EXPECT_EQ(again.value("cores_far_share", -1.0), run["prediction"].value("cores_far_share", -1.0));
  EXPECT_DOUBLE_EQ(again["measured_step_ms"].get<double>(), 64 / 40000.0 * 1e3);
  EXPECT_EQ(again["measured_peak_rss_mb"], 123.0);  // the run's, not this process's
  // Without --sync the layout is another (async ps): a different price from the same file.
  Args async = {"run", path, "-n", "4", "--strategy", "ps", "--servers", "1", "--model", f.model, "--batch", "64"};
  ::testing::internal::CaptureStdout();
  plan_main(async);
  EXPECT_NE(nlohmann::json::parse(::testing::internal::GetCapturedStdout())["step_ms"], again["step_ms"]);
  // Flags that contradict the report, a missing file, a file that is not a report.
  Args wrong = args;
  wrong[3] = "8";
  EXPECT_THROW(plan_main(wrong), InvalidArgument);
  EXPECT_THROW(plan_main({"run", path + ".missing", "-n", "4"}), InvalidArgument);
  EXPECT_THROW(plan_main({"run", "--strategy", "ps"}), InvalidArgument);
  {
    std::ofstream o(path);
    o << "{\"not\": \"a report\"}";
  }
  EXPECT_THROW(plan_main(args), InvalidArgument);
  {
    std::ofstream o(path);
    o << "not json";
  }
  EXPECT_THROW(plan_main(args), InvalidArgument);
  std::remove(path.c_str());
  std::remove(cal.c_str());
}

}  // namespace
}  // namespace dtrain::cli

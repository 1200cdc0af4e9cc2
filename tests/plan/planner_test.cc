// The planner: enumeration, memory filter, ranking, scaling; cluster files; measured runs' args.
#include "plan/planner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "base/error.h"
#include "plan/cluster.h"
#include "plan/plan_measure.h"

namespace dtrain::plan {
namespace {

const char* kGpt = "gpt:layers=4,heads=4,width=128,context=64";

Cluster small_machine() {
  Cluster c;
  c.cores_per_node = 2;
  c.intra.alpha_s = 2e-6, c.intra.beta_s_per_byte = 1 / 4e9, c.intra.gamma_s_per_byte = 1 / 13e9;
  c.inter = c.intra;
  return c;
}

TEST(Planner, EnumeratesEveryMeshTheExecutorsRun) {
  ModelSpec m = ModelSpec::parse(kGpt);
  auto ls = enumerate_layouts(m, 4, 48, {});
  std::set<std::string> strategies;
  std::set<std::tuple<int, int, int>> meshes;
  for (const auto& l : ls) {
    EXPECT_EQ(l.ranks(), 4) << l.describe();
    EXPECT_EQ(48 % (l.dp * l.micro), 0) << l.describe();
    EXPECT_TRUE(l.zero < 3 || (l.tp == 1 && l.pp == 1)) << l.describe();
    strategies.insert(l.strategy);
    meshes.insert({l.dp, l.tp, l.pp});
  }
  EXPECT_EQ(strategies, (std::set<std::string>{"ddp", "zero", "tp", "pp", "hybrid"}));
  EXPECT_EQ(meshes.size(), 6u);  // (4,1,1) (2,2,1) (2,1,2) (1,4,1) (1,2,2) (1,1,4)
  auto only_pp = enumerate_layouts(m, 4, 48, {.strategy = "pp"});
  for (const auto& l : only_pp) EXPECT_EQ(l.strategy, "pp");
  EXPECT_FALSE(only_pp.empty());
}

TEST(Planner, RanksByPredictedStepAndDropsWhatDoesNotFit) {
  ModelSpec m = ModelSpec::parse(kGpt);
  Cluster c = small_machine();
  PlanResult r = plan(m, 4, c, 48, {});
  ASSERT_GE(r.ranked.size(), 2u);
  for (size_t i = 1; i < r.ranked.size(); ++i) EXPECT_LE(r.ranked[i - 1].pred.step_s, r.ranked[i].pred.step_s);
  EXPECT_NE(r.why.find("beats"), std::string::npos);
  // Runners-up within 5% of the winner are counted and named as close, with --measure.
  int close = 0;
  for (size_t i = 1; i < r.ranked.size() && r.ranked[i].pred.step_s <= r.ranked[0].pred.step_s * (1 + kCloseShare); ++i)
    ++close;
  EXPECT_EQ(r.close_to_best, close);
  const std::string table = format_plan_table(m, 4, 48, c, r, 3);
  if (close > 0) {
    EXPECT_NE(table.find("close: " + std::to_string(close)), std::string::npos) << table;
    EXPECT_NE(table.find("--measure"), std::string::npos) << table;
  } else {
    EXPECT_EQ(table.find("close:"), std::string::npos) << table;
  }
  // A memory limit between the smallest and the largest prediction drops some layouts.
  double lo = 1e300, hi = 0;
  for (const auto& cand : r.ranked) lo = std::min(lo, cand.pred.memory_b()), hi = std::max(hi, cand.pred.memory_b());
  PlanResult tight = plan(m, 4, c, 48, {.strategy = "", .memory_gb = (lo + hi) / 2 / 1e9});
  EXPECT_GT(tight.dropped_memory, 0);
  for (const auto& cand : tight.ranked) EXPECT_LE(cand.pred.memory_b(), (lo + hi) / 2);
  PlanResult none = plan(m, 4, c, 48, {.strategy = "", .memory_gb = 1e-9});
  EXPECT_TRUE(none.ranked.empty());
  EXPECT_NE(none.why.find("--memory-gb"), std::string::npos);
  // An MLP's candidates hold the epoch's order of the training set they are told of.
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-128-10");
  PlanOptions rows{.strategy = "ddp"};
  const PlanResult fashion = plan(mlp, 2, c, 64, rows);
  rows.train_rows = 1000000;
  const PlanResult million = plan(mlp, 2, c, 64, rows);
  ASSERT_FALSE(fashion.ranked.empty());
  ASSERT_EQ(million.ranked.size(), fashion.ranked.size());
  EXPECT_NEAR(million.ranked[0].pred.memory_b() - fashion.ranked[0].pred.memory_b(), 8.0 * (1000000 - kDefaultTrainRows), 1e-3);
}

TEST(Planner, ScaleStartsAtOneAndFitsBothLaws) {
  ModelSpec m = ModelSpec::parse("mlp:784-256-128-10");
  ScaleResult s = scale(m, small_machine(), 64, 64, {});
  ASSERT_EQ(s.points.size(), 7u);  // 1 .. 64
  EXPECT_DOUBLE_EQ(s.points[0].speedup, 1);
  for (const auto& p : s.points) EXPECT_LE(p.efficiency, 1.0 + 1e-9) << p.ranks;
  EXPECT_GE(s.amdahl_serial, 0);
  EXPECT_LE(s.amdahl_serial, 1);
  std::string svg = svg_chart(s, "t");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("Amdahl"), std::string::npos);
}

TEST(Cluster, FilesRoundTripAndBadFieldsAreNamed) {
  Cluster c = small_machine();
  c.name = "x";
  c.nodes = 2, c.ranks_per_node = 8;
  Cluster back = cluster_from_json(cluster_to_json(c), "mem");
  EXPECT_EQ(back.nodes, 2);
  EXPECT_EQ(back.ranks_per_node, 8);
  EXPECT_NEAR(back.intra.beta_s_per_byte, c.intra.beta_s_per_byte, 1e-20);
  auto j = cluster_to_json(c);
  j.erase("gemm_gflops");
  try {
    cluster_from_json(j, "bad.json");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_gflops"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_cluster("/nonexistent/cluster.json"), IoError);
  EXPECT_EQ(c.compute_slowdown(2), 1.0);
  EXPECT_GT(c.compute_slowdown(4), 2.0 - 1e-12);
}

TEST(Cluster, ShippedExamplesLoad) {
  for (const char* f : {"this-machine.json", "two-hosts-tcp.json", "gpu-cluster.json"}) {
    Cluster c = load_cluster(std::string(DTRAIN_SOURCE_DIR) + "/docs/clusters/" + f);
    EXPECT_GE(c.nodes, 1) << f;
  }
}

TEST(PlanMeasure, TrainArgsRunExactlyTheLayout) {
  Layout l{.strategy = "hybrid", .dp = 2, .tp = 1, .pp = 2, .zero = 1, .micro = 4, .schedule = "interleaved",
           .virtual_stages = 2, .recompute = true};
  auto a = train_args(kGpt, l, 48, "text:x.txt", 5);
  std::string s;
  for (const auto& x : a) s += x + " ";
  for (const char* want : {"--strategy hybrid", "-n 4", "--dp 2 --tp 1 --pp 2", "--zero 1", "--microbatches 4",
                           "--schedule interleaved", "--virtual-stages 2", "--recompute",
                           "--steps 5", "--data text:x.txt", "--batch 48"})
    EXPECT_NE(s.find(want), std::string::npos) << want << " in " << s;
  // dtrain train refuses --bucket-mb for the GPT's strategies; the MLP's ddp takes it.
  EXPECT_EQ(s.find("--bucket-mb"), std::string::npos) << s;
  std::string d;
  for (const auto& x : train_args("mlp:784-10", {.strategy = "ddp", .dp = 2, .bucket_mb = 4}, 64, "", 0)) d += x + " ";
  EXPECT_NE(d.find("--bucket-mb 4"), std::string::npos) << d;
  // Stage 0 is said too: the MLP's ddp defaults to --zero 1.
  EXPECT_NE(d.find("--zero 0"), std::string::npos) << d;
}

TEST(PlanMeasure, SteadyStepIsTheMedianRoundAfterTheFirst) {
  // Rounds of a GPT run at batch 12: a cold first round, then 0.1, 0.3, 0.12 s per item x 12.
  nlohmann::json run = {{"examples_per_second", 5.0},
                        {"epoch_rows", {{{"examples_per_second", 1.0}}, {{"examples_per_second", 10.0}},
                                        {{"examples_per_second", 1.0 / 0.3}}, {{"examples_per_second", 1.0 / 0.12}}}}};
  EXPECT_NEAR(steady_step_s(run, 12), 0.12 * 12, 1e-12);
  // Two later rounds: their mean.
  run["epoch_rows"].erase(3);
  EXPECT_NEAR(steady_step_s(run, 12), (0.1 + 0.3) / 2 * 12, 1e-12);
  // One round (an MLP epoch): the whole run's rate.
  nlohmann::json epoch = {{"examples_per_second", 64000.0}, {"epoch_rows", {{{"examples_per_second", 50.0}}}}};
  EXPECT_NEAR(steady_step_s(epoch, 64), 1e-3, 1e-15);
  EXPECT_EQ(steady_step_s(nlohmann::json::object(), 64), 0);
}

}  // namespace
}  // namespace dtrain::plan

// The simulator on model-parallel layouts: pipeline schedules and their bubble, ranks beyond
// the cores, recompute, ZeRO's shards and steps, tensor parallelism from the split formula and
// from timed blocks (data parallelism and memory: simulator_test.cc).
#include "plan/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "nn/transformer.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline_schedule.h"
#include "plan/closed_forms.h"
#include "plan/sim_costs.h"
#include "plan/sim_test_util.h"
#include "tensor/gemm_small.h"

namespace dtrain::plan {
namespace {

using testing::ideal;
using testing::kGpt;

// More pipeline ranks than cores: the stages computing time-share the cores
// (simulate_model_parallel.cc, simulate_on_cores). Four stages, four micro-batches, GPipe, two
// cores, no cost of sharing (the curve is k / 2 beyond the cores): the steady part cannot run
// four stages at once, so the step is longer than with a core each, and never shorter than
// the stages' work over the two cores.
TEST(Simulator, PipelineRanksBeyondTheCoresQueueForThem) {
  ModelSpec m = ModelSpec::parse(kGpt);
  Cluster fast = ideal(64), two = ideal(2);
  two.slowdown = {{1, 1.0}, {2, 1.0}, {4, 2.0}};
  fast.intra.alpha_s = two.intra.alpha_s = 0, fast.intra.beta_s_per_byte = two.intra.beta_s_per_byte = 0;
  fast.inter = fast.intra, two.inter = two.intra;
  Layout l{.strategy = "pp", .pp = 4, .micro = 4, .schedule = "gpipe"};
  const Prediction free = simulate(m, l, fast, 16), shared = simulate(m, l, two, 16);
  EXPECT_GT(shared.step_s / free.step_s, 1.1);
  EXPECT_LT(shared.step_s / free.step_s, 2.0);  // never more than four stages on two cores
  // The model's work for the step (one stage doing all of it, one micro-batch after another)
  // over the two cores bounds the pipeline's makespan from below.
  Layout whole{.strategy = "pp", .pp = 1, .micro = 4, .schedule = "gpipe"};
  const Prediction w = simulate(m, whole, fast, 16);
  EXPECT_GE(shared.compute_s + shared.bubble_s, 0.999 * (w.compute_s + w.bubble_s) / 2);
  // Stages that never overlap (one micro-batch) do not wait for a core.
  Layout one{.strategy = "pp", .pp = 4, .micro = 1, .schedule = "gpipe"};
  EXPECT_NEAR(simulate(m, one, two, 4).step_s, simulate(m, one, fast, 4).step_s, 1e-12);
}

TEST(Simulator, PipelineBubbleFollowsTheSchedule) {
  // Equal stages (4 blocks on 4 ranks + the light embedding and head), free links.
  ModelSpec m = ModelSpec::parse("gpt:layers=6,heads=4,width=256,context=16");
  Cluster c = ideal();
  c.intra.alpha_s = 0, c.intra.beta_s_per_byte = 0, c.inter = c.intra;
  Prediction g = simulate(m, {.strategy = "pp", .pp = 2, .micro = 8, .schedule = "gpipe"}, c, 16);
  Prediction f = simulate(m, {.strategy = "pp", .pp = 2, .micro = 8, .schedule = "1f1b"}, c, 16);
  EXPECT_NEAR(g.step_s, f.step_s, 0.02 * f.step_s);  // about the same makespan, different memory
  EXPECT_LT(f.activations_b, g.activations_b);
  // Balanced stages: bubble / step = (p-1)/(m+p-1).
  EXPECT_NEAR(g.bubble_s / (g.bubble_s + g.compute_s), bubble_fraction("gpipe", 2, 8, 1), 0.02);
  Prediction i = simulate(m, {.strategy = "pp", .pp = 2, .micro = 8, .schedule = "interleaved", .virtual_stages = 2}, c, 16);
  EXPECT_LT(i.bubble_s, f.bubble_s);
}

TEST(Simulator, RecomputeTradesComputeForActivations) {
  ModelSpec m = ModelSpec::parse(kGpt);
  Cluster c = ideal();
  Prediction a = simulate(m, {.strategy = "pp", .pp = 2, .micro = 4}, c, 8);
  Prediction b = simulate(m, {.strategy = "pp", .pp = 2, .micro = 4, .recompute = true}, c, 8);
  EXPECT_LT(b.activations_b, a.activations_b);
  EXPECT_GT(b.compute_s, a.compute_s);
}

TEST(Simulator, ZeroShardsStateAndTensorParallelSplitsBlocks) {
  ModelSpec m = ModelSpec::parse(kGpt);
  Cluster c = ideal();
  Prediction z0 = simulate(m, {.strategy = "ddp", .dp = 4}, c, 16);
  Prediction z1 = simulate(m, {.strategy = "zero", .dp = 4, .zero = 1}, c, 16);
  Prediction z3 = simulate(m, {.strategy = "zero", .dp = 4, .zero = 3}, c, 16);
  EXPECT_DOUBLE_EQ(z1.optimizer_b, z0.optimizer_b / 4);
  EXPECT_LT(z3.weights_b, z0.weights_b);
  EXPECT_GT(z3.dp_bytes, z1.dp_bytes);
  Prediction t = simulate(m, {.strategy = "tp", .tp = 4}, c, 16);
  EXPECT_LT(t.weights_b, z0.weights_b);
  EXPECT_GT(t.tp_bytes, 0);
  EXPECT_LT(t.activations_b, simulate(m, {.strategy = "single"}, c, 16).activations_b);
}

TEST(Simulator, TensorParallelAndZeroMemoryTerms) {
  ModelSpec m = ModelSpec::parse(kGpt);
  Cluster c = ideal();
  UnitCost block;
  block.act_b_per_elem = 4, block.peak_b_per_elem = 6;
  c.units["gpt_block"] = block;
  // Blocks keep 0.572 + 0.591/t of their tp-1 heap from t = 2 on; the embedding and head
  // (closed form) do not change with t, so the difference between two degrees is the blocks'
  // share.
  Prediction t1 = simulate(m, {.strategy = "tp", .tp = 1}, c, 8), t2 = simulate(m, {.strategy = "tp", .tp = 2}, c, 8),
             t4 = simulate(m, {.strategy = "tp", .tp = 4}, c, 8);
  const double blocks = 4 * 8 * 6 * mem_elems(m.units[1]);  // 4 blocks x 8 items x peak bytes
  // (Less each degree's packing scratch of the small products, whose split shapes differ.)
  auto heap = [&](const Prediction& p, int tp) { return p.activations_b - sim::gpt_scratch_b(m, tp, 8 * m.context, true, true); };
  EXPECT_NEAR(heap(t1, 1) - heap(t2, 2), blocks * (1 - (0.572 + 0.591 / 2)), 1e-6);
  EXPECT_NEAR(heap(t1, 1) - heap(t4, 4), blocks * (1 - (0.572 + 0.591 / 4)), 1e-6);
  // ZeRO 1-2's buffers: shard gradient and parameters (P/N each) + the padded copy of the one
  // bucket (the whole gradient) and its slice.
  Prediction z = simulate(m, {.strategy = "zero", .dp = 4, .zero = 1}, c, 8);
  const double P = m.params() * 4;
  EXPECT_NEAR(z.buffers_b, 2 * P / 4 + P * 1.25, 1e-6);
  EXPECT_DOUBLE_EQ(simulate(m, {.strategy = "zero", .dp = 4, .zero = 0}, c, 8).buffers_b, 0);
  // gossip on a ring of 4 on one host: its mean and its two slots of the shared-memory
  // window, and the epoch's order; across two hosts, two inboxes per neighbour set instead of
  // the slots.
  ModelSpec mlp = ModelSpec::parse("mlp:784-256-10");
  EXPECT_NEAR(simulate(mlp, {.strategy = "gossip", .dp = 4}, ideal(), 64).buffers_b,
              (1 + 2) * mlp.params() * 4 + testing::kOrder, 1e-6);
  Cluster two_hosts = ideal();
  two_hosts.nodes = 2, two_hosts.ranks_per_node = 2;
  EXPECT_NEAR(simulate(mlp, {.strategy = "gossip", .dp = 4}, two_hosts, 64).buffers_b,
              (1 + 2 * 2) * mlp.params() * 4 + testing::kOrder, 1e-6);
  // Through the window the model is copied once, not sent: less communication on one host.
  EXPECT_LT(simulate(mlp, {.strategy = "gossip", .dp = 4}, ideal(), 64).comm_s,
            simulate(mlp, {.strategy = "gossip", .dp = 4}, two_hosts, 64).comm_s);
}

// Every GPT rank keeps the packing scratch of the small products it runs (tensor/gemm_small.h):
// the largest forward's and the largest weight gradient's, a block's products split over tp
// ranks, the head's whole; a stage of blocks alone has no head product, the embedding none.
TEST(Simulator, AGptRankKeepsItsSmallProductsScratch) {
  const ModelSpec m = ModelSpec::parse("gpt:layers=4,heads=4,width=256,context=32");
  const int64_t rows = 4 * 32, w = 256;
  auto fwd = [&](int64_t out, int64_t in) { return gemm_small_scratch_bytes(false, true, rows, out, in); };
  auto wgrad = [&](int64_t out, int64_t in) { return gemm_small_scratch_bytes(true, false, out, in, rows); };
  // The block's products at tp 2: qkv 3w/2 x w, proj w x w/2, fc 4w/2 x w, fc2 w x 4w/2.
  const size_t block_fwd = std::max({fwd(3 * w / 2, w), fwd(w, w / 2), fwd(2 * w, w), fwd(w, 2 * w)});
  const size_t block_wgrad = std::max({wgrad(3 * w / 2, w), wgrad(w, w / 2), wgrad(2 * w, w), wgrad(w, 2 * w)});
  EXPECT_DOUBLE_EQ(sim::gpt_scratch_b(m, 2, rows, true, false), static_cast<double>(block_fwd + block_wgrad));
  // The head: 65 outputs (the default vocabulary) by the width.
  EXPECT_DOUBLE_EQ(sim::gpt_scratch_b(m, 2, rows, false, true), static_cast<double>(fwd(65, w) + wgrad(65, w)));
  EXPECT_DOUBLE_EQ(sim::gpt_scratch_b(m, 2, rows, true, true),
                   static_cast<double>(std::max(block_fwd, fwd(65, w)) + std::max(block_wgrad, wgrad(65, w))));
  EXPECT_DOUBLE_EQ(sim::gpt_scratch_b(m, 2, rows, false, false), 0);
  // (That a rank's heap holds it: Simulator.TensorParallelAndZeroMemoryTerms, each degree's.)
}

TEST(Simulator, ZeroStepsPassOverTheStagesParameters) {
  ModelSpec m = ModelSpec::parse(kGpt);
  Cluster c = ideal();
  c.elementwise_bps = 1e9;
  Prediction z0 = simulate(m, {.strategy = "zero", .dp = 2, .zero = 0}, c, 16);
  Prediction z1 = simulate(m, {.strategy = "zero", .dp = 2, .zero = 1}, c, 16);
  Prediction z2 = simulate(m, {.strategy = "zero", .dp = 2, .zero = 2}, c, 16);
  const double P = m.params();
  // ZeRO-2 re-binds (zero-fills) the gradient each step: 4 bytes a parameter more than ZeRO-1.
  EXPECT_NEAR(z2.optimizer_s - z1.optimizer_s, P * 4 / 1e9, 1e-12);
  // Both pay their passes (12 + 24 / dp bytes a parameter) beyond the sharded step's saving.
  EXPECT_NEAR(z1.optimizer_s, z0.optimizer_s / 2 + P * (12 + 12) / 1e9, 1e-9);
  EXPECT_GT(z1.comm_s, 0);
}

// Rows of `bench tp-blocks` for one shape and degree, every time scaled by k; ranks > tp:
// groups of tp timed among that many ranks (`-n ranks --tp tp`).
std::vector<TpBlockFigure> tp_figure(const std::string& spec, int tp, double k, int ranks = 0) {
  nlohmann::json rows = nlohmann::json::array();
  for (int items : {2, 8}) {
    rows.push_back({{"spec", spec}, {"tp", tp}, {"items", items}, {"fwd_s", k * 1e-3 * items}, {"bwd_s", k * 2e-3 * items}});
    if (ranks > tp) rows.back()["ranks"] = ranks;
  }
  return tp_blocks_from_json(rows, "test");
}

TEST(Simulator, TimedTensorParallelBlocksScaleTheSplitFormula) {
  ModelSpec m = ModelSpec::parse(kGpt);  // heads 4, width 64, context 32
  Cluster c = ideal(2);
  const Layout tp2{.strategy = "tp", .tp = 2}, tp4{.strategy = "tp", .tp = 4}, single{.strategy = "single"};
  const double plain = simulate(m, tp2, c, 8).step_s;
  std::vector<double> steps;
  for (double k : {1.0, 2.0, 3.0}) {
    c.tp_blocks = tp_figure("gpt:layers=1,heads=4,width=64,context=32", 2, k);
    steps.push_back(simulate(m, tp2, c, 8).step_s);
  }
  // The blocks' part follows the timed figure linearly; the rest (embedding, head,
  // optimizer) does not move.
  EXPECT_NE(steps[0], plain);
  EXPECT_GT(steps[1], steps[0]);
  EXPECT_NEAR(steps[2] - steps[1], steps[1] - steps[0], 1e-9 * steps[2]);
  // Other degrees and tp-free layouts are untouched.
  Cluster none = ideal(2);
  EXPECT_DOUBLE_EQ(simulate(m, tp4, c, 8).step_s, simulate(m, tp4, none, 8).step_s);
  EXPECT_DOUBLE_EQ(simulate(m, single, c, 8).step_s, simulate(m, single, none, 8).step_s);
  // A shape twice as wide borrows the ratio; one four times as wide does not.
  ModelSpec wide = ModelSpec::parse("gpt:layers=4,heads=4,width=128,context=32");
  ModelSpec wider = ModelSpec::parse("gpt:layers=4,heads=4,width=256,context=32");
  EXPECT_NE(simulate(wide, tp2, c, 8).step_s, simulate(wide, tp2, none, 8).step_s);
  EXPECT_DOUBLE_EQ(simulate(wider, tp2, c, 8).step_s, simulate(wider, tp2, none, 8).step_s);
}

// A tp group inside a job whose ranks outnumber the cores waits as the job's crowding
// dictates: its blocks take the ratio of the block timed at the job's rank count (8 here),
// not of the one timed alone at its own degree. With a core per rank its own degree's.
// (Four ranks here: the test model's 4 heads allow tp up to 4.)
TEST(Simulator, TensorParallelInACrowdedJobTakesTheJobsTimedBlock) {
  ModelSpec m = ModelSpec::parse(kGpt);
  const Layout hybrid{.strategy = "hybrid", .dp = 1, .tp = 2, .pp = 2, .micro = 2};
  const std::string shape = "gpt:layers=1,heads=4,width=64,context=32";
  auto with = [&](int cores, double k2, double k4) {
    Cluster c = ideal(cores);
    c.tp_blocks = tp_figure(shape, 2, k2);
    for (auto& f : tp_figure(shape, 4, k4)) c.tp_blocks.push_back(f);
    return simulate(m, hybrid, c, 16).step_s;
  };
  // Two cores, four ranks: the 4-rank figure decides, the 2-rank one does not.
  EXPECT_DOUBLE_EQ(with(2, 1, 3), with(2, 2, 3));
  EXPECT_GT(with(2, 1, 3), with(2, 1, 2));
  // Four cores: the other way round.
  EXPECT_DOUBLE_EQ(with(4, 2, 1), with(4, 2, 3));
  EXPECT_GT(with(4, 3, 1), with(4, 2, 1));
}

// Where the block of this degree was timed among the job's ranks (groups of 2 side by side in
// a 4-rank job, as the hybrid runs them), that figure decides, not the one of 4 in one group
// nor the group alone; a job of another rank count does not take it.
TEST(Simulator, TensorParallelGroupsTimedAmongTheJobsRanksDecideFirst) {
  ModelSpec m = ModelSpec::parse(kGpt);
  const Layout hybrid{.strategy = "hybrid", .dp = 1, .tp = 2, .pp = 2, .micro = 2};
  const Layout alone{.strategy = "tp", .tp = 2};
  const std::string shape = "gpt:layers=1,heads=4,width=64,context=32";
  auto with = [&](const Layout& l, double k2, double k4, double crowd) {
    Cluster c = ideal(2);
    c.tp_blocks = tp_figure(shape, 2, k2);
    for (auto& f : tp_figure(shape, 4, k4)) c.tp_blocks.push_back(f);
    if (crowd > 0)
      for (auto& f : tp_figure(shape, 2, crowd, 4)) c.tp_blocks.push_back(f);
    return simulate(m, l, c, 16).step_s;
  };
  // With the crowd's figure, neither the 2- nor the 4-rank one moves the 4-rank hybrid.
  EXPECT_DOUBLE_EQ(with(hybrid, 1, 3, 2), with(hybrid, 2, 5, 2));
  EXPECT_GT(with(hybrid, 1, 3, 3), with(hybrid, 1, 3, 2));
  // Without it, the 4-rank figure decides, as before.
  EXPECT_GT(with(hybrid, 1, 3, 0), with(hybrid, 1, 2, 0));
  // A 2-rank tp job (a core each) keeps its own degree's figure, whatever the crowd's says.
  EXPECT_DOUBLE_EQ(with(alone, 1, 3, 2), with(alone, 1, 3, 5));
  EXPECT_GT(with(alone, 2, 3, 2), with(alone, 1, 3, 2));
}

}  // namespace
}  // namespace dtrain::plan

// The simulator's compute from the calibration's unit lines (plan/calibrate_units.h): the MLP
// step around its layers and the gather of its rows, the input gradients every layer but the
// first pays, and models whose shape the calibration did not time (an MLP between or beyond
// the timed ones, a GPT of another width), against a GPT of a timed shape; and each unit's
// memory where the calibration measured none (plan/unit_memory.h).
#include "plan/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "plan/calibrate_units.h"
#include "plan/sim_costs.h"
#include "plan/sim_test_util.h"
#include "plan/unit_memory.h"

namespace dtrain::plan {
namespace {

using testing::ideal;
using testing::kGpt;

TEST(Simulator, TheMlpStepGathersItsRowsAtTheCalibratedRate) {
  ModelSpec m = ModelSpec::parse("mlp:100-10");  // 100 inputs: 400 bytes a row
  Cluster c = ideal();
  const Prediction none = simulate(m, {.strategy = "single"}, c, 50);
  c.gather_bps = 1e6;
  const Prediction with = simulate(m, {.strategy = "single"}, c, 50);
  EXPECT_NEAR(with.compute_s - none.compute_s, 50 * 400.0 / 1e6, 1e-12);
  // Read from a cluster file; absent, there is no term.
  nlohmann::json j = cluster_to_json(c);
  EXPECT_DOUBLE_EQ(cluster_from_json(j, "file").gather_bps, 1e6);
  j.erase("gather_gbps");
  EXPECT_DOUBLE_EQ(cluster_from_json(j, "file").gather_bps, 0);
  // A step line timed on random rows of a large dataset carries the gather itself: the term
  // is not added again. Without a step line there is nothing that carries it.
  c.mlp_step_random_rows = true;
  EXPECT_NEAR(simulate(m, {.strategy = "single"}, c, 50).compute_s, with.compute_s, 1e-12);
  UnitCost step;
  step.fwd.s_per_work = 1e-9;
  c.units["mlp_step"] = step;
  const double around = 50 * mlp_step_work(m) * 1e-9;
  EXPECT_NEAR(simulate(m, {.strategy = "single"}, c, 50).compute_s, none.compute_s + around, 1e-12);
  c.mlp_step_random_rows = false;  // an older file's step line: hot rows, the term on top
  EXPECT_NEAR(simulate(m, {.strategy = "single"}, c, 50).compute_s, with.compute_s + around, 1e-12);
  // The flag round-trips, and must be a boolean.
  c.mlp_step_random_rows = true;
  j = cluster_to_json(c);
  EXPECT_TRUE(cluster_from_json(j, "file").mlp_step_random_rows);
  j["mlp_step_random_rows"] = 1;
  EXPECT_THROW(cluster_from_json(j, "file"), InvalidArgument);
}

// Every MLP layer but the first computes its input's gradient in backward, which the timed
// layers do not: priced as the layer's forward. An MLP the calibration did not time spends
// around its layers what the timed ones spent beyond their input gradients and gather,
// interpolated in log(parameters) between the two on either side (the nearest beyond them).
TEST(Simulator, AnUntimedMlpPaysItsInputGradientsAndTheTimedOnesRest) {
  Cluster c = ideal();
  c.units["mlp_layer"] = {{0, 1e-9}, {0, 2e-9}};  // forward 1 ns a work, backward 2
  auto work = [](const ModelSpec& m, size_t from) {
    double w = 0;
    for (size_t i = from; i < m.units.size(); ++i) w += 50 * unit_work(m.units[i]);
    return w;
  };
  auto layers_s = [&](const ModelSpec& m) { return 3e-9 * work(m, 0); };
  auto input_grads_s = [&](const ModelSpec& m) { return 1e-9 * work(m, 1); };
  auto compute = [&](const ModelSpec& m) { return simulate(m, {.strategy = "single"}, c, 50).compute_s; };
  const ModelSpec small = ModelSpec::parse("mlp:100-10"), wide = ModelSpec::parse("mlp:100-400-10");
  // Without a step line the layers still pay their input gradients; without a layer line the
  // formula's backward (twice the forward) already holds them.
  EXPECT_NEAR(compute(wide), layers_s(wide) + input_grads_s(wide), 1e-12);
  Cluster bare = ideal();
  const ModelSpec two = ModelSpec::parse("mlp:100-40-10");
  EXPECT_NEAR(simulate(two, {.strategy = "single"}, bare, 50).compute_s,
              3 * 50 * (two.units[0].fwd_flops + two.units[1].fwd_flops) / bare.gemm_flops, 1e-12);
  // The timed steps: the gather of 400-byte rows at 1 MB/s, the input gradients, and 100 us
  // (small) and 300 us (wide) beyond them, in the lines as a calibration on random rows
  // times them.
  c.gather_bps = 1e6, c.mlp_step_random_rows = true;
  const double gather = 50 * 400 / 1e6;
  UnitCost step;
  for (const auto& [m, rest] : {std::pair{small, 100e-6}, std::pair{wide, 300e-6}})
    for (double items : {50.0, 100.0})
      step.timed[{m.spec, m.params()}].push_back({items, (items / 50) * (gather + input_grads_s(m)) + rest, 0});
  c.units["mlp_step"] = step;
  // A timed model takes its own points: its step in all.
  EXPECT_NEAR(compute(small), layers_s(small) + gather + 100e-6, 1e-12);
  EXPECT_NEAR(compute(wide), layers_s(wide) + input_grads_s(wide) + gather + 300e-6, 1e-12);
  // Between them, in log(parameters), with its own input gradients.
  const ModelSpec mid = two;
  const double x = std::log(mid.params() / small.params()) / std::log(wide.params() / small.params());
  ASSERT_GT(x, 0.3);
  ASSERT_LT(x, 0.7);
  EXPECT_NEAR(compute(mid), layers_s(mid) + input_grads_s(mid) + gather + 100e-6 + x * 200e-6, 1e-12);
  // Beyond them, the nearest one's rest.
  const ModelSpec wider = ModelSpec::parse("mlp:100-1000-10"), smaller = ModelSpec::parse("mlp:100-2-10");
  EXPECT_NEAR(compute(wider), layers_s(wider) + input_grads_s(wider) + gather + 300e-6, 1e-12);
  EXPECT_NEAR(compute(smaller), layers_s(smaller) + input_grads_s(smaller) + gather + 100e-6, 1e-12);
  // A model with another input width gathers its own rows.
  const ModelSpec narrow = ModelSpec::parse("mlp:50-40-10");
  const double xn = std::log(narrow.params() / small.params()) / std::log(wide.params() / small.params());
  EXPECT_NEAR(compute(narrow), layers_s(narrow) + input_grads_s(narrow) + 50 * 200 / 1e6 + 100e-6 + xn * 200e-6, 1e-12);
}

// A layer is timed alone, so an MLP the calibration did not time prices each layer by the
// timed layers: one of its shape (in any timed model) gives its own points; else the timed
// layers of its role give their cost per work at these items, interpolated between the two
// around it (the nearest one's beyond them): a hidden layer in log of its narrower side, a
// last layer in log(parameters). The kind's one plane (here 100 ns a work) prices none of them.
TEST(Simulator, AnUntimedMlpLayerTakesTheTimedLayersOfItsShapeOrRole) {
  Cluster c = ideal();
  UnitCost layers{{0, 100e-9}, {0, 100e-9}};
  // Two timed models, each layer at 10 and 20 examples: 100-40-10 at 1 ns a work forward and
  // 2 backward, 100-400-10 at 3 and 5.
  const ModelSpec small = ModelSpec::parse("mlp:100-40-10"), wide = ModelSpec::parse("mlp:100-400-10");
  for (const auto& [m, f, b] : {std::tuple{small, 1e-9, 2e-9}, std::tuple{wide, 3e-9, 5e-9}})
    for (const Unit& u : m.units)
      for (double items : {10.0, 20.0})
        layers.timed[{m.spec, u.params}].push_back({items, f * items * unit_work(u), b * items * unit_work(u)});
  c.units["mlp_layer"] = layers;
  // 100-400-20: its first layer is the wide model's (its own points, at 15 examples between
  // them); its last layer, 400x20, has more parameters than either timed last layer: the
  // wide one's rate.
  const ModelSpec m = ModelSpec::parse("mlp:100-400-20");
  const auto first = sim::untimed_mlp_layer(c, m.units[0], m.spec, 15);
  ASSERT_TRUE(first.has_value());
  EXPECT_NEAR(first->f, 3e-9 * 15 * unit_work(m.units[0]), 1e-15);
  EXPECT_NEAR(first->b, 5e-9 * 15 * unit_work(m.units[0]), 1e-15);
  const auto last = sim::untimed_mlp_layer(c, m.units[1], m.spec, 15);
  ASSERT_TRUE(last.has_value());
  EXPECT_NEAR(last->f, 3e-9 * 15 * unit_work(m.units[1]), 1e-15);
  // 100-70-10: its 100x70 layer's narrower side, 70, lies between the timed hidden layers'
  // 40 and 100; its last layer, 70x10, between 40x10 and 400x10 in parameters.
  const ModelSpec mid = ModelSpec::parse("mlp:100-70-10");
  auto between = [](double x, double lo, double hi) {
    const double at = std::log(x / lo) / std::log(hi / lo);
    EXPECT_GT(at, 0.2);
    EXPECT_LT(at, 0.8);
    return at;
  };
  const double xs[] = {between(70, 40, 100), between(mid.units[1].params, small.units[1].params, wide.units[1].params)};
  for (size_t i = 0; i < 2; ++i) {
    const sim::Pass ps = sim::unit_pass(c, mid.units[i], 10, 1, mid.spec);
    EXPECT_NEAR(ps.f, (1e-9 + 2e-9 * xs[i]) * 10 * unit_work(mid.units[i]), 1e-15) << i;
    EXPECT_NEAR(ps.b, (2e-9 + 3e-9 * xs[i]) * 10 * unit_work(mid.units[i]), 1e-15) << i;
  }
  // A hidden layer is placed by its narrower side, not its parameters: 100-40-400-10's
  // 40x400 has ten times 100x40's parameters and its narrower side, 40.
  const ModelSpec deep = ModelSpec::parse("mlp:100-40-400-10");
  EXPECT_NEAR(sim::untimed_mlp_layer(c, deep.units[1], deep.spec, 10)->f, 1e-9 * 10 * unit_work(deep.units[1]), 1e-15);
  // A timed model keeps its own points; a GPT, a model without timed layers or without one of
  // the layer's role has none.
  EXPECT_FALSE(sim::untimed_mlp_layer(c, small.units[0], small.spec, 10).has_value());
  const ModelSpec gpt = ModelSpec::parse(kGpt);
  EXPECT_FALSE(sim::untimed_mlp_layer(c, gpt.units[1], gpt.unit_spec, 10).has_value());
  Cluster plane = ideal();
  plane.units["mlp_layer"] = {{0, 100e-9}, {0, 100e-9}};
  EXPECT_FALSE(sim::untimed_mlp_layer(plane, mid.units[0], mid.spec, 10).has_value());
  EXPECT_NEAR(sim::unit_pass(plane, mid.units[0], 10, 1, mid.spec).f, 100e-9 * 10 * unit_work(mid.units[0]), 1e-15);
  Cluster hidden_only = c;
  hidden_only.units["mlp_layer"].timed.erase({small.spec, small.units[1].params});
  hidden_only.units["mlp_layer"].timed.erase({wide.spec, wide.units[1].params});
  EXPECT_FALSE(sim::untimed_mlp_layer(hidden_only, mid.units[1], mid.spec, 10).has_value());
}

// The calibration times one block of a shape and files its lines under the one-block spec
// (gpt_block@gpt:layers=1,...); a GPT of that shape with any number of layers prices its
// blocks with them, not with the kind's line over every timed shape.
TEST(Simulator, AGptTakesTheLinesTimedForItsShape) {
  Cluster c = ideal();
  UnitCost own, other;
  own.fwd.s_per_work = 1e-9, own.bwd.s_per_work = 2e-9;
  other.fwd.s_per_work = 5e-9, other.bwd.s_per_work = 10e-9;
  c.units["gpt_block"] = other;
  c.units["gpt_block@" + gpt_block_spec(4, 64, 32)] = own;
  const ModelSpec m = ModelSpec::parse(kGpt);  // 4 layers of heads 4, width 64, context 32
  EXPECT_EQ(m.unit_spec, "gpt:layers=1,heads=4,width=64,context=32");
  EXPECT_EQ(c.unit_for("gpt_block", m.unit_spec), &c.units.at("gpt_block@" + m.unit_spec));
  const Prediction p = simulate(m, {.strategy = "single"}, c, 8);
  double blocks = 0;
  for (const Unit& u : m.units)
    if (u.block) blocks += 8 * unit_work(u) * (1e-9 + 2e-9);
  EXPECT_GE(p.compute_s, blocks * 0.999);
  EXPECT_LT(p.compute_s, blocks * 2);  // far below the other shape's 5x
  // The MLP's own spec is its unit spec.
  EXPECT_EQ(ModelSpec::parse("mlp:100-10").unit_spec, "mlp:100-10");
}

// A GPT of a width the calibration did not time takes the timed widths' cost per work at its
// items, interpolated in log(parameters) between the two around it, the nearest one's beyond
// them; never the one line over every width, which follows neither.
TEST(Simulator, AGptOfAnUntimedWidthTakesTheTimedWidthsCostPerWork) {
  Cluster c = ideal();
  const std::string w64 = gpt_block_spec(4, 64, 32), w256 = gpt_block_spec(4, 256, 32);
  UnitCost narrow, wide, line;
  narrow.fwd.s_per_work = 4e-9, narrow.bwd.s_per_work = 8e-9;
  wide.fwd.s_per_work = 1e-9, wide.bwd.s_per_work = 2e-9;
  line.fwd.s_per_work = 100e-9, line.bwd.s_per_work = 100e-9;
  c.units["gpt_block"] = line;
  c.units["gpt_block@" + w64] = narrow;
  c.units["gpt_block@" + w256] = wide;
  c.units[std::string(kZero3Block) + "@" + w64] = wide;  // the ZeRO-3 block: its own entries
  c.units[std::string(kZero3Block) + "@" + w256] = narrow;
  auto block = [](const std::string& spec) { return ModelSpec::parse(spec).units[1]; };
  const double p64 = block(w64).params, p256 = block(w256).params;
  const std::string w128 = gpt_block_spec(4, 128, 32);
  const Unit b128 = block(w128);
  const double x = std::log(b128.params / p64) / std::log(p256 / p64);
  ASSERT_GT(x, 0.3);
  ASSERT_LT(x, 0.7);
  const auto mid = sim::untimed_gpt_rate(c, "gpt_block", w128, b128.params, 6);
  ASSERT_TRUE(mid.has_value());
  EXPECT_NEAR(mid->f, 4e-9 - 3e-9 * x, 1e-18);
  EXPECT_NEAR(mid->b, 8e-9 - 6e-9 * x, 1e-18);
  // The pass prices the unit's own work at that rate.
  const sim::Pass ps = sim::unit_pass(c, b128, 6, 1, w128);
  EXPECT_NEAR(ps.f, mid->f * 6 * unit_work(b128), 1e-15);
  EXPECT_NEAR(ps.b, mid->b * 6 * unit_work(b128), 1e-15);
  // Beyond the timed widths: the nearest one's rate.
  const std::string w512 = gpt_block_spec(4, 512, 32), w32 = gpt_block_spec(4, 32, 32);
  EXPECT_NEAR(sim::untimed_gpt_rate(c, "gpt_block", w512, block(w512).params, 6)->f, 1e-9, 1e-18);
  EXPECT_NEAR(sim::untimed_gpt_rate(c, "gpt_block", w32, block(w32).params, 6)->b, 8e-9, 1e-18);
  // The ZeRO-3 block from its own kind's entries.
  EXPECT_NEAR(sim::untimed_gpt_rate(c, kZero3Block, w512, block(w512).params, 6)->f, 4e-9, 1e-18);
  // A timed width keeps its own lines; an MLP, the layernorm and a kind with no timed shape
  // have no rate.
  EXPECT_FALSE(sim::untimed_gpt_rate(c, "gpt_block", w64, p64, 6).has_value());
  EXPECT_FALSE(sim::untimed_gpt_rate(c, "mlp_layer", "mlp:100-10", 1010, 6).has_value());
  EXPECT_FALSE(sim::untimed_gpt_rate(c, "gpt_layernorm", w128, 256, 6).has_value());
  EXPECT_FALSE(sim::untimed_gpt_rate(c, "gpt_head", w128, 1000, 6).has_value());
}

TEST(Simulator, AGptOfAnUntimedContextPaysItsAttentionPerProbability) {
  // Blocks whose time is a dense rate per width over their work less attention, plus
  // tau0 + tau1 x head_dim a probability (heads x context^2 per sequence): widths 128 and 256
  // timed at context 64 and at context 256 (heads 8 and 4: head dimensions 16 and 64). The
  // pairs of one width tell tau0 and tau1, and an untimed context or head count of a timed
  // width is priced exactly; one rate per work from the timed shapes reads it short.
  constexpr double kTau0 = 2e-9, kTau1 = 0.1e-9;
  auto block = [](const std::string& spec) { return ModelSpec::parse(spec).units[1]; };
  auto truth = [&](int64_t heads, int64_t width, int64_t context, double scale) {
    const Unit u = block(gpt_block_spec(heads, width, context));
    const double hd = static_cast<double>(width) / heads, rho = (width == 128 ? 20e-12 : 11e-12) * scale;
    return rho * (unit_work(u) - 4 * hd * u.score_elems) + u.score_elems * scale * (kTau0 + kTau1 * hd);
  };
  auto timed = [&](Cluster& c, int64_t heads, int64_t width, int64_t context) {
    const std::string spec = gpt_block_spec(heads, width, context);
    UnitCost u;  // per work, so that a pass over any items is `items` times the truth
    u.fwd.s_per_work = truth(heads, width, context, 1) / unit_work(block(spec));
    u.bwd.s_per_work = truth(heads, width, context, 2) / unit_work(block(spec));
    c.units["gpt_block@" + spec] = u;
  };
  Cluster c = ideal();
  c.units["gpt_block"] = UnitCost{};
  timed(c, 8, 128, 64), timed(c, 8, 256, 64);
  Cluster short_only = c;
  timed(c, 8, 128, 256), timed(c, 4, 256, 256);
  struct Case {
    int64_t heads, width, context;
  };
  for (const Case& t : {Case{8, 256, 512}, Case{2, 128, 128}, Case{16, 256, 64}, Case{8, 128, 32}}) {
    const std::string spec = gpt_block_spec(t.heads, t.width, t.context);
    const Unit u = block(spec);
    const auto r = sim::untimed_gpt_rate(c, "gpt_block", spec, u.params, 6);
    ASSERT_TRUE(r.has_value()) << spec;
    EXPECT_NEAR(r->f * unit_work(u) / truth(t.heads, t.width, t.context, 1), 1, 1e-9) << spec;
    EXPECT_NEAR(r->b * unit_work(u) / truth(t.heads, t.width, t.context, 2), 1, 1e-9) << spec;
  }
  // Without the context-256 shapes: the timed shapes' rate per work, short at context 512.
  const std::string longer = gpt_block_spec(8, 256, 512);
  const auto flat = sim::untimed_gpt_rate(short_only, "gpt_block", longer, block(longer).params, 6);
  ASSERT_TRUE(flat.has_value());
  EXPECT_LT(flat->f * unit_work(block(longer)), 0.8 * truth(8, 256, 512, 1));
  // One head dimension among the pairs (width 128's alone): one figure a probability, exact
  // at that head dimension.
  Cluster one = short_only;
  timed(one, 8, 128, 256);
  const std::string hd16 = gpt_block_spec(4, 64, 128);  // width 64 is priced at width 128's dense rate
  const Unit u16 = block(hd16);
  const double rho128 = 20e-12, expect = rho128 * (unit_work(u16) - 4 * 16 * u16.score_elems) + u16.score_elems * (kTau0 + kTau1 * 16);
  EXPECT_NEAR(sim::untimed_gpt_rate(one, "gpt_block", hd16, u16.params, 6)->f * unit_work(u16) / expect, 1, 1e-9);
}

// A cluster whose calibration measured no memory prices every unit the code runs from the
// code's own figures, never the textbook closed form; a unit it did measure keeps its own
// figures; a kind the code does not know has none.
TEST(UnitMemory, TheCodesOwnFiguresStandInForAnUncalibratedCluster) {
  for (const char* kind : {"gpt_embedding", "gpt_block", "gpt_head", "mlp_layer"}) {
    const UnitCost* d = default_unit_memory(kind);
    ASSERT_NE(d, nullptr) << kind;
    EXPECT_TRUE(d->has_memory()) << kind;
    EXPECT_GT(d->peak_b_per_elem, d->act_b_per_elem) << kind << ": the high-water mark holds the gradients too";
  }
  EXPECT_EQ(default_unit_memory("conv_layer"), nullptr);
  Cluster c = ideal();
  EXPECT_EQ(unit_memory_for(c, "gpt_block", kGpt), default_unit_memory("gpt_block"));
  UnitCost timed;
  timed.act_b_per_elem = 7, timed.peak_b_per_elem = 11;
  c.units["gpt_block"] = timed;
  const UnitCost* got = unit_memory_for(c, "gpt_block", kGpt);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->peak_b_per_elem, 11);
  c.units["gpt_block"] = UnitCost{};  // timed, but no memory measured: the defaults again
  EXPECT_EQ(unit_memory_for(c, "gpt_block", kGpt), default_unit_memory("gpt_block"));
}

// The pipeline's recompute checkpoints each unit's input and re-runs one unit at a time in
// backward (parallel/pipeline.cc), so even a stage with one micro-batch in flight holds one
// unit's activations at a time and its checkpoints instead of every unit's activations; it
// pays every unit's forward again. ZeRO-3 re-runs one block at a time too.
TEST(UnitMemory, RecomputeHoldsOneUnitAtATime) {
  ModelSpec m = ModelSpec::parse(kGpt);
  Cluster c = ideal();
  const Prediction a = simulate(m, {.strategy = "pp", .pp = 2, .micro = 1}, c, 8);
  const Prediction b = simulate(m, {.strategy = "pp", .pp = 2, .micro = 1, .recompute = true}, c, 8);
  EXPECT_LT(b.activations_b, 0.6 * a.activations_b);
  EXPECT_GT(b.compute_s, a.compute_s);
  const Prediction z = simulate(m, {.strategy = "zero", .dp = 2, .zero = 3}, c, 8);
  const Prediction d = simulate(m, {.strategy = "zero", .dp = 2, .zero = 2}, c, 8);
  EXPECT_LT(z.activations_b, 0.8 * d.activations_b);
}

// A message that arrives before its receive is posted waits in the receiver's heap (the
// transport's early buffers). Under GPipe a stage's neighbour runs ahead by its M micro-batches
// in flight less the receives posted ahead (2), so each micro-batch more costs every stage
// one more activation beside what it keeps itself. With recompute a stage keeps one
// activation a unit but its first per micro-batch (the received input stands for it), so
// on the GPT's 6 units cut 3 + 3 the last stage keeps 3 a micro-batch, and holds 4.
TEST(UnitMemory, AStageHoldsItsNeighboursEarlyMessages) {
  ModelSpec m = ModelSpec::parse(kGpt);  // width 64, context 32
  Cluster c = ideal();
  const double act = 2 * 32 * 64 * 4.0;  // two sequences a micro-batch
  auto at = [&](int micro) {
    return simulate(m, {.strategy = "pp", .pp = 2, .micro = micro, .schedule = "gpipe", .recompute = true}, c, 2 * micro);
  };
  const Prediction four = at(4), eight = at(8);
  EXPECT_DOUBLE_EQ((eight.activations_b - four.activations_b) / act, 4 * 4.0);
}

}  // namespace
}  // namespace dtrain::plan

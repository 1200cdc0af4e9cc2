// The pipeline executor: pipeline training equals one rank with the same minibatch (losses,
// validation loss and final parameters) for GPipe, 1F1B and interleaved schedules, with and
// without recompute (per unit, tensor-parallel stages included); the executor's measured in-flight micro-batches and activation bytes
// show GPipe holding M and 1F1B at most P - s; balanced partitioning; a rank that dies
// mid-pipeline makes its neighbour fail with an error naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <string>

#include "autograd/ops.h"
#include "base/error.h"
#include "parallel/mp_test_util.h"
#include "parallel/pipeline.h"
#include "parallel/pipeline_mlp.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

using testing::max_diff;
using testing::run_world;
using testing::tiny_mp;
using testing::train_mesh;

struct PipeCase {
  int pp;
  int micro;
  const char* schedule;
  int v;
  bool recompute;
};

void PrintTo(const PipeCase& c, std::ostream* os) {
  *os << c.schedule << " P=" << c.pp << " M=" << c.micro << " V=" << c.v << (c.recompute ? " recompute" : "");
}

class PipelineTraining : public ::testing::TestWithParam<PipeCase> {};

TEST_P(PipelineTraining, EqualsOneRankWithTheSameMinibatch) {
  const PipeCase pc = GetParam();
  MpConfig one = tiny_mp({1, 1, 1}, pc.micro);
  MpConfig cfg = tiny_mp({1, 1, pc.pp}, pc.micro);
  cfg.schedule = pc.schedule;
  cfg.virtual_stages = pc.v;
  cfg.recompute = pc.recompute;
  const int steps = 3;
  testing::MpRun a = train_mesh(one, steps), b = train_mesh(cfg, steps);
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(a.losses[s], b.losses[s], 2e-5f) << "step " << s;
  EXPECT_LT(a.losses.back(), a.losses.front());
  EXPECT_NEAR(a.val, b.val, 2e-5f);
  EXPECT_LT(max_diff(a.dense, b.dense), 2e-5f);
  // The partition has P*V pieces covering all units.
  const MpStats& st = b.stats[0];
  ASSERT_EQ(st.bounds.size(), static_cast<size_t>(pc.pp * pc.v + 1));
  EXPECT_EQ(st.bounds.back(), cfg.model.num_units());
  // Memory in flight: GPipe holds every micro-batch, 1F1B at most P - s.
  for (int s = 0; s < pc.pp; ++s) {
    if (std::string(pc.schedule) == "gpipe") {
      EXPECT_EQ(st.max_in_flight[static_cast<size_t>(s)], pc.micro);
    }
    if (std::string(pc.schedule) == "1f1b") {
      EXPECT_EQ(st.max_in_flight[static_cast<size_t>(s)], std::min(pc.micro, pc.pp - s));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineTraining,
    ::testing::Values(PipeCase{2, 1, "gpipe", 1, false}, PipeCase{2, 4, "gpipe", 1, false}, PipeCase{2, 4, "1f1b", 1, false},
                      PipeCase{4, 4, "1f1b", 1, false}, PipeCase{3, 2, "1f1b", 1, false}, PipeCase{2, 4, "interleaved", 2, false},
                      PipeCase{1, 2, "interleaved", 3, false}, PipeCase{2, 4, "1f1b", 1, true},
                      PipeCase{2, 4, "gpipe", 1, true}, PipeCase{2, 1, "gpipe", 1, true},
                      PipeCase{2, 4, "interleaved", 2, true}, PipeCase{1, 2, "1f1b", 1, true}));

// Recompute with tensor parallelism inside the stages: the re-run forward all-reduces again
// on every tp rank in the same order, and the result equals one rank's.
TEST(PipelineRecompute, WithTensorParallelStagesEqualsOneRank) {
  MpConfig one = tiny_mp({1, 1, 1}, 2), cfg = tiny_mp({1, 2, 2}, 2);
  cfg.recompute = true;
  const testing::MpRun a = train_mesh(one, 2), b = train_mesh(cfg, 2);
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s) EXPECT_NEAR(a.losses[s], b.losses[s], 2e-5f) << "step " << s;
  EXPECT_LT(max_diff(a.dense, b.dense), 2e-5f);
}

TEST(PipelineMemory, GPipeHoldsMoreActivationsThan1F1B) {
  MpConfig g = tiny_mp({1, 1, 2}, 8), f = g, r = g;
  g.schedule = "gpipe";
  f.schedule = "1f1b";
  r.schedule = "1f1b";
  r.recompute = true;
  const MpStats sg = train_mesh(g, 1).stats[0], sf = train_mesh(f, 1).stats[0], sr = train_mesh(r, 1).stats[0];
  // Stage 0: GPipe keeps 8 micro-batches' graphs, 1F1B 2, recompute only the inputs.
  EXPECT_EQ(sg.max_in_flight[0], 8);
  EXPECT_EQ(sf.max_in_flight[0], 2);
  EXPECT_GT(sg.peak_activation_bytes[0], 3 * sf.peak_activation_bytes[0]);
  EXPECT_LT(sr.peak_activation_bytes[0], sf.peak_activation_bytes[0]);  // one graph at a time (recomputed) vs 2
  // The last stage has one micro-batch in flight: recompute saves there too, because it
  // re-runs one unit at a time (checkpoints plus one unit's graph, against every unit's).
  EXPECT_EQ(sf.max_in_flight[1], 1);
  EXPECT_LT(sr.peak_activation_bytes[1], sf.peak_activation_bytes[1] * 3 / 4);
  // The bubble numbers exist and lie in [0, 1].
  EXPECT_GE(sf.bubble_replayed, 0.0);
  EXPECT_LE(sf.bubble_measured, 1.0);
  EXPECT_NEAR(sf.bubble_formula, 1.0 / 9.0, 1e-12);
}

// Synthetic timelines: Forward 1 s, Backward 2 s of CPU on every stage reproduce the formula;
// noise on one instruction lengthens the raw replay but not the per-stage-median one.
TEST(PipelineBubble, ReplayOfTimelines) {
  const PipeSchedule s = make_1f1b(4, 8);
  SimResult sim = simulate(s);
  std::vector<std::vector<InstrTiming>> tl(4);
  for (int st = 0; st < 4; ++st)
    for (size_t i = 0; i < s.per_stage[static_cast<size_t>(st)].size(); ++i) {
      const PipeInstr& in = s.per_stage[static_cast<size_t>(st)][i];
      tl[static_cast<size_t>(st)].push_back({in, sim.start[static_cast<size_t>(st)][i], sim.end[static_cast<size_t>(st)][i],
                                             unit_cost(st, in)});
    }
  EXPECT_NEAR(measured_bubble(tl), bubble_formula("1f1b", 4, 8, 1), 1e-12);
  EXPECT_NEAR(replayed_bubble(s, tl), bubble_formula("1f1b", 4, 8, 1), 1e-12);
  for (InstrTiming& t : tl[2])
    if (t.instr == PipeInstr{PipeOp::kForward, 3, 0}) t.cpu *= 3;  // one slow forward on stage 2
  EXPECT_GT(replayed_bubble(s, tl), bubble_formula("1f1b", 4, 8, 1) + 0.01);
  EXPECT_NEAR(replayed_bubble(s, tl, true), bubble_formula("1f1b", 4, 8, 1), 1e-12);
}

TEST(PipelinePartition, BalancesContiguousCosts) {
  EXPECT_EQ(balanced_partition({1, 1, 1, 1}, 2), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(balanced_partition({0.1, 5, 5, 5, 5, 1}, 4), (std::vector<int>{0, 2, 3, 4, 6}));
  EXPECT_EQ(balanced_partition({9, 1, 1, 1}, 2), (std::vector<int>{0, 1, 4}));
  EXPECT_THROW(balanced_partition({1, 1}, 3), InvalidArgument);
}

// A two-stage toy model: y = x * w (one scalar weight per stage) on (2, 2) activations.
class ToyModel : public PipelineModel {
 public:
  ToyModel(int rank, bool die) : rank_(rank), die_(die), w_(Tensor::full({2, 2}, 0.5f)), g_(Tensor::zeros({2, 2})) {}
  Var forward(Graph& g, int, int micro, const Var& input) override {
    if (die_ && micro == 1) DT_THROW(Error, "rank " << rank_ << " died (injected)");
    Var w = g.param(w_, g_, GradMode::kAccumulate);
    Var x = input.defined() ? input : g.input(Tensor::full({2, 2}, 1.0f + micro));
    Var y = mul(x, w);
    return rank_ == 1 ? mean(y) : y;
  }
  Shape activation_shape(int) const override { return {2, 2}; }
  std::vector<std::span<const float>> param_buffers() const override { return {w_.span()}; }

 private:
  int rank_;
  bool die_;
  Tensor w_, g_;
};

TEST(PipelineFailure, ADeadRankIsNamedByItsNeighbour) {
  std::string seen;
  std::mutex mu;
  EXPECT_THROW(run_world(2, TransportKind::kShm,
                         [&](Communicator& c) {
                           ToyModel m(c.rank(), c.rank() == 1);
                           PipeSchedule s = make_1f1b(2, 4);
                           try {
                             run_pipeline(&c, s, m, {}, nullptr);
                           } catch (const PeerFailure& e) {
                             std::lock_guard<std::mutex> lock(mu);
                             seen = e.what();
                             return;
                           }
                         }),
               Error);
  EXPECT_NE(seen.find("rank 1"), std::string::npos) << seen;
}

TEST(PipelineExecutor, ToyGradientsAccumulateOverMicroBatches) {
  // Two stages multiply by w0 = w1 = 0.5: loss_m = mean(x_m) * 0.25 with x_m = 1 + m.
  // d/dw1 of mean_m loss_m = mean_m mean(x_m w0) = 0.5 * mean_m (1 + m).
  run_world(2, TransportKind::kShm, [&](Communicator& c) {
    ToyModel m(c.rank(), false);
    bool stepped = false;
    PipelineStats st = run_pipeline(&c, make_gpipe(2, 4), m, {}, [&] { stepped = true; });
    EXPECT_TRUE(stepped);
    EXPECT_EQ(st.max_in_flight, 4);
    if (c.rank() == 1) {
      EXPECT_EQ(st.losses, 4);
      EXPECT_NEAR(st.loss_sum, 0.25 * (1 + 2 + 3 + 4), 1e-6);
    }
  });
}

// The MLP of the earlier issues cut the same way: with M micro-batches every rank's layer
// gradients equal the dense MLP's whole-batch gradients, for GPipe, 1F1B and interleaved.
TEST(PipelineMlp, GradientsEqualTheDenseMlp) {
  const std::string spec = "12-16-16-12-8-4";
  const int64_t batch = 8;
  MLP dense(spec, {.seed = 3});
  Tensor x = Tensor::empty({batch, 12});
  Rng rng(5);
  rng.fill_normal(x.span(), 0.0f, 1.0f);
  std::vector<int32_t> y;
  for (int64_t i = 0; i < batch; ++i) y.push_back(static_cast<int32_t>((i * 3) % 4));
  dense.loss_and_grad(x, y);
  struct Case {
    int p, m, v;
    const char* kind;
  };
  for (Case c : {Case{2, 4, 1, "gpipe"}, Case{3, 2, 1, "1f1b"}, Case{2, 4, 2, "interleaved"}, Case{1, 8, 1, "1f1b"}}) {
    SCOPED_TRACE(std::string(c.kind) + " P=" + std::to_string(c.p) + " M=" + std::to_string(c.m));
    std::mutex mu;
    int checked = 0;
    run_world(c.p, TransportKind::kShm, [&](Communicator& comm) {
      MlpPipeline pipe(spec, c.p, c.v, comm.rank());
      pipe.load_from(dense);
      pipe.set_batch(x, y, c.m);
      PipeSchedule s = make_schedule(c.kind, c.p, c.m, c.v);
      PipelineStats st = run_pipeline(c.p > 1 ? &comm : nullptr, s, pipe, {}, nullptr);
      for (int i = 0; i < dense.num_layers(); ++i) {
        Linear* l = pipe.layer(i);
        if (!l) continue;
        EXPECT_LT(max_abs_diff(l->weight().grad, dense.layer(i).weight().grad), 1e-6f) << "layer " << i;
        EXPECT_LT(max_abs_diff(l->bias()->grad, dense.layer(i).bias()->grad), 1e-6f) << "layer " << i;
        std::lock_guard<std::mutex> lock(mu);
        ++checked;
      }
      // Boundaries carry different widths: the executor sized every message by piece.
      EXPECT_GE(st.max_in_flight, 1);
    });
    EXPECT_EQ(checked, 5);
  }
}

}  // namespace
}  // namespace dtrain

// ddp: statistical equivalence with sequential minibatch SGD. In deterministic mode M ranks
// with per-rank batch B' give, after every step, exactly the parameters of one rank with
// batch M*B' (M = 1..4, SGD with momentum and Adam, several all-reduce algorithms); the
// staged (layer-by-layer) backward equals the one-graph backward bit for bit; buckets group
// layers as documented; the float path keeps replicas identical and learns.
#include <cmath>
#include <gtest/gtest.h>

#include <cstring>

#include "base/error.h"
#include "parallel/data_parallel.h"
#include "parallel/dist_test_util.h"

namespace dtrain {
namespace {

using testing::dense_blobs;
using testing::DistRun;
using testing::run_steps;

const char* kSpec = "12-16-8-4";

DistRun ddp_run(int ranks, int64_t batch, const OptimizerConfig& oc, const DdpOptions& o, int steps,
                const data::Dataset& ds) {
  return run_steps(
      ranks, ds, kSpec, oc, batch, steps,
      [&](TrainableModel& m, Optimizer& opt, Communicator& c) -> std::unique_ptr<ModelStrategy> {
        return std::make_unique<DataParallel>(m, opt, c, o, nullptr);
      },
      [](ModelStrategy& s, std::span<const int64_t> b) { static_cast<DataParallel&>(s).step(b); });
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct EquivCase {
  const char* optimizer;
  Algorithm algorithm;
};

class DdpDeterministic : public ::testing::TestWithParam<EquivCase> {};

TEST_P(DdpDeterministic, MRanksEqualOneRankWithMTimesTheBatch) {
  const data::Dataset ds = dense_blobs(512, 12, 4, 11);
  OptimizerConfig oc;
  oc.kind = GetParam().optimizer;
  oc.lr = oc.kind == "sgd" ? 0.1f : 0.01f;
  oc.momentum = oc.kind == "sgd" ? 0.9f : 0.0f;
  DdpOptions o;
  o.deterministic = true;
  o.det_shard = 8;
  o.bucket_bytes = 256;  // several buckets, so overlap paths run
  o.algorithm = GetParam().algorithm;
  const int64_t per_rank = 16;
  const int steps = 6;
  for (int m = 1; m <= 4; ++m) {
    SCOPED_TRACE("M = " + std::to_string(m));
    // The same global minibatches of per_rank * M items: on one rank, or split over M ranks
    // (each takes per_rank items).
    DistRun one = ddp_run(1, per_rank * m, oc, o, steps, ds);
    DistRun many = ddp_run(m, per_rank * m, oc, o, steps, ds);
    for (int r = 0; r < m; ++r)
      for (int t = 0; t < steps; ++t)
        ASSERT_TRUE(same_bits(one.params_after[0][static_cast<size_t>(t)],
                              many.params_after[static_cast<size_t>(r)][static_cast<size_t>(t)]))
            << "rank " << r << " differs after step " << t + 1;
    // And training moved the parameters.
    EXPECT_FALSE(same_bits(one.params_after[0][0], one.params_after[0][steps - 1]));
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DdpDeterministic,
                         ::testing::Values(EquivCase{"sgd", Algorithm::kAuto}, EquivCase{"adam", Algorithm::kRing},
                                           EquivCase{"adamw", Algorithm::kTree}, EquivCase{"sgd", Algorithm::kNaive}));

TEST(DdpDeterministic, DiffersFromFloatPathButOnlyByRounding) {
  const data::Dataset ds = dense_blobs(256, 12, 4, 12);
  OptimizerConfig oc;
  oc.lr = 0.1f;
  DdpOptions det, flt;
  det.deterministic = true;
  DistRun a = ddp_run(2, 32, oc, det, 3, ds), b = ddp_run(2, 32, oc, flt, 3, ds);
  EXPECT_LT(testing::max_abs_diff(a.params_after[0][2], b.params_after[0][2]), 1e-4f);
}

TEST(DdpFloat, ReplicasStayIdenticalAndMatchOneRankClosely) {
  const data::Dataset ds = dense_blobs(512, 12, 4, 13);
  OptimizerConfig oc;
  oc.lr = 0.05f;
  oc.momentum = 0.9f;
  DdpOptions o;
  o.bucket_bytes = 300;
  for (bool overlap : {true, false}) {
    o.overlap = overlap;
    DistRun one = ddp_run(1, 48, oc, o, 5, ds);
    DistRun three = ddp_run(3, 48, oc, o, 5, ds);
    for (int r = 1; r < 3; ++r) EXPECT_TRUE(same_bits(three.params_after[0][4], three.params_after[static_cast<size_t>(r)][4]));
    EXPECT_LT(testing::max_abs_diff(one.params_after[0][4], three.params_after[0][4]), 1e-4f);
  }
}

// A batch cut unevenly among the ranks (parallel/batch_split.h) gives the same step: in
// deterministic mode bit for bit, in float mode to rounding, and with the measured split the
// replicas stay identical.
TEST(DdpSplit, AnUnevenCutTrainsTheSameModel) {
  const data::Dataset ds = dense_blobs(512, 12, 4, 15);
  OptimizerConfig oc;
  oc.lr = 0.05f;
  oc.momentum = 0.9f;
  DdpOptions det;
  det.deterministic = true;
  det.bucket_bytes = 256;
  DdpOptions det_uneven = det;
  det_uneven.split_weights = {3, 1, 1};
  DistRun even = ddp_run(3, 48, oc, det, 4, ds), uneven = ddp_run(3, 48, oc, det_uneven, 4, ds);
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(same_bits(even.params_after[0][3], uneven.params_after[static_cast<size_t>(r)][3])) << "rank " << r;

  DdpOptions flt;
  flt.split_weights = {1, 4};
  DistRun a = ddp_run(2, 40, oc, DdpOptions{}, 4, ds), b = ddp_run(2, 40, oc, flt, 4, ds);
  EXPECT_TRUE(same_bits(b.params_after[0][3], b.params_after[1][3]));
  EXPECT_LT(testing::max_abs_diff(a.params_after[0][3], b.params_after[0][3]), 1e-5f);
  EXPECT_FALSE(same_bits(a.params_after[0][3], b.params_after[0][3]));  // the cut did change

  DdpOptions measured;
  measured.split = BatchSplitMode::kMeasured;
  measured.split_period = 1;  // a re-cut every step
  DistRun m = ddp_run(2, 40, oc, measured, 6, ds);
  EXPECT_TRUE(same_bits(m.params_after[0][5], m.params_after[1][5]));
  EXPECT_LT(testing::max_abs_diff(a.params_after[0][3], m.params_after[0][3]), 1e-5f);
}

// A small MLP, one replica and the first 40 examples: what the staged-backward tests share.
struct StagedSetup {
  data::Dataset ds = dense_blobs(64, 12, 4, 14);
  std::unique_ptr<TrainableModel> model = make_mlp_model(kSpec, ds, 5);
  std::unique_ptr<Replica> rep = model->make_replica();
  std::vector<int64_t> ids = std::vector<int64_t>(40);
  size_t n = static_cast<size_t>(model->num_params());
  StagedSetup() {
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  }
};

TEST(StagedBackward, EqualsOneGraphBackwardBitForBit) {
  StagedSetup st;
  auto& [ds, model, rep, ids, n] = st;
  std::vector<float> g1(n), g2(n);
  LossAcc a = rep->loss_grad(model->params(), ids, g1);
  std::vector<GradRange> seen;
  LossAcc b = rep->loss_grad_staged(model->params(), ids, g2, [&](GradRange u) { seen.push_back(u); }, 1.0f);
  EXPECT_TRUE(same_bits(g1, g2));
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.correct, b.correct);
  // Units: one per layer, last layer first, tiling [0, n).
  const auto units = rep->grad_units(static_cast<int64_t>(n));
  ASSERT_EQ(units.size(), 3u);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].offset, 12 * 16 + 16 + 16 * 8 + 8);
  EXPECT_EQ(seen[0].len, 8 * 4 + 4);
  EXPECT_EQ(seen[2].offset, 0);
  int64_t total = 0;
  for (const auto& u : seen) total += u.len;
  EXPECT_EQ(total, static_cast<int64_t>(n));
  // An empty share still reports every unit (so every rank issues the same collectives).
  seen.clear();
  rep->loss_grad_staged(model->params(), {}, g2, [&](GradRange u) { seen.push_back(u); }, 1.0f);
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(g2[0], 0.0f);
}

// The scale seeds the backward pass: a power of two scales every gradient exactly (the
// chain rule's products are exact under it), and 0.3 scales within float rounding.
TEST(StagedBackward, GradScaleSeedsTheBackwardPass) {
  StagedSetup st;
  auto& [ds, model, rep, ids, n] = st;
  std::vector<float> g1(n), g2(n), g3(n);
  rep->loss_grad(model->params(), ids, g1);
  rep->loss_grad_staged(model->params(), ids, g2, nullptr, 0.25f);
  rep->loss_grad_staged(model->params(), ids, g3, nullptr, 0.3f);
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(g2[i], 0.25f * g1[i]) << "parameter " << i;
    ASSERT_NEAR(g3[i], 0.3f * g1[i], 1e-5f * (1.0f + std::fabs(g1[i]))) << "parameter " << i;
    nonzero += g1[i] != 0.0f;
  }
  EXPECT_GT(nonzero, n / 2);
}

TEST(GradBuckets, GroupsConsecutiveUnitsUntilTheCap) {
  // Units in backward order: [90,100) [40,90) [0,40).
  std::vector<GradRange> units = {{90, 10}, {40, 50}, {0, 40}};
  GradBuckets big(units, 1 << 20, 4);
  ASSERT_EQ(big.buckets().size(), 1u);
  EXPECT_EQ(big.buckets()[0].offset, 0);
  EXPECT_EQ(big.buckets()[0].len, 100);
  GradBuckets small(units, 200, 4);  // 40 bytes < 200: joins the next unit
  ASSERT_EQ(small.buckets().size(), 2u);
  EXPECT_EQ(small.buckets()[0].offset, 40);
  EXPECT_EQ(small.buckets()[0].len, 60);
  EXPECT_EQ(small.on_ready(units[0]), -1);
  EXPECT_EQ(small.on_ready(units[1]), 0);
  EXPECT_EQ(small.on_ready(units[2]), 1);
  EXPECT_THROW(GradBuckets({{0, 10}, {50, 10}}, 4, 4), InvalidArgument);
}

TEST(FixedPoint, SumsAreExactAndRangeChecked) {
  std::vector<float> x = {0.1f, -3.5f, 1e-7f};
  std::vector<int64_t> a(3, 0), b(3, 0);
  add_fixed(x, 0.25, a);
  add_fixed(x, 0.75, a);
  add_fixed(x, 0.75, b);
  add_fixed(x, 0.25, b);
  EXPECT_EQ(a, b);  // order does not matter
  std::vector<float> out(3);
  fixed_to_float(a, out);
  EXPECT_NEAR(out[0], 0.1f, 1e-7);
  EXPECT_EQ(out[1], -3.5f);
  std::vector<float> huge = {3e6f};
  std::vector<int64_t> c(1, 0);
  EXPECT_THROW(add_fixed(huge, 1.0, c), InvalidArgument);
}

TEST(DdpFloat, LearnsASmallProblem) {
  set_blas_threads(1);
  const data::Dataset ds = dense_blobs(600, 12, 4, 15);
  testing::run_world(2, TransportKind::kShm, [&](Communicator& comm) {
    auto model = make_mlp_model(kSpec, ds, 1);
    OptimizerConfig oc;
    oc.lr = 0.1f;
    oc.momentum = 0.9f;
    auto opt = make_optimizer(oc, model->num_params());
    Instrument inst;
    DataParallel ddp(*model, *opt, comm, DdpOptions{}, &inst);
    LossAcc first, last;
    for (int e = 0; e < 6; ++e) {
      auto order = data::epoch_permutation(ds.rows, 1, e);
      LossAcc r = ddp.run_epoch(order, 32, nullptr);
      if (e == 0) first = r;
      last = r;
    }
    EXPECT_EQ(last.examples, ds.rows);  // summed over both ranks
    EXPECT_LT(last.loss, 0.5 * first.loss);
    LossAcc test = ddp.evaluate_on(*model, ds, nullptr);
    EXPECT_EQ(test.examples, ds.rows);
    EXPECT_GT(test.accuracy(), 0.9);
    TimeSplit s = inst.totals();
    EXPECT_GT(s.compute_seconds, 0);
    EXPECT_GT(s.comm_seconds, 0);
    EXPECT_GT(s.comm_calls, 0);
  });
}

}  // namespace
}  // namespace dtrain

namespace dtrain {
namespace {

// Where the buckets run does not change the model: on the progress thread as backward
// finishes each (DdpOptions::overlap, on a host with a core beyond one per rank) or after
// backward (overlap off, or no such core) — the same parameters bit for bit on every rank,
// plain and with the fused ZeRO step; every rank reports its straggler figures.
TEST(Ddp, BucketsInBetweenOrAfterBackwardGiveTheSameBits) {
  const data::Dataset ds = dense_blobs(96, 12, 4, 23);
  OptimizerConfig oc{.kind = "sgd", .lr = 0.05f, .momentum = 0.9f};
  for (int ranks : {2, 3}) {
    for (int zero : {0, 1}) {
      std::vector<std::vector<float>> by_mode;
      for (bool overlap : {true, false}) {
        DdpOptions o;
        o.bucket_bytes = 64;  // several buckets
        o.zero = zero;
        o.overlap = overlap;
        std::mutex mu;
        std::vector<Metrics> metrics;
        DistRun r = run_steps(
            ranks, ds, kSpec, oc, 24, 4,
            [&](TrainableModel& m, Optimizer&, Communicator& c) -> std::unique_ptr<ModelStrategy> {
              return std::make_unique<DataParallel>(m, oc, c, o, nullptr);
            },
            [&](ModelStrategy& s, std::span<const int64_t> b) {
              auto& d = static_cast<DataParallel&>(s);
              d.step(b);
              if (d.steps() == 4) {
                Metrics m = d.epoch_metrics();
                std::lock_guard<std::mutex> lock(mu);
                metrics.push_back(m);
              }
            });
        for (int k = 1; k < ranks; ++k)
          ASSERT_TRUE(same_bits(r.params_after[0].back(), r.params_after[static_cast<size_t>(k)].back()))
              << ranks << " ranks, zero " << zero << ", overlap " << overlap << ": rank " << k << " differs";
        by_mode.push_back(r.params_after[0].back());
        ASSERT_EQ(metrics.size(), static_cast<size_t>(ranks));
        for (const Metrics& m : metrics) {
          auto wait = std::find_if(m.begin(), m.end(), [](const auto& kv) { return kv.first == "straggler_wait_ms"; });
          ASSERT_NE(wait, m.end()) << "every rank reports its stragglers";
          EXPECT_GE(wait->second, 0.0);
        }
      }
      EXPECT_TRUE(same_bits(by_mode[0], by_mode[1])) << ranks << " ranks, zero " << zero << ": the schedules differ";
    }
  }
}

// ZeRO on ddp's buckets: stages 1 and 2 reduce-scatter each bucket as backward finishes it,
// step only this rank's slices and all-gather them; the parameters match plain ddp (stage 0)
// on every rank to float rounding, and each rank keeps about 1/N of the optimizer state.
// Stages 1-2 in both forms, the fused step (one allreduce_apply per bucket on the progress
// thread) and the separate one (reduce-scatter, step, all-gather): the same parameters (bit
// for bit at two ranks), and those of plain ddp to rounding.
TEST(DdpZero, BucketedStagesMatchPlainDdpAndShardTheState) {
  const data::Dataset ds = dense_blobs(96, 12, 4, 21);
  OptimizerConfig oc{.kind = "adam", .lr = 0.01f};
  for (int ranks : {1, 2, 3}) {  // one rank runs its buckets on the caller (no progress thread)
    std::vector<std::vector<float>> by_stage;
    std::vector<int64_t> opt_bytes;
    for (int run : {0, 1, 2, 3, 4}) {  // stage 0; 1 and 2 fused; 1 and 2 separate
      const int stage = run <= 2 ? run : run - 2;
      DdpOptions o;
      o.bucket_bytes = 64;  // several buckets, so the bucketed path is exercised
      o.zero = stage;
      o.fused_step = run <= 2;
      std::mutex mu;
      int64_t bytes = 0;
      DistRun r = run_steps(
          ranks, ds, kSpec, oc, 24, 3,
          [&](TrainableModel& m, Optimizer&, Communicator& c) -> std::unique_ptr<ModelStrategy> {
            auto s = std::make_unique<DataParallel>(m, oc, c, o, nullptr);
            EXPECT_GT(s->buckets().size(), 2u);
            std::lock_guard<std::mutex> lock(mu);
            if (c.rank() == 0) {
              StateSections st;
              s->save(st);
              bytes = static_cast<int64_t>(find_section(st, "optimizer")->size());
            }
            return s;
          },
          [](ModelStrategy& s, std::span<const int64_t> b) { static_cast<DataParallel&>(s).step(b); });
      by_stage.push_back(r.params_after[0].back());
      for (int k = 1; k < ranks; ++k)
        EXPECT_TRUE(same_bits(r.params_after[0].back(), r.params_after[static_cast<size_t>(k)].back()))
            << "stage " << stage << ": rank " << k << " differs from rank 0";
      opt_bytes.push_back(bytes);
    }
    for (int stage : {1, 2}) {
      EXPECT_LT(testing::max_abs_diff(by_stage[0], by_stage[static_cast<size_t>(stage)]), 1e-5f)
          << ranks << " ranks, stage " << stage;
      // Two ranks sum a + b either way; three may sum in another order on the separate path
      // (its reduce-scatter's algorithm), which moves the last bits only.
      if (ranks == 2)
        EXPECT_TRUE(same_bits(by_stage[static_cast<size_t>(stage)], by_stage[static_cast<size_t>(stage) + 2]))
            << "stage " << stage << ": fused and separate steps differ";
      else
        EXPECT_LT(testing::max_abs_diff(by_stage[static_cast<size_t>(stage)], by_stage[static_cast<size_t>(stage) + 2]),
                  1e-6f)
            << ranks << " ranks, stage " << stage;
    }
    EXPECT_EQ(opt_bytes[1], opt_bytes[3]) << "the fused step shards the state as the separate one does";
    // Adam keeps two moments per element it steps: stage 1/2 step about 1/N of them.
    EXPECT_LT(opt_bytes[1], opt_bytes[0] / ranks + 4096) << ranks << " ranks";
  }
}

TEST(DdpZero, RefusesDeterministicAndStageThree) {
  const data::Dataset ds = dense_blobs(16, 12, 4, 1);
  testing::run_world(2, TransportKind::kShm, [&](Communicator& c) {
    auto m = make_mlp_model(kSpec, ds, 1);
    DdpOptions o;
    o.zero = 3;
    EXPECT_THROW(DataParallel(*m, OptimizerConfig{}, c, o, nullptr), InvalidArgument);
    o.zero = 1;
    o.deterministic = true;
    EXPECT_THROW(DataParallel(*m, OptimizerConfig{}, c, o, nullptr), InvalidArgument);
  });
}

}  // namespace
}  // namespace dtrain

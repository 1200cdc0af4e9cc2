// Optimizers against hand-computed steps, range stepping, state round trips, schedules and
// gradient clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/thread_pool.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

TEST(Sgd, PlainStep) {
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, 0.25f};
  Sgd opt(2, {.lr = 0.1f});
  opt.step(p, g);
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.05f);
  EXPECT_FLOAT_EQ(p[1], -2.0f - 0.025f);
  EXPECT_EQ(opt.steps(), 1);
}

TEST(Sgd, MomentumTwoStepsByHand) {
  // v1 = g1 = 1; p1 = 1 - 0.1*1 = 0.9. v2 = 0.9*1 + 2 = 2.9; p2 = 0.9 - 0.29 = 0.61.
  std::vector<float> p = {1.0f};
  Sgd opt(1, {.lr = 0.1f, .momentum = 0.9f});
  std::vector<float> g1 = {1.0f}, g2 = {2.0f};
  opt.step(p, g1);
  EXPECT_FLOAT_EQ(p[0], 0.9f);
  opt.step(p, g2);
  EXPECT_FLOAT_EQ(opt.momentum_buffer()[0], 2.9f);
  EXPECT_NEAR(p[0], 0.61f, 1e-6);
}

// A step handed over in pieces, in any order (as a fused all-reduce delivers them), equals
// the whole step bit for bit, for every optimizer kind; the step is counted by end_step.
TEST(Optimizer, StepInPiecesEqualsTheWholeStep) {
  const int64_t n = 1000;
  for (const char* kind : {"sgd", "adam", "adamw"}) {
    OptimizerConfig c{.kind = kind, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f};
    if (std::string(kind) != "sgd") c.momentum = 0.0f;
    auto whole = make_optimizer(c, n), pieces = make_optimizer(c, n);
    std::vector<float> p(n), g(n);
    Rng rng(7);
    rng.fill_normal(p, 0.0f, 1.0f);
    std::vector<float> q = p;
    for (int step = 0; step < 3; ++step) {
      rng.fill_normal(g, 0.0f, 1.0f);
      whole->step(p, g);
      for (int64_t at : {int64_t{600}, int64_t{0}, int64_t{250}}) {  // [600, 1000), [0, 250), [250, 600)
        const int64_t len = at == 600 ? 400 : at == 0 ? 250 : 350;
        pieces->update(std::span<float>(q).subspan(at, len), std::span<const float>(g).subspan(at, len), at);
      }
      EXPECT_EQ(pieces->steps(), step);
      pieces->end_step();
      ASSERT_EQ(std::memcmp(p.data(), q.data(), n * sizeof(float)), 0) << kind << " step " << step;
    }
    EXPECT_EQ(pieces->save_state(), whole->save_state()) << kind;
    std::vector<float> small(10);
    EXPECT_THROW(pieces->update(small, small, n - 5), InvalidArgument) << kind << ": a piece past the range";
  }
}

TEST(Sgd, NesterovAndWeightDecayByHand) {
  // g' = g + wd p = 1 + 0.5*2 = 2; v = 2; nesterov d = g' + mu v = 2 + 0.9*2 = 3.8;
  // p = 2 - 0.1*3.8 = 1.62.
  std::vector<float> p = {2.0f}, g = {1.0f};
  Sgd opt(1, {.lr = 0.1f, .momentum = 0.9f, .nesterov = true, .weight_decay = 0.5f});
  opt.step(p, g);
  EXPECT_NEAR(p[0], 1.62f, 1e-6);
}

TEST(Adam, FirstStepsByHand) {
  // Step 1: m = 0.1 g, v = 0.001 g^2; m_hat = g, v_hat = g^2 -> p -= lr * g / (|g| + eps).
  std::vector<float> p = {1.0f, 1.0f}, g = {0.5f, -4.0f};
  Adam opt(2, {.lr = 0.01f});
  opt.step(p, g);
  EXPECT_NEAR(p[0], 1.0f - 0.01f, 1e-6);
  EXPECT_NEAR(p[1], 1.0f + 0.01f, 1e-6);
  // Step 2 with g = 0: m = 0.09*0.5 = 0.045 (m_hat = 0.045/0.19), v = 0.999*0.00025
  // (v_hat = v / (1 - 0.999^2)).
  std::vector<float> zero = {0.0f, 0.0f};
  opt.step(p, zero);
  double m_hat = 0.045 / (1 - 0.81), v_hat = 0.999 * 0.00025 / (1 - 0.998001);
  EXPECT_NEAR(p[0], 0.99 - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8), 1e-6);
}

TEST(Adam, WeightDecayCoupledVsDecoupled) {
  std::vector<float> p1 = {2.0f}, p2 = {2.0f}, g = {0.0f};
  Adam adam(1, {.lr = 0.1f, .weight_decay = 0.5f});
  AdamW adamw(1, {.lr = 0.1f, .weight_decay = 0.5f});
  adam.step(p1, g);   // g' = 1 -> normalized step of lr
  adamw.step(p2, g);  // p *= 1 - 0.05; then m = 0 -> no Adam step
  EXPECT_NEAR(p1[0], 1.9f, 1e-6);
  EXPECT_NEAR(p2[0], 1.9f, 1e-6);
  adam.step(p1, g);
  adamw.step(p2, g);
  EXPECT_NEAR(p2[0], 1.9f * 0.95f, 1e-6);
  EXPECT_NE(p1[0], p2[0]);
  EXPECT_STREQ(adamw.kind(), "adamw");
}

std::vector<float> random_vec(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  Rng(seed).fill_uniform(v, -1.0f, 1.0f);
  return v;
}

// Two optimizers over [0, a) and [a, n) equal one optimizer over [0, n), bit for bit.
TEST(Optimizer, SubRangeSteppingEqualsFullStepping) {
  const int64_t n = 1001, a = 377;
  for (const char* kind : {"sgd", "adam", "adamw"}) {
    OptimizerConfig c{.kind = kind, .lr = 0.05f, .momentum = 0.9f, .nesterov = true, .weight_decay = 0.01f};
    auto full = make_optimizer(c, n);
    auto lo = make_optimizer(c, a), hi = make_optimizer(c, n - a);
    std::vector<float> p1 = random_vec(n, 1), p2 = p1;
    for (int step = 0; step < 5; ++step) {
      std::vector<float> g = random_vec(n, 10 + step);
      full->step(p1, g);
      std::span<float> ps(p2);
      std::span<const float> gs(g);
      lo->step(ps.subspan(0, a), gs.subspan(0, a));
      hi->step(ps.subspan(a), gs.subspan(a));
    }
    EXPECT_EQ(p1, p2) << kind;
  }
}

// A piece whose gradient comes as several terms (ddp's fused step reads every rank's
// gradient where it lies) equals summing the terms in order, copying the parameters to the
// output and updating there, bit for bit: in place and into a buffer apart (the parameters
// then only read), one to three terms, for every kind (SGD through its one-pass kernel, plain
// and Nesterov momentum, with weight decay; Adam through the buffered default) and with a
// pool splitting SGD's pass.
TEST(Optimizer, UpdateSumEqualsSumThenUpdate) {
  const int64_t n = 70000;  // past the pool's split size, with a ragged tail
  ThreadPool pool(2);
  std::vector<OptimizerConfig> configs = {
      {.kind = "sgd", .lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f},
      {.kind = "sgd", .lr = 0.05f, .momentum = 0.9f, .nesterov = true},
      {.kind = "sgd", .lr = 0.05f},
      {.kind = "adam", .lr = 0.01f, .weight_decay = 0.01f},
      {.kind = "adamw", .lr = 0.01f, .weight_decay = 0.01f}};
  for (const OptimizerConfig& c : configs) {
    for (int k : {1, 2, 3}) {
      for (bool apart : {false, true}) {
        for (bool pooled : {false, true}) {
          const std::string what = std::string(c.kind) + (c.nesterov ? " nesterov" : "") + " k=" + std::to_string(k) +
                                   (apart ? " apart" : " in place") + (pooled ? " pooled" : "");
          auto ref = make_optimizer(c, n + 8), fused = make_optimizer(c, n + 8);
          if (pooled) fused->set_pool(&pool);
          std::vector<std::vector<float>> terms;
          for (int j = 0; j < k; ++j) terms.push_back(random_vec(n, 10 + static_cast<uint64_t>(j)));
          std::vector<const float*> at;
          for (const auto& t : terms) at.push_back(t.data());
          std::vector<float> p = random_vec(n, 9), q = p, out(n, -7.0f);
          for (int step = 0; step < 2; ++step) {  // the second step reads the state the first left
            std::vector<float> sum(n);
            for (int64_t i = 0; i < n; ++i) {
              float g = terms[0][static_cast<size_t>(i)];
              for (int j = 1; j < k; ++j) g += terms[static_cast<size_t>(j)][static_cast<size_t>(i)];
              sum[static_cast<size_t>(i)] = g;
            }
            ref->update(p, sum, 8);
            const std::vector<float> before = q;
            if (apart) {
              fused->update_sum(out, q, at, 8);
              ASSERT_EQ(q, before) << what << ": the parameters are only read";
              q = out;
            } else {
              fused->update_sum(q, q, at, 8);
            }
            ASSERT_EQ(std::memcmp(p.data(), q.data(), n * sizeof(float)), 0) << what << " step " << step;
            ref->end_step();
            fused->end_step();
          }
          EXPECT_EQ(fused->save_state(), ref->save_state()) << what;
        }
      }
    }
  }
  auto opt = make_optimizer({.kind = "sgd", .lr = 0.1f}, 10);
  std::vector<float> p(4), g(4);
  std::vector<const float*> none, one = {g.data()};
  EXPECT_THROW(opt->update_sum(p, p, none, 0), InvalidArgument) << "no terms";
  EXPECT_THROW(opt->update_sum(p, p, one, 8), InvalidArgument) << "a piece past the range";
}

TEST(Optimizer, PoolSplitGivesTheSameBits) {
  const int64_t n = 300000;
  ThreadPool pool(2);
  for (const char* kind : {"sgd", "adam"}) {
    OptimizerConfig c{.kind = kind, .lr = 0.01f, .momentum = 0.9f};
    auto a = make_optimizer(c, n), b = make_optimizer(c, n);
    b->set_pool(&pool);
    std::vector<float> p1 = random_vec(n, 2), p2 = p1, g = random_vec(n, 3);
    a->step(p1, g);
    b->step(p2, g);
    EXPECT_EQ(p1, p2) << kind;
  }
}

TEST(Optimizer, StateRoundTripResumesExactly) {
  for (const char* kind : {"sgd", "adam", "adamw"}) {
    OptimizerConfig c{.kind = kind, .lr = 0.02f, .momentum = 0.8f, .weight_decay = 0.1f};
    auto a = make_optimizer(c, 50);
    std::vector<float> p = random_vec(50, 4);
    for (int s = 0; s < 3; ++s) a->step(p, random_vec(50, 20 + s));
    a->set_lr(0.007f);
    std::vector<uint8_t> bytes = a->save_state();

    OptimizerConfig other = c;
    other.momentum = 0.5f;  // hyper-parameters come from the state, not the constructor
    other.lr = 1.0f;
    auto b = make_optimizer(other, 50);
    b->load_state(bytes);
    EXPECT_EQ(b->steps(), 3);
    EXPECT_FLOAT_EQ(b->lr(), 0.007f);
    std::vector<float> pa = p, pb = p, g = random_vec(50, 99);
    a->step(pa, g);
    b->step(pb, g);
    EXPECT_EQ(pa, pb) << kind;
    EXPECT_EQ(a->save_state(), b->save_state()) << kind;
  }
}

TEST(Optimizer, LoadStateRejectsMismatches) {
  Sgd sgd(10, {.lr = 0.1f, .momentum = 0.9f});
  std::vector<uint8_t> bytes = sgd.save_state();
  Adam adam(10, {});
  EXPECT_THROW(adam.load_state(bytes), InvalidArgument);
  Sgd bigger(11, {.lr = 0.1f, .momentum = 0.9f});
  EXPECT_THROW(bigger.load_state(bytes), InvalidArgument);
  std::vector<uint8_t> truncated(bytes.begin(), bytes.end() - 3);
  Sgd same(10, {.lr = 0.1f, .momentum = 0.9f});
  EXPECT_THROW(same.load_state(truncated), Corrupt);
  bytes[0] = 'X';
  EXPECT_THROW(same.load_state(bytes), Corrupt);
}

TEST(Optimizer, RejectsWrongSpanSizesAndBadConfigs) {
  Sgd opt(4, {.lr = 0.1f});
  std::vector<float> p(5), g(5);
  EXPECT_THROW(opt.step(p, g), InvalidArgument);
  EXPECT_THROW(make_optimizer({.kind = "lamb"}, 4), InvalidArgument);
  EXPECT_THROW(Sgd(4, {.lr = 0.1f, .momentum = 1.5f}), InvalidArgument);
  EXPECT_THROW(Sgd(4, {.lr = 0.1f, .nesterov = true}), InvalidArgument);
}

TEST(Schedule, Values) {
  EXPECT_FLOAT_EQ(LrSchedule::constant(0.1f).at(1000), 0.1f);
  LrSchedule st = LrSchedule::step_decay(1.0f, 10, 0.5f);
  EXPECT_FLOAT_EQ(st.at(9), 1.0f);
  EXPECT_FLOAT_EQ(st.at(10), 0.5f);
  EXPECT_FLOAT_EQ(st.at(25), 0.25f);
  LrSchedule cos = LrSchedule::cosine(1.0f, 100, 0.1f);
  EXPECT_FLOAT_EQ(cos.at(0), 1.0f);
  EXPECT_NEAR(cos.at(50), 0.55f, 1e-6);
  EXPECT_FLOAT_EQ(cos.at(100), 0.1f);
  EXPECT_FLOAT_EQ(cos.at(500), 0.1f);
  LrSchedule wc = LrSchedule::warmup_cosine(1.0f, 10, 110);
  EXPECT_FLOAT_EQ(wc.at(0), 0.1f);
  EXPECT_FLOAT_EQ(wc.at(9), 1.0f);
  EXPECT_FLOAT_EQ(wc.at(10), 1.0f);
  EXPECT_NEAR(wc.at(60), 0.5f, 1e-6);
  EXPECT_NEAR(wc.at(110), 0.0f, 1e-7);
}

TEST(Schedule, ParsesText) {
  LrSchedule s = LrSchedule::parse("warmup_cosine:warmup=10,total=110,min=0.01", 0.5f);
  EXPECT_EQ(s.kind, ScheduleKind::kWarmupCosine);
  EXPECT_EQ(s.warmup, 10);
  EXPECT_FLOAT_EQ(s.min, 0.01f);
  EXPECT_FLOAT_EQ(s.base, 0.5f);
  EXPECT_EQ(LrSchedule::parse("constant", 0.3f).at(7), 0.3f);
  EXPECT_FLOAT_EQ(LrSchedule::parse("step:step_size=5,gamma=0.5", 1.0f).at(5), 0.5f);
  EXPECT_THROW(LrSchedule::parse("cosine", 1.0f), InvalidArgument);               // needs total
  EXPECT_THROW(LrSchedule::parse("cosine:total=10,bogus=1", 1.0f), InvalidArgument);
  EXPECT_THROW(LrSchedule::parse("linear", 1.0f), InvalidArgument);
}

TEST(Clip, ScalesOnlyAboveMaxNorm) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(clip_grad_norm(g, 10.0f), 5.0);
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(g, 1.0f), 5.0);
  EXPECT_NEAR(g[0], 0.6f, 1e-6);
  EXPECT_NEAR(g[1], 0.8f, 1e-6);
  EXPECT_NEAR(global_norm(g), 1.0, 1e-6);
}

TEST(Clip, ShardedNormEqualsGlobal) {
  std::vector<float> g = random_vec(1000, 5);
  std::span<const float> s(g);
  double parts = grad_sumsq(s.subspan(0, 300)) + grad_sumsq(s.subspan(300));
  // The kernels accumulate each chunk in float (lanes of the SIMD width this CPU has), so
  // another split agrees to float precision, not double.
  EXPECT_NEAR(std::sqrt(parts), global_norm(g), 1e-6 * std::sqrt(parts));
  ThreadPool pool(2);
  std::vector<float> big = random_vec(200000, 6);
  EXPECT_NEAR(global_norm(big, &pool), global_norm(big), 1e-6 * global_norm(big));
}

}  // namespace
}  // namespace dtrain

// The transformer's new op, causal_attention, in the gradient-check style of ops_test.cc:
// the forward against a float64 reference written independently (loops, no gemm), the
// backward against central finite differences of sum(out * R), for several shapes
// (one head, several heads, sequence 1, batch > 1). The checker itself is shown to catch a
// wrong gradient, and the causal mask is checked directly (changing a later token never
// changes an earlier output).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/attention.h"
#include "autograd/ops.h"
#include "base/thread_pool.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

struct Shape4 {
  int64_t batch, seq, heads, hd;
};

Tensor random_tensor(const Shape& s, uint64_t seed, float scale = 1.0f) {
  Tensor t = Tensor::empty(s);
  Rng rng(seed);
  rng.fill_normal(t.span(), 0.0f, scale);
  return t;
}

// float64 reference: per (b, h, t) softmax over t' <= t of q.k / sqrt(hd), times v.
std::vector<double> reference(const Tensor& qkv, const Shape4& s) {
  const int64_t d = s.heads * s.hd, n = s.batch * s.seq;
  std::vector<double> out(static_cast<size_t>(n * d), 0.0);
  auto at = [&](int64_t row, int64_t col) { return static_cast<double>(qkv.data()[row * 3 * d + col]); };
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < s.seq; ++t) {
        std::vector<double> w(static_cast<size_t>(t + 1));
        double mx = -1e300, sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (int64_t j = 0; j < s.hd; ++j) dot += at(b * s.seq + t, h * s.hd + j) * at(b * s.seq + u, d + h * s.hd + j);
          w[static_cast<size_t>(u)] = dot / std::sqrt(static_cast<double>(s.hd));
          mx = std::max(mx, w[static_cast<size_t>(u)]);
        }
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j < s.hd; ++j) {
          double o = 0;
          for (int64_t u = 0; u <= t; ++u) o += w[static_cast<size_t>(u)] / sum * at(b * s.seq + u, 2 * d + h * s.hd + j);
          out[static_cast<size_t>((b * s.seq + t) * d + h * s.hd + j)] = o;
        }
      }
  return out;
}

double weighted(const Tensor& qkv, const Tensor& r, const Shape4& s) {
  std::vector<double> out = reference(qkv, s);
  double acc = 0;
  for (size_t i = 0; i < out.size(); ++i) acc += out[i] * r.data()[i];
  return acc;
}

// Max relative error of the analytic gradient of sum(out * R) against finite differences
// of the float64 reference (so the difference quotient has no float32 noise).
double gradient_error(const Shape4& s, uint64_t seed, bool break_it, ThreadPool* pool = nullptr) {
  const int64_t n = s.batch * s.seq, d = s.heads * s.hd;
  Tensor x = random_tensor({n, 3 * d}, seed);
  Tensor r = random_tensor({n, d}, seed + 1);
  Graph g(pool);
  Var in = g.leaf(x.clone());
  Var out = causal_attention(in, s.batch, s.seq, s.heads);
  Var loss = sum(mul(out, g.input(r)));
  g.backward(loss);
  Tensor grad = in.grad().clone();
  if (break_it) grad.data()[grad.numel() / 2] += 0.5f;
  double worst = 0;
  const double eps = 1e-4;
  for (int64_t i = 0; i < x.numel(); ++i) {
    Tensor xp = x.clone(), xm = x.clone();
    // Perturb in float64 terms: the reference reads the float, so use a float-representable step.
    xp.data()[i] += static_cast<float>(eps);
    xm.data()[i] -= static_cast<float>(eps);
    const double h = static_cast<double>(xp.data()[i]) - xm.data()[i];
    const double fd = (weighted(xp, r, s) - weighted(xm, r, s)) / h;
    const double err = std::abs(fd - grad.data()[i]) / std::max(1.0, std::abs(fd));
    worst = std::max(worst, err);
  }
  return worst;
}

class AttentionTable : public ::testing::TestWithParam<Shape4> {};

TEST_P(AttentionTable, ForwardMatchesFloat64Reference) {
  const Shape4 s = GetParam();
  Tensor x = random_tensor({s.batch * s.seq, 3 * s.heads * s.hd}, 5);
  Graph g;
  Var out = causal_attention(g.input(x), s.batch, s.seq, s.heads);
  std::vector<double> ref = reference(x, s);
  ASSERT_EQ(out.value().numel(), static_cast<int64_t>(ref.size()));
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(out.value().data()[i], ref[i], 1e-5) << "element " << i;
}

TEST_P(AttentionTable, GradientMatchesFiniteDifferences) {
  EXPECT_LT(gradient_error(GetParam(), 17, false), 2e-3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTable,
                         ::testing::Values(Shape4{1, 1, 1, 2}, Shape4{1, 4, 1, 3}, Shape4{2, 3, 2, 2}, Shape4{1, 5, 4, 2},
                                           Shape4{3, 4, 2, 4}));

TEST(AttentionChecker, DetectsAWrongBackward) { EXPECT_GT(gradient_error({1, 4, 2, 2}, 3, true), 0.1); }

TEST(Attention, PoolGivesTheSameBits) {
  ThreadPool pool(3);
  const Shape4 s{3, 5, 4, 4};
  Tensor x = random_tensor({s.batch * s.seq, 3 * s.heads * s.hd}, 9);
  Graph g1, g2(&pool);
  Var a = g1.leaf(x.clone()), b = g2.leaf(x.clone());
  Var oa = causal_attention(a, s.batch, s.seq, s.heads), ob = causal_attention(b, s.batch, s.seq, s.heads);
  EXPECT_EQ(max_abs_diff(oa.value(), ob.value()), 0.0f);
  g1.backward(sum(oa));
  g2.backward(sum(ob));
  EXPECT_EQ(max_abs_diff(a.grad(), b.grad()), 0.0f);
}

TEST(Attention, CausalMaskHidesTheFuture) {
  const Shape4 s{1, 6, 2, 3};
  Tensor x = random_tensor({s.seq, 3 * s.heads * s.hd}, 11);
  Tensor y = x.clone();
  for (int64_t j = 0; j < y.dim(1); ++j) y.at({5, j}) += 3.0f;  // change the last token only
  Graph g;
  Var ox = causal_attention(g.input(x), 1, s.seq, s.heads), oy = causal_attention(g.input(y), 1, s.seq, s.heads);
  EXPECT_EQ(max_abs_diff(ox.value().slice(0, 0, 5), oy.value().slice(0, 0, 5)), 0.0f);
  EXPECT_GT(max_abs_diff(ox.value().slice(0, 5, 6), oy.value().slice(0, 5, 6)), 1e-3f);
}

TEST(Attention, AccumulatesIntoAnExistingGradient) {
  const Shape4 s{2, 3, 2, 2};
  Tensor x = random_tensor({s.batch * s.seq, 3 * s.heads * s.hd}, 13);
  Graph g;
  Var in = g.leaf(x);
  // Two uses of the same input: the gradient is the sum of both contributions.
  Var o = add(causal_attention(in, s.batch, s.seq, s.heads), causal_attention(in, s.batch, s.seq, s.heads));
  g.backward(sum(o));
  Tensor twice = in.grad().clone();
  Graph g1;
  Var in1 = g1.leaf(x);
  g1.backward(sum(causal_attention(in1, s.batch, s.seq, s.heads)));
  for (int64_t i = 0; i < twice.numel(); ++i) EXPECT_NEAR(twice.data()[i], 2 * in1.grad().data()[i], 1e-5);
}

TEST(Attention, ShapeErrorsNameTheShapes) {
  Graph g;
  Var x = g.input(Tensor::zeros({6, 10}));
  try {
    causal_attention(x, 2, 3, 4);
    FAIL() << "expected InvalidArgument";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[6, 10]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dtrain

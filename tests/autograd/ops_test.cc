// One declarative table of autograd ops (in the style of ggml's test-backend-ops): each row
// names an op, its input shapes and how to build it; optionally a float64 reference for the
// forward value. Every row is checked twice:
//   1. forward against the reference (where given);
//   2. backward against central finite differences of L = sum(out * R), R a fixed random
//      tensor (so every output element matters with a different weight). L is accumulated in
//      double from the float outputs; eps = 1e-2 keeps rounding noise small. Inputs of kinked
//      ops (relu, hinge) are kept away from their kinks, and a perturbation that flips which
//      outputs are exactly zero (a ReLU crossing its kink) is skipped — at most a quarter of them,
//      so the check cannot pass vacuously.
// A final test feeds the checker an op with a deliberately wrong backward and expects it to
// fail, so the checker itself is known to bite.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>

#include "autograd/loss.h"
#include "autograd/ops.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

using Inputs = std::vector<Var>;
using Values = std::vector<Tensor>;

struct OpCase {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Var(Graph&, const Inputs&)> build;
  // Forward reference in double over the input values (nullptr: gradient check only).
  std::function<std::vector<double>(const Values&)> ref = nullptr;
  bool away_from_zero = false;  // keep inputs out of [-0.1, 0.1] (kinks at 0)
  float lo = -1.0f, hi = 1.0f;
};

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

const std::vector<int32_t> kLabels4 = {2, 0, 3, 1};
const std::vector<float> kSigns4 = {1, -1, 0, 1};  // 0 means -1

double d(const Tensor& t, int64_t i) { return t.contiguous().data()[i]; }

std::vector<OpCase> op_table() {
  std::vector<OpCase> t;
  auto elementwise = [](std::function<double(double)> f) {
    return [f](const Values& v) {
      std::vector<double> out(v[0].numel());
      for (int64_t i = 0; i < v[0].numel(); ++i) out[i] = f(d(v[0], i));
      return out;
    };
  };
  t.push_back({"add", {{3, 5}, {3, 5}}, [](Graph&, const Inputs& x) { return add(x[0], x[1]); },
               [](const Values& v) { std::vector<double> o(15); for (int i = 0; i < 15; ++i) o[i] = d(v[0], i) + d(v[1], i); return o; }});
  t.push_back({"sub", {{3, 5}, {3, 5}}, [](Graph&, const Inputs& x) { return sub(x[0], x[1]); },
               [](const Values& v) { std::vector<double> o(15); for (int i = 0; i < 15; ++i) o[i] = d(v[0], i) - d(v[1], i); return o; }});
  t.push_back({"mul", {{4, 3}, {4, 3}}, [](Graph&, const Inputs& x) { return mul(x[0], x[1]); },
               [](const Values& v) { std::vector<double> o(12); for (int i = 0; i < 12; ++i) o[i] = d(v[0], i) * d(v[1], i); return o; }});
  t.push_back({"mul_same_input", {{7}}, [](Graph&, const Inputs& x) { return mul(x[0], x[0]); },
               elementwise([](double a) { return a * a; })});
  t.push_back({"scale", {{2, 9}}, [](Graph&, const Inputs& x) { return scale(x[0], -2.5f); },
               elementwise([](double a) { return -2.5 * a; })});
  t.push_back({"bias_add", {{5, 3}, {3}}, [](Graph&, const Inputs& x) { return bias_add(x[0], x[1]); },
               [](const Values& v) { std::vector<double> o(15); for (int i = 0; i < 15; ++i) o[i] = d(v[0], i) + d(v[1], i % 3); return o; }});
  auto mm_ref = [](bool ta, bool tb) {
    return [ta, tb](const Values& v) {
      const Tensor &a = v[0], &b = v[1];
      int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
      std::vector<double> o(m * n, 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t p = 0; p < k; ++p)
            o[i * n + j] += double(ta ? a.at({p, i}) : a.at({i, p})) * (tb ? b.at({j, p}) : b.at({p, j}));
      return o;
    };
  };
  t.push_back({"matmul", {{3, 4}, {4, 5}}, [](Graph&, const Inputs& x) { return matmul(x[0], x[1]); }, mm_ref(false, false)});
  t.push_back({"matmul_ta", {{4, 3}, {4, 5}}, [](Graph&, const Inputs& x) { return matmul(x[0], x[1], true, false); }, mm_ref(true, false)});
  t.push_back({"matmul_tb", {{3, 4}, {5, 4}}, [](Graph&, const Inputs& x) { return matmul(x[0], x[1], false, true); }, mm_ref(false, true)});
  t.push_back({"matmul_ta_tb", {{4, 3}, {5, 4}}, [](Graph&, const Inputs& x) { return matmul(x[0], x[1], true, true); }, mm_ref(true, true)});
  auto linear_ref = [](std::function<double(double)> act) {
    return [act](const Values& v) {
      const Tensor &x = v[0], &w = v[1];
      Tensor b = v.size() > 2 ? v[2] : Tensor::zeros({w.dim(0)});
      int64_t B = x.dim(0), I = x.dim(1), O = w.dim(0);
      std::vector<double> o(B * O);
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < O; ++j) {
          double s = b.at({j});
          for (int64_t p = 0; p < I; ++p) s += double(x.at({i, p})) * w.at({j, p});
          o[i * O + j] = act(s);
        }
      return o;
    };
  };
  t.push_back({"linear", {{4, 6}, {3, 6}, {3}}, [](Graph&, const Inputs& x) { return linear(x[0], x[1], x[2]); },
               linear_ref([](double s) { return s; })});
  t.push_back({"linear_relu", {{5, 7}, {6, 7}, {6}}, [](Graph&, const Inputs& x) { return linear(x[0], x[1], x[2], Activation::kRelu); },
               linear_ref([](double s) { return std::max(0.0, s); }), true});
  auto gelu_ref = [](double a) { return 0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))); };
  t.push_back({"linear_gelu", {{3, 4}, {2, 4}, {2}}, [](Graph&, const Inputs& x) { return linear(x[0], x[1], x[2], Activation::kGelu); },
               linear_ref(gelu_ref)});
  t.push_back({"linear_tanh_nobias", {{3, 4}, {2, 4}}, [](Graph&, const Inputs& x) { return linear(x[0], x[1], Var(), Activation::kTanh); },
               linear_ref([](double s) { return std::tanh(s); })});
  t.push_back({"relu", {{33}}, [](Graph&, const Inputs& x) { return relu(x[0]); }, elementwise([](double a) { return std::max(0.0, a); }), true});
  t.push_back({"gelu", {{33}}, [](Graph&, const Inputs& x) { return gelu(x[0]); },
               elementwise([](double a) { return 0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))); }),
               false, -3.0f, 3.0f});
  t.push_back({"tanh", {{33}}, [](Graph&, const Inputs& x) { return tanh(x[0]); }, elementwise([](double a) { return std::tanh(a); }),
               false, -2.0f, 2.0f});
  t.push_back({"sigmoid", {{33}}, [](Graph&, const Inputs& x) { return sigmoid(x[0]); },
               elementwise([](double a) { return 1 / (1 + std::exp(-a)); }), false, -4.0f, 4.0f});
  auto softmax_ref = [](bool log) {
    return [log](const Values& v) {
      int64_t c = v[0].dim(-1), rows = v[0].numel() / c;
      std::vector<double> o(v[0].numel());
      for (int64_t r = 0; r < rows; ++r) {
        double m = -1e300, s = 0;
        for (int64_t j = 0; j < c; ++j) m = std::max(m, d(v[0], r * c + j));
        for (int64_t j = 0; j < c; ++j) s += std::exp(d(v[0], r * c + j) - m);
        for (int64_t j = 0; j < c; ++j) {
          double lp = d(v[0], r * c + j) - m - std::log(s);
          o[r * c + j] = log ? lp : std::exp(lp);
        }
      }
      return o;
    };
  };
  t.push_back({"softmax", {{3, 19}}, [](Graph&, const Inputs& x) { return softmax(x[0]); }, softmax_ref(false), false, -3.0f, 3.0f});
  t.push_back({"log_softmax", {{3, 19}}, [](Graph&, const Inputs& x) { return log_softmax(x[0]); }, softmax_ref(true), false, -3.0f, 3.0f});
  t.push_back({"cross_entropy", {{4, 5}}, [](Graph&, const Inputs& x) { return cross_entropy(x[0], kLabels4); },
               [](const Values& v) {
                 double total = 0;
                 for (int r = 0; r < 4; ++r) {
                   double m = -1e300, s = 0;
                   for (int j = 0; j < 5; ++j) m = std::max(m, d(v[0], r * 5 + j));
                   for (int j = 0; j < 5; ++j) s += std::exp(d(v[0], r * 5 + j) - m);
                   total += m + std::log(s) - d(v[0], r * 5 + kLabels4[r]);
                 }
                 return std::vector<double>{total / 4};
               }, false, -3.0f, 3.0f});
  t.push_back({"mse_loss", {{3, 4}}, [](Graph&, const Inputs& x) { return mse_loss(x[0], Tensor::full({3, 4}, 0.25f)); },
               [](const Values& v) { double s = 0; for (int i = 0; i < 12; ++i) s += (d(v[0], i) - 0.25) * (d(v[0], i) - 0.25); return std::vector<double>{s / 12}; }});
  t.push_back({"logistic_loss", {{4}}, [](Graph&, const Inputs& x) { return logistic_loss(x[0], kSigns4); },
               [](const Values& v) {
                 double s = 0;
                 for (int i = 0; i < 4; ++i) s += std::log1p(std::exp(-(kSigns4[i] == 1 ? 1.0 : -1.0) * d(v[0], i)));
                 return std::vector<double>{s / 4};
               }, false, -3.0f, 3.0f});
  // Scores stay away from the hinge at y*s = 1 by using the range [-0.8, 0.8].
  t.push_back({"hinge_loss", {{4, 1}}, [](Graph&, const Inputs& x) { return hinge_loss(x[0], kSigns4); },
               [](const Values& v) {
                 double s = 0;
                 for (int i = 0; i < 4; ++i) s += std::max(0.0, 1 - (kSigns4[i] == 1 ? 1.0 : -1.0) * d(v[0], i));
                 return std::vector<double>{s / 4};
               }, false, -0.8f, 0.8f});
  t.push_back({"layernorm", {{3, 6}, {6}, {6}}, [](Graph&, const Inputs& x) { return layernorm(x[0], x[1], x[2]); },
               [](const Values& v) {
                 std::vector<double> o(18);
                 for (int r = 0; r < 3; ++r) {
                   double mu = 0, var = 0;
                   for (int j = 0; j < 6; ++j) mu += d(v[0], r * 6 + j) / 6;
                   for (int j = 0; j < 6; ++j) var += (d(v[0], r * 6 + j) - mu) * (d(v[0], r * 6 + j) - mu) / 6;
                   for (int j = 0; j < 6; ++j) o[r * 6 + j] = (d(v[0], r * 6 + j) - mu) / std::sqrt(var + 1e-5) * d(v[1], j) + d(v[2], j);
                 }
                 return o;
               }, false, -2.0f, 2.0f});
  t.push_back({"embedding", {{5, 3}}, [](Graph&, const Inputs& x) { return embedding(x[0], std::vector<int32_t>{4, 0, 4, 2}); },
               [](const Values& v) {
                 std::vector<double> o;
                 for (int i : {4, 0, 4, 2})
                   for (int j = 0; j < 3; ++j) o.push_back(d(v[0], i * 3 + j));
                 return o;
               }});
  t.push_back({"dropout", {{6, 7}}, [](Graph&, const Inputs& x) { return dropout(x[0], 0.5f, 1234); },
               [](const Values& v) {
                 std::vector<double> o(42);
                 for (int i = 0; i < 42; ++i) o[i] = hash_uniform(1234, i) >= 0.5f ? 2.0 * d(v[0], i) : 0.0;
                 return o;
               }});
  t.push_back({"reshape", {{3, 4}}, [](Graph&, const Inputs& x) { return reshape(x[0], {2, -1}); },
               elementwise([](double a) { return a; })});
  t.push_back({"transpose", {{3, 4}}, [](Graph&, const Inputs& x) { return transpose(x[0], 0, 1); },
               [](const Values& v) { std::vector<double> o; for (int j = 0; j < 4; ++j) for (int i = 0; i < 3; ++i) o.push_back(v[0].at({i, j})); return o; }});
  t.push_back({"slice", {{5, 4}}, [](Graph&, const Inputs& x) { return slice(x[0], 1, 1, 3); },
               [](const Values& v) { std::vector<double> o; for (int i = 0; i < 5; ++i) for (int j = 1; j < 3; ++j) o.push_back(v[0].at({i, j})); return o; }});
  t.push_back({"concat_dim0", {{2, 3}, {4, 3}}, [](Graph&, const Inputs& x) { return concat({x[0], x[1]}, 0); },
               [](const Values& v) { std::vector<double> o; for (int i = 0; i < 6; ++i) o.push_back(d(v[0], i)); for (int i = 0; i < 12; ++i) o.push_back(d(v[1], i)); return o; }});
  t.push_back({"concat_dim1", {{2, 3}, {2, 1}, {2, 2}}, [](Graph&, const Inputs& x) { return concat({x[0], x[1], x[2]}, 1); },
               [](const Values& v) {
                 std::vector<double> o;
                 for (int r = 0; r < 2; ++r)
                   for (const Tensor& t : v)
                     for (int64_t j = 0; j < t.dim(1); ++j) o.push_back(t.at({r, j}));
                 return o;
               }});
  t.push_back({"sum", {{3, 7}}, [](Graph&, const Inputs& x) { return sum(x[0]); },
               [](const Values& v) { double s = 0; for (int i = 0; i < 21; ++i) s += d(v[0], i); return std::vector<double>{s}; }});
  t.push_back({"mean", {{3, 7}}, [](Graph&, const Inputs& x) { return mean(x[0]); },
               [](const Values& v) { double s = 0; for (int i = 0; i < 21; ++i) s += d(v[0], i); return std::vector<double>{s / 21}; }});
  // Composite: a two-layer net with a shared input used twice (gradient accumulation paths).
  t.push_back({"composite_mlp", {{4, 5}, {6, 5}, {6}, {3, 6}},
               [](Graph&, const Inputs& x) {
                 Var h = linear(x[0], x[1], x[2], Activation::kTanh);
                 Var y = matmul(h, x[3], false, true);
                 return add(log_softmax(y), scale(y, 0.5f));
               }});
  return t;
}

Values make_inputs(const OpCase& c, uint64_t seed) {
  Values v;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    Tensor t = Tensor::empty(c.shapes[i]);
    Rng rng(derive_seed(seed, i));
    for (float& x : t.span()) {
      x = rng.uniform(c.lo, c.hi);
      if (c.away_from_zero) x = (x < 0 ? -1.0f : 1.0f) * (0.1f + 0.9f * std::fabs(x));
    }
    v.push_back(t);
  }
  return v;
}

// Runs the op on fresh leaves; returns the output Var (graph owned by caller).
Var run(Graph& g, const OpCase& c, const Values& vals, Inputs* leaves) {
  leaves->clear();
  for (const Tensor& t : vals) leaves->push_back(g.leaf(t.clone()));
  return c.build(g, *leaves);
}

std::vector<bool> zero_pattern(const Tensor& out) {
  Tensor o = out.contiguous();
  std::vector<bool> z(o.numel());
  for (int64_t i = 0; i < o.numel(); ++i) z[i] = o.data()[i] == 0.0f;
  return z;
}

double weighted_loss(const Tensor& out, const Tensor& r) {
  Tensor o = out.contiguous();
  double s = 0;
  for (int64_t i = 0; i < o.numel(); ++i) s += double(o.data()[i]) * r.data()[i];
  return s;
}

// Returns an empty string when analytic and numeric gradients agree, else a description.
std::string gradient_check(const OpCase& c, uint64_t seed) {
  Values vals = make_inputs(c, seed);
  Graph g;
  Inputs leaves;
  Var out = run(g, c, vals, &leaves);
  Tensor r = Tensor::empty(out.value().shape());
  Rng rng(seed + 99);
  rng.fill_uniform(r.span(), -1.0f, 1.0f);
  g.backward(out, r);
  const double eps = 1e-2;
  const std::vector<bool> base_zeros = zero_pattern(out.value());
  int64_t checked = 0, skipped = 0;
  std::ostringstream err;
  for (size_t k = 0; k < vals.size(); ++k) {
    Tensor analytic = leaves[k].grad();
    for (int64_t i = 0; i < vals[k].numel(); ++i) {
      double num;
      {
        Values plus = vals, minus = vals;
        plus[k] = vals[k].clone();
        minus[k] = vals[k].clone();
        plus[k].data()[i] += static_cast<float>(eps);
        minus[k].data()[i] -= static_cast<float>(eps);
        double h = double(plus[k].data()[i]) - double(minus[k].data()[i]);
        Graph gp, gm;
        Inputs lp, lm;
        Tensor op = run(gp, c, plus, &lp).value(), om = run(gm, c, minus, &lm).value();
        if (zero_pattern(op) != base_zeros || zero_pattern(om) != base_zeros) {
          ++skipped;
          continue;
        }
        ++checked;
        num = (weighted_loss(op, r) - weighted_loss(om, r)) / h;
      }
      double ana = analytic.defined() ? analytic.data()[i] : 0.0;
      if (std::fabs(ana - num) > 2e-3 + 2e-2 * std::fabs(num)) {
        err << c.name << ": input " << k << " element " << i << ": analytic " << ana << " vs numeric " << num << "\n";
        if (err.str().size() > 400) return err.str();
      }
    }
  }
  if (skipped * 4 > checked + skipped)
    err << c.name << ": " << skipped << " of " << checked + skipped << " perturbations crossed a kink\n";
  return err.str();
}

class OpsTable : public ::testing::TestWithParam<OpCase> {};

class OpsForward : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpsForward, MatchesFloat64Reference) {
  const OpCase& c = GetParam();
  Values vals = make_inputs(c, 7);
  Graph g;
  Inputs leaves;
  Tensor out = run(g, c, vals, &leaves).value().contiguous();
  std::vector<double> want = c.ref(vals);
  ASSERT_EQ(static_cast<int64_t>(want.size()), out.numel());
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_NEAR(out.data()[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << c.name << " element " << i;
}

TEST_P(OpsTable, GradientMatchesFiniteDifferences) {
  for (uint64_t seed : {1, 2}) EXPECT_EQ(gradient_check(GetParam(), seed), "") << "seed " << seed;
}

std::vector<OpCase> with_reference(std::vector<OpCase> all) {
  std::erase_if(all, [](const OpCase& c) { return !c.ref; });
  return all;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpsTable, ::testing::ValuesIn(op_table()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });
// Forward values for every row that has a float64 reference (all but the composite).
INSTANTIATE_TEST_SUITE_P(Ops, OpsForward, ::testing::ValuesIn(with_reference(op_table())),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

// The checker must catch a wrong backward: y = 2x recorded with dy/dx = 3.
TEST(GradientChecker, DetectsAWrongBackward) {
  OpCase wrong{"wrong_double", {{5}}, [](Graph& g, const Inputs& x) {
                 return g.make(scale(x[0], 2.0f).value(), {x[0].id()}, [](Graph& g, int self) {
                   g.accumulate_grad(g.inputs(self)[0], dtrain::scale(g.grad(self), 3.0f));
                 });
               }};
  EXPECT_NE(gradient_check(wrong, 1), "");
}

TEST(Graph, ErrorsNameShapes) {
  Graph g;
  Var a = g.leaf(Tensor::zeros({2, 3})), b = g.leaf(Tensor::zeros({4, 5}));
  try {
    matmul(a, b);
    FAIL() << "expected a shape error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(add(a, b), InvalidArgument);
  EXPECT_THROW(cross_entropy(a, std::vector<int32_t>{0, 3}), InvalidArgument);  // label 3 >= 3 classes
}

TEST(Graph, ParamGradientsOverwriteOrAccumulate) {
  std::vector<float> w = {1, 2, 3}, gw = {100, 100, 100};
  for (GradMode mode : {GradMode::kOverwrite, GradMode::kAccumulate}) {
    gw = {100, 100, 100};
    Graph g;
    Var p = g.param(Tensor::wrap(w.data(), {3}), Tensor::wrap(gw.data(), {3}), mode);
    EXPECT_EQ(g.param(Tensor::wrap(w.data(), {3}), Tensor::wrap(gw.data(), {3}), mode).id(), p.id());
    g.backward(sum(mul(p, p)));  // d/dw sum w^2 = 2w
    float base = mode == GradMode::kOverwrite ? 0.0f : 100.0f;
    EXPECT_FLOAT_EQ(gw[0], base + 2);
    EXPECT_FLOAT_EQ(gw[2], base + 6);
  }
}

TEST(Graph, UnusedParamGetsZeroGradient) {
  std::vector<float> w = {1, 2}, gw = {5, 5}, u = {3}, gu = {7};
  Graph g;
  Var p = g.param(Tensor::wrap(w.data(), {2}), Tensor::wrap(gw.data(), {2}));
  g.param(Tensor::wrap(u.data(), {1}), Tensor::wrap(gu.data(), {1}));
  g.backward(sum(p));
  EXPECT_EQ(gw[0], 1.0f);
  EXPECT_EQ(gu[0], 0.0f);
}

TEST(Graph, InferenceGraphRefusesBackward) {
  Graph g(nullptr, /*record=*/false);
  Var x = g.leaf(Tensor::full({2}, 1.0f));
  Var y = sum(relu(x));
  EXPECT_FLOAT_EQ(y.item(), 2.0f);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(g.backward(y), InvalidArgument);
}

// Big enough (70 x 1000) for layernorm and cross-entropy to split rows over a pool: the
// values and gradients must be bit-identical to one thread.
TEST(Pool, RowSplitOpsGiveTheSameBits) {
  Tensor x = Tensor::empty({70, 1000}), gamma = Tensor::empty({1000}), beta = Tensor::empty({1000});
  Rng rng(3);
  rng.fill_uniform(x.span(), -2.0f, 2.0f);
  rng.fill_uniform(gamma.span(), 0.5f, 1.5f);
  rng.fill_uniform(beta.span(), -0.5f, 0.5f);
  std::vector<int32_t> labels(70);
  for (int i = 0; i < 70; ++i) labels[i] = (i * 37) % 1000;
  ThreadPool pool(2);
  std::vector<std::vector<float>> results[2];
  for (int run = 0; run < 2; ++run) {
    Graph g(run == 0 ? nullptr : &pool);
    Var vx = g.leaf(x.clone()), vg = g.leaf(gamma.clone()), vb = g.leaf(beta.clone());
    Var loss = cross_entropy(layernorm(vx, vg, vb), labels);
    g.backward(loss);
    results[run] = {loss.value().to_vector(), vx.grad().to_vector(), vg.grad().to_vector(), vb.grad().to_vector()};
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(results[0][k], results[1][k]) << "result " << k;
}

TEST(Dropout, DeterministicAndUnbiased) {
  Graph g;
  Var x = g.input(Tensor::full({100, 100}, 1.0f));
  Tensor a = dropout(x, 0.3f, 42).value(), b = dropout(x, 0.3f, 42).value(), c = dropout(x, 0.3f, 43).value();
  EXPECT_EQ(max_abs_diff(a, b), 0.0f);
  EXPECT_GT(max_abs_diff(a, c), 0.0f);
  double mean = 0;
  for (float v : a.span()) mean += v;
  mean /= 1e4;
  EXPECT_NEAR(mean, 1.0, 0.05);
}

}  // namespace
}  // namespace dtrain

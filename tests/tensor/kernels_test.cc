// Every SIMD kernel of every ISA this CPU runs, against a naive double-precision reference,
// at sizes that exercise empty input, scalar tails, exactly-full registers and long runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "tensor/kernels.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

const int64_t kSizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000, 1027};

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(i)) out.push_back(i);
  return out;
}

std::vector<float> random_vec(int64_t n, uint64_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::vector<float> v(n);
  Rng rng(seed);
  rng.fill_uniform(v, lo, hi);
  return v;
}

class KernelsTest : public ::testing::TestWithParam<Isa> {
 protected:
  const Kernels& k() { return kernels_for(GetParam()); }
};

// out[i] vs ref(i) within atol + rtol * |ref|; also checks the element past the end is untouched.
template <class Ref>
void expect_map(const std::vector<float>& out, int64_t n, Ref ref, double atol, double rtol, const char* what) {
  for (int64_t i = 0; i < n; ++i) {
    double r = ref(i);
    ASSERT_NEAR(out[i], r, atol + rtol * std::fabs(r)) << what << " n=" << n << " i=" << i;
  }
  ASSERT_EQ(out[n], 12345.0f) << what << " wrote past the end, n=" << n;
}

TEST_P(KernelsTest, BinaryMapsMatchReference) {
  for (int64_t n : kSizes) {
    auto a = random_vec(n, 1), b = random_vec(n, 2);
    std::vector<float> out(n + 1, 12345.0f);
    k().add(a.data(), b.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return double(a[i]) + b[i]; }, 1e-6, 1e-6, "add");
    k().sub(a.data(), b.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return double(a[i]) - b[i]; }, 1e-6, 1e-6, "sub");
    k().mul(a.data(), b.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return double(a[i]) * b[i]; }, 1e-6, 1e-6, "mul");
    k().add_relu(a.data(), b.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return std::max(0.0, double(a[i]) + b[i]); }, 1e-6, 1e-6, "add_relu");
    k().axpby(0.5f, a.data(), -2.0f, b.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return 0.5 * a[i] - 2.0 * b[i]; }, 1e-5, 1e-6, "axpby");
    k().scale(-1.5f, a.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return -1.5 * a[i]; }, 1e-6, 1e-6, "scale");
    std::vector<float> y = b;
    y.push_back(12345.0f);
    k().axpy(2.0f, a.data(), y.data(), n);
    expect_map(y, n, [&](int64_t i) { return 2.0 * a[i] + b[i]; }, 1e-5, 1e-6, "axpy");
    k().fill(7.0f, out.data(), n);
    expect_map(out, n, [&](int64_t) { return 7.0; }, 0, 0, "fill");
  }
}

TEST_P(KernelsTest, TranscendentalsMatchLibm) {
  for (int64_t n : kSizes) {
    auto x = random_vec(n, 3, -10.0f, 10.0f);
    std::vector<float> out(n + 1, 12345.0f);
    k().exp(x.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return std::exp(double(x[i])); }, 0, 3e-7, "exp");
    k().tanh(x.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return std::tanh(double(x[i])); }, 3e-7, 1e-6, "tanh");
    k().sigmoid(x.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return 1.0 / (1.0 + std::exp(-double(x[i]))); }, 1e-7, 1e-6, "sigmoid");
    k().relu(x.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return std::max(0.0, double(x[i])); }, 0, 0, "relu");
    auto gelu = [](double v) { return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); };
    k().gelu(x.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return gelu(x[i]); }, 2e-6, 1e-6, "gelu");
    // gelu' by a central difference of the double reference.
    std::vector<float> ones(n, 1.0f);
    k().gelu_backward(x.data(), ones.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return (gelu(x[i] + 1e-5) - gelu(x[i] - 1e-5)) / 2e-5; }, 2e-5, 1e-5, "gelu'");
  }
}

TEST_P(KernelsTest, ExpHandlesExtremes) {
  std::vector<float> x = {-1000.0f, -87.0f, 0.0f, 1e-8f, 88.0f, 1000.0f};
  std::vector<float> out(x.size());
  k().exp(x.data(), out.data(), static_cast<int64_t>(x.size()));
  EXPECT_LT(out[0], 1e-37f);
  EXPECT_GE(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[2], 1.0f);
  EXPECT_TRUE(std::isfinite(out[4]));
  EXPECT_TRUE(std::isfinite(out[5]));
  std::vector<float> t(x.size());
  k().tanh(x.data(), t.data(), static_cast<int64_t>(x.size()));
  EXPECT_FLOAT_EQ(t[0], -1.0f);
  EXPECT_FLOAT_EQ(t[5], 1.0f);
}

TEST_P(KernelsTest, BackwardMaps) {
  for (int64_t n : kSizes) {
    auto y = random_vec(n, 4, -1.0f, 1.0f), gy = random_vec(n, 5);
    std::vector<float> out(n + 1, 12345.0f);
    k().relu_backward(y.data(), gy.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return y[i] > 0 ? double(gy[i]) : 0.0; }, 0, 0, "relu'");
    k().tanh_backward(y.data(), gy.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return gy[i] * (1.0 - double(y[i]) * y[i]); }, 1e-6, 1e-6, "tanh'");
    k().sigmoid_backward(y.data(), gy.data(), out.data(), n);
    expect_map(out, n, [&](int64_t i) { return gy[i] * double(y[i]) * (1.0 - y[i]); }, 1e-6, 1e-6, "sigmoid'");
  }
}

TEST_P(KernelsTest, Reductions) {
  for (int64_t n : kSizes) {
    auto a = random_vec(n, 6), b = random_vec(n, 7);
    double s = 0, d = 0, q = 0, m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      s += a[i];
      d += double(a[i]) * b[i];
      q += double(a[i]) * a[i];
      m = std::max(m, double(a[i]));
    }
    double tol = 1e-5 * (1 + n);
    EXPECT_NEAR(k().sum(a.data(), n), s, tol) << n;
    EXPECT_NEAR(k().dot(a.data(), b.data(), n), d, tol) << n;
    EXPECT_NEAR(k().sumsq(a.data(), n), q, tol) << n;
    if (n > 0) {
      EXPECT_EQ(k().max(a.data(), n), m) << n;
    } else {
      EXPECT_TRUE(std::isinf(k().max(a.data(), n)));
    }
    std::vector<float> out(n + 1, 12345.0f);
    float shift = n > 0 ? static_cast<float>(m) : 0.0f;
    double es = 0;
    for (int64_t i = 0; i < n; ++i) es += std::exp(double(a[i]) - shift);
    EXPECT_NEAR(k().exp_shift_sum(a.data(), shift, out.data(), n), es, 1e-6 * (1 + es)) << n;
    expect_map(out, n, [&](int64_t i) { return std::exp(double(a[i]) - shift); }, 0, 3e-7, "exp_shift");
  }
}

TEST_P(KernelsTest, SgdUpdateMatchesFormula) {
  for (bool nesterov : {false, true}) {
    for (int64_t n : kSizes) {
      auto p = random_vec(n, 8), g = random_vec(n, 9), v = random_vec(n, 10);
      auto p2 = p, v2 = v;
      SgdUpdate u{0.1f, 0.9f, 0.01f, nesterov};
      k().sgd_update(p2.data(), g.data(), v2.data(), n, u);
      for (int64_t i = 0; i < n; ++i) {
        double gp = g[i] + 0.01 * p[i];
        double vv = 0.9 * v[i] + gp;
        double pp = p[i] - 0.1 * (nesterov ? gp + 0.9 * vv : vv);
        ASSERT_NEAR(v2[i], vv, 1e-5);
        ASSERT_NEAR(p2[i], pp, 1e-5);
      }
    }
  }
}

// The summing form: g given as 1-3 terms added in order, written to out apart from p or in
// place, is sgd_update on the sum bit for bit (every variant, every size's tail).
TEST_P(KernelsTest, SgdUpdateSumIsTheUpdateOfTheSum) {
  for (float momentum : {0.0f, 0.9f}) {
    for (bool nesterov : {false, true}) {
      if (nesterov && momentum == 0.0f) continue;
      for (int terms : {1, 2, 3}) {
        for (int64_t n : kSizes) {
          std::vector<std::vector<float>> g;
          std::vector<const float*> at;
          for (int j = 0; j < terms; ++j) g.push_back(random_vec(n, 20 + static_cast<uint64_t>(j)));
          for (const auto& t : g) at.push_back(t.data());
          std::vector<float> sum(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) {
            float s = g[0][static_cast<size_t>(i)];
            for (int j = 1; j < terms; ++j) s += g[static_cast<size_t>(j)][static_cast<size_t>(i)];
            sum[static_cast<size_t>(i)] = s;
          }
          const auto p = random_vec(n, 8), v = random_vec(n, 10);
          SgdUpdate u{0.1f, momentum, 0.01f, nesterov};
          auto p_ref = p, v_ref = v;
          k().sgd_update(p_ref.data(), sum.data(), v_ref.data(), n, u);
          auto out = std::vector<float>(static_cast<size_t>(n), -1.0f), v_apart = v;
          k().sgd_update_sum(out.data(), p.data(), at.data(), terms, v_apart.data(), n, u);
          auto p_in = p, v_in = v;
          k().sgd_update_sum(p_in.data(), p_in.data(), at.data(), terms, v_in.data(), n, u);
          const std::string what = "momentum " + std::to_string(momentum) + (nesterov ? " nesterov" : "") + " terms " +
                                   std::to_string(terms) + " n " + std::to_string(n);
          ASSERT_EQ(out, p_ref) << what;
          ASSERT_EQ(p_in, p_ref) << what;
          if (momentum != 0.0f) {
            ASSERT_EQ(v_apart, v_ref) << what;
            ASSERT_EQ(v_in, v_ref) << what;
          }
        }
      }
    }
  }
}

TEST_P(KernelsTest, AdamUpdateMatchesFormula) {
  for (bool decoupled : {false, true}) {
    for (int64_t n : kSizes) {
      auto p = random_vec(n, 11), g = random_vec(n, 12), m = random_vec(n, 13), v = random_vec(n, 14, 0.0f, 2.0f);
      auto p2 = p, m2 = m, v2 = v;
      AdamUpdate u{0.01f, 0.9f, 0.99f, 1e-8f, 0.1f, decoupled, 0.19f, 0.0199f};
      k().adam_update(p2.data(), g.data(), m2.data(), v2.data(), n, u);
      for (int64_t i = 0; i < n; ++i) {
        double pp = p[i], gg = g[i];
        if (decoupled) pp *= 1 - 0.01 * 0.1;
        else gg += 0.1 * pp;
        double mm = 0.9 * m[i] + 0.1 * gg, vv = 0.99 * v[i] + 0.01 * gg * gg;
        pp -= 0.01 / 0.19 * mm / (std::sqrt(vv) / std::sqrt(0.0199) + 1e-8);
        ASSERT_NEAR(m2[i], mm, 1e-5);
        ASSERT_NEAR(v2[i], vv, 1e-5);
        ASSERT_NEAR(p2[i], pp, 1e-4 * (1 + std::fabs(pp)));
      }
    }
  }
}

// Bit-exact against base/dtype.h on random bit patterns (NaNs, Infs, subnormals, ties).
TEST_P(KernelsTest, Bf16ConversionIsBitExact) {
  for (int64_t n : kSizes) {
    std::vector<float> x(n);
    Rng rng(16 + n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = static_cast<uint32_t>(rng.next_u64());
      if (i % 5 == 1) bits = (bits & 0xffff0000u) | 0x8000u;  // exact tie
      if (i % 7 == 2) bits |= 0x7f800000u;                     // Inf or NaN
      if (i % 11 == 3) bits &= 0x807fffffu;                    // zero or subnormal
      std::memcpy(&x[i], &bits, 4);
    }
    std::vector<uint16_t> h(n + 1, 0xABCD);
    k().to_bf16(x.data(), h.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(h[i], float_to_bf16(x[i])) << "n=" << n << " i=" << i;
    ASSERT_EQ(h[n], 0xABCD) << "wrote past the end";
    std::vector<float> back(n + 1, 12345.0f);
    k().from_bf16(h.data(), back.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      float want = bf16_to_float(h[i]);
      ASSERT_EQ(std::memcmp(&back[i], &want, 4), 0) << "n=" << n << " i=" << i;
    }
    ASSERT_EQ(back[n], 12345.0f);
  }
}

TEST_P(KernelsTest, InPlaceAliasingWorks) {
  auto a = random_vec(37, 15);
  auto ref = a;
  k().relu(a.data(), a.data(), 37);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(a[i], std::max(0.0f, ref[i]));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelsTest, ::testing::ValuesIn(supported_isas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

TEST(CpuFeatures, BestIsaIsSupported) {
  EXPECT_TRUE(isa_supported(best_isa()));
  EXPECT_EQ(kernels().isa, best_isa());
  EXPECT_TRUE(isa_supported(Isa::kGeneric));
}

}  // namespace
}  // namespace dtrain

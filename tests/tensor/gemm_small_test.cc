// The small-batch products (tensor/gemm_small.h) against a double-precision reference,
// through gemm() as every caller reaches them and through each instruction set's own entry
// that this CPU runs (AVX-512 and AVX2): every row count of the small side across the 16- and
// 8-float vectors and the 6-row tiles, large sides off the tile and panel widths, padded
// leading dimensions, beta 0 over NaN and beta 1 accumulating; and the shapes they decline
// are left to OpenBLAS untouched.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/blas.h"
#include "tensor/cpu_features.h"
#include "tensor/gemm_small.h"
#include "tensor/gemm_small_isa.h"

namespace dtrain {
namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k;
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

// A product with gemm_small's signature: returns false when it declines the shape.
using Product = bool (*)(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float,
                         float*, int64_t);

// Each set's products with their sizes limited (OpenBLAS as wide) or not (OpenBLAS narrower).
template <bool (*F)(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float, float*,
                    int64_t, bool),
          bool AnyRows>
bool isa_product(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float beta, float* c, int64_t ldc) {
  return F(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, AnyRows);
}

bool through_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  return true;
}

// Runs the product on padded operands and compares with the reference, element by element,
// relative to the sum of |terms| of that element.
void check(const Case& t, float beta, Product product = through_gemm) {
  const int64_t pad = 3;
  const int64_t ar = t.ta ? t.k : t.m, ac = t.ta ? t.m : t.k;  // A as stored
  const int64_t br = t.tb ? t.n : t.k, bc = t.tb ? t.k : t.n;  // B as stored
  const int64_t lda = ac + pad, ldb = bc + pad, ldc = t.n + pad;
  std::vector<float> a = random_floats(static_cast<size_t>(ar * lda), 1), b = random_floats(static_cast<size_t>(br * ldb), 2);
  std::vector<float> c = random_floats(static_cast<size_t>(t.m * ldc), 3);
  if (beta == 0.0f)
    for (float& x : c) x = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> c0 = c;
  ASSERT_TRUE(product(t.ta, t.tb, t.m, t.n, t.k, a.data(), lda, b.data(), ldb, beta, c.data(), ldc))
      << "declined m " << t.m << " n " << t.n << " k " << t.k;
  auto A = [&](int64_t i, int64_t p) { return t.ta ? a[p * lda + i] : a[i * lda + p]; };
  auto B = [&](int64_t p, int64_t j) { return t.tb ? b[j * ldb + p] : b[p * ldb + j]; };
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[i * ldc + j];
      if (j >= t.n) {  // past the row: untouched
        ASSERT_TRUE(std::isnan(got) ? std::isnan(c0[i * ldc + j]) : got == c0[i * ldc + j]) << "padding at " << i << "," << j;
        continue;
      }
      double want = beta == 1.0f ? c0[i * ldc + j] : 0.0, scale = std::fabs(want);
      for (int64_t p = 0; p < t.k; ++p) {
        want += static_cast<double>(A(i, p)) * B(p, j);
        scale += std::fabs(static_cast<double>(A(i, p)) * B(p, j));
      }
      ASSERT_LE(std::fabs(got - want), 1e-5 * (scale + 1.0))
          << "ta " << t.ta << " tb " << t.tb << " m " << t.m << " n " << t.n << " k " << t.k << " beta " << beta
          << " at " << i << "," << j << ": " << got << " vs " << want;
    }
}

void check_forward_shapes(Product product, bool any_rows = false) {
  for (int64_t m : {1, 5, 6, 8, 9, 16, 17, 24, 33, 48, 64})
    for (int64_t n : {256, 263, 300})
      for (float beta : {0.0f, 1.0f}) check({false, true, m, n, 300}, beta, product);
  check({false, true, 64, 1024, 784}, 0.0f, product);
  // Past 64 rows, in blocks of 64 (AVX-512 takes up to 128, AVX2 up to 256).
  for (int64_t m : {65, 100, 128})
    for (float beta : {0.0f, 1.0f}) check({false, true, m, 263, 300}, beta, product);
  if (!any_rows) return;
  for (int64_t m : {129, 300})
    for (float beta : {0.0f, 1.0f}) check({false, true, m, 263, 300}, beta, product);
  // Narrow layers (from 32 outputs and inputs), only against a narrower OpenBLAS.
  for (int64_t n : {32, 40, 64, 100, 128})
    for (int64_t k : {32, 100, 255})
      for (float beta : {0.0f, 1.0f}) check({false, true, 70, n, k}, beta, product);
}

void check_weight_gradient_shapes(Product product, int64_t most_rows, bool any_rows = false) {
  for (int64_t k : {1, 7, 32, 64, 65, 130, 256, 300}) {
    if (k > most_rows) break;
    for (int64_t m : {256, 259})
      for (int64_t n : {256, 300, 321})
        for (float beta : {0.0f, 1.0f}) check({true, false, m, n, k}, beta, product);
  }
  if (!any_rows) return;
  for (int64_t m : {32, 64, 100})
    for (int64_t n : {32, 50, 128})
      for (float beta : {0.0f, 1.0f}) check({true, false, m, n, 70}, beta, product);
}

// The input gradient C = A B, taken only where OpenBLAS runs narrower vectors: rows in and
// past whole tiles, columns in whole panels and past them (the packed last panel).
void check_input_gradient_shapes(Product product) {
  for (int64_t m : {1, 5, 6, 7, 64, 129})
    for (int64_t n : {256, 300})
      for (float beta : {0.0f, 1.0f}) check({false, false, m, n, 263}, beta, product);
  check({false, false, 128, 1024, 1024}, 0.0f, product);
  for (int64_t n : {32, 64, 100})
    for (int64_t k : {32, 128})
      for (float beta : {0.0f, 1.0f}) check({false, false, 70, n, k}, beta, product);
}

TEST(GemmSmall, ForwardShapesMatchTheReference) { check_forward_shapes(through_gemm); }
TEST(GemmSmall, WeightGradientShapesMatchTheReference) { check_weight_gradient_shapes(through_gemm, 256); }

// Each instruction set's products directly, so an AVX-512 machine checks the AVX2 tiles too.
TEST(GemmSmall, EachInstructionSetMatchesTheReference) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512: gemm_small never runs here";
  check_forward_shapes(isa_product<gemm_small_avx2, false>);
  check_weight_gradient_shapes(isa_product<gemm_small_avx2, false>, 256);
  check_forward_shapes(isa_product<gemm_small_avx2, true>, true);
  check_weight_gradient_shapes(isa_product<gemm_small_avx2, true>, 300, true);
  check_input_gradient_shapes(isa_product<gemm_small_avx2, true>);
  if (!isa_supported(Isa::kAvx512)) return;  // the AVX2 set above is all this CPU runs
  check_forward_shapes(isa_product<gemm_small_avx512, false>);
  check_weight_gradient_shapes(isa_product<gemm_small_avx512, false>, 64);
  check_forward_shapes(isa_product<gemm_small_avx512, true>, true);
  check_weight_gradient_shapes(isa_product<gemm_small_avx512, true>, 300, true);
  check_input_gradient_shapes(isa_product<gemm_small_avx512, true>);
}

// Each set declines a small side past its limit unless told OpenBLAS is narrower, and
// gemm_small tells it so exactly where blas_vector_bits() is narrower than the set it runs.
TEST(GemmSmall, TheLimitOfTheSmallSideHoldsOnlyAgainstAnEquallyWideBlas) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512: gemm_small never runs here";
  const int64_t m = 257, n = 256, k = 256;
  std::vector<float> a = random_floats(m * k, 6), b = random_floats(m * n, 7), c(m * n);
  EXPECT_FALSE(gemm_small_avx2(false, true, m, n, k, a.data(), k, b.data(), k, 0.0f, c.data(), n, false));
  EXPECT_TRUE(gemm_small_avx2(false, true, m, n, k, a.data(), k, b.data(), k, 0.0f, c.data(), n, true));
  EXPECT_FALSE(gemm_small_avx2(true, false, n, n, m, a.data(), n, b.data(), n, 0.0f, c.data(), n, false));
  EXPECT_TRUE(gemm_small_avx2(true, false, n, n, m, a.data(), n, b.data(), n, 0.0f, c.data(), n, true));
  // The input gradient: never against an equally wide OpenBLAS; its scratch is the packed
  // last panel, none where the columns fill whole panels.
  EXPECT_FALSE(gemm_small_avx2(false, false, 64, n, k, a.data(), k, b.data(), n, 0.0f, c.data(), n, false));
  EXPECT_TRUE(gemm_small_avx2(false, false, 64, n, k, a.data(), k, b.data(), n, 0.0f, c.data(), n, true));
  EXPECT_EQ(gemm_small_scratch_bytes_avx2(false, false, 64, n, k, true), 0u);
  EXPECT_EQ(gemm_small_scratch_bytes_avx2(false, false, 64, 300, k, true), size_t(k * 16) * sizeof(float));
  EXPECT_EQ(gemm_small_scratch_bytes_avx2(false, true, m, n, k, false), 0u);
  EXPECT_GT(gemm_small_scratch_bytes_avx2(false, true, m, n, k, true), 0u);
  if (isa_supported(Isa::kAvx512)) {
    EXPECT_FALSE(gemm_small_avx512(false, true, 129, n, k, a.data(), k, b.data(), k, 0.0f, c.data(), n, false));
    EXPECT_TRUE(gemm_small_avx512(false, true, 129, n, k, a.data(), k, b.data(), k, 0.0f, c.data(), n, true));
  }
  if (best_isa() == Isa::kGeneric) return;
  const bool narrower = blas_vector_bits() < (best_isa() == Isa::kAvx512 ? 512 : 256);
  EXPECT_EQ(gemm_small(false, true, m, n, k, a.data(), k, b.data(), k, 0.0f, c.data(), n), narrower)
      << "OpenBLAS runs " << blas_core() << " (" << blas_vector_bits() << "-bit) kernels";
  EXPECT_EQ(gemm_small_every_size(), narrower);
}

TEST(GemmSmall, TakesOnlyItsShapesAndIsRepeatable) {
  if (best_isa() == Isa::kGeneric) GTEST_SKIP() << "no AVX2 here (or DTRAIN_ISA=generic): gemm() never calls gemm_small";
  const int64_t m = 40, n = 300, k = 280;
  std::vector<float> a = random_floats(m * k, 4), b = random_floats(n * k, 5), c1(m * n), c2(m * n, 7.0f);
  EXPECT_TRUE(gemm_small(false, true, m, n, k, a.data(), k, b.data(), k, 0.0f, c1.data(), n));
  EXPECT_TRUE(gemm_small(false, true, m, n, k, a.data(), k, b.data(), k, 0.0f, c2.data(), n));
  EXPECT_EQ(c1, c2) << "the same inputs give the same bits";
  const std::vector<float> before = c2;
  // Declined, C untouched: a beta other than 0 and 1, either large side too small (below 256,
  // or below 32 where OpenBLAS runs narrower kernels), and the form it does not implement (the
  // small side too large and the input gradient: the test above).
  EXPECT_FALSE(gemm_small(false, true, m, n, k, a.data(), k, b.data(), k, 0.5f, c2.data(), n));
  const int64_t narrow = gemm_small_every_size() ? 31 : 255;
  EXPECT_FALSE(gemm_small(false, true, m, narrow, k, a.data(), k, b.data(), k, 0.0f, c2.data(), narrow));
  EXPECT_FALSE(gemm_small(true, true, m, n, k, a.data(), m, b.data(), k, 0.0f, c2.data(), n));
  EXPECT_EQ(c2, before);
}

// The packing scratch grows to exactly what a call needs, never to a doubled capacity: a
// rank whose rows move an item at a time (ddp's measured batch cut) keeps the scratch of its
// largest call, which the planner prices.
TEST(GemmSmall, ScratchGrowsToExactlyWhatACallNeeds) {
  std::vector<float> v;
  SmallGemmScratch::grown(v, 100);
  EXPECT_EQ(v.capacity(), 100u);
  SmallGemmScratch::grown(v, 101);
  EXPECT_EQ(v.capacity(), 101u);
  const float* at = SmallGemmScratch::grown(v, 50);  // smaller: kept as it is
  EXPECT_EQ(at, v.data());
  EXPECT_EQ(v.capacity(), 101u);
}

}  // namespace
}  // namespace dtrain

// Tensor views and tensor-level ops against naive references, including odd sizes that hit
// SIMD tails, transposed views fed to gemm, pool-split determinism and half conversions.
#include <gtest/gtest.h>

#include <cmath>

#include "base/dtype.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "tensor/blas.h"
#include "tensor/convert.h"
#include "tensor/denormals.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace dtrain {
namespace {

Tensor rand_tensor(const Shape& s, uint64_t seed, float lo = -2.0f, float hi = 2.0f) {
  Tensor t = Tensor::empty(s);
  Rng(seed).fill_uniform(t.span(), lo, hi);
  return t;
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor tr = t.transpose(0, 1);
  EXPECT_EQ(tr.shape(), (Shape{3, 2}));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.at({2, 1}), 5.0f);
  Tensor s = t.slice(1, 1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  s.at({1, 0}) = 40.0f;
  EXPECT_EQ(t.at({1, 1}), 40.0f);
  EXPECT_TRUE(s.shares_storage(t));
  EXPECT_EQ(tr.contiguous().to_vector(), (std::vector<float>{0, 3, 1, 40, 2, 5}));
  EXPECT_EQ(t[1].to_vector(), (std::vector<float>{3, 40, 5}));
  Tensor c = t.clone();
  c.at({0, 0}) = 9;
  EXPECT_EQ(t.at({0, 0}), 0.0f);
  EXPECT_EQ(t.reshape({3, -1}).shape(), (Shape{3, 2}));
}

TEST(Tensor, ErrorsNameShapes) {
  Tensor t = Tensor::zeros({2, 3});
  try {
    t.reshape({4, 2});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[4, 2]"), std::string::npos);
  }
  EXPECT_THROW(t.transpose(0, 1).reshape({6}), InvalidArgument);
  EXPECT_THROW(t.at({2, 0}), InvalidArgument);
  EXPECT_THROW(Tensor::from({2, 2}, {1, 2, 3}), InvalidArgument);
  EXPECT_THROW(add(t, Tensor::zeros({3, 2})), InvalidArgument);
  EXPECT_THROW(t.slice(1, 2, 4), InvalidArgument);
}

TEST(Tensor, WrapBorrowsMemory) {
  std::vector<float> buf = {1, 2, 3, 4};
  Tensor t = Tensor::wrap(buf.data(), {2, 2});
  t.at({1, 1}) = 7;
  EXPECT_EQ(buf[3], 7.0f);
  EXPECT_TRUE(Tensor::wrap(nullptr, {0}).defined());
}

// Naive product with explicit transposes, in double.
std::vector<double> naive_mm(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[i * n + j] += double(ta ? a.at({p, i}) : a.at({i, p})) * (tb ? b.at({j, p}) : b.at({p, j}));
  return c;
}

TEST(Matmul, AllTransposesAndOddSizes) {
  for (auto [m, k, n] : {std::tuple{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 1, 65}, {2, 0, 3}}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = rand_tensor(ta ? Shape{k, m} : Shape{m, k}, 1), b = rand_tensor(tb ? Shape{n, k} : Shape{k, n}, 2);
        Tensor c = matmul(a, b, ta, tb);
        std::vector<double> want = naive_mm(a, b, ta, tb);
        ASSERT_EQ(c.shape(), (Shape{m, n}));
        for (int64_t i = 0; i < c.numel(); ++i)
          ASSERT_NEAR(c.data()[i], want[i], 1e-4 * (1 + k)) << m << "x" << k << "x" << n << " ta=" << ta << " tb=" << tb;
      }
  }
}

TEST(Matmul, TransposedAndSlicedViewsNeedNoCopy) {
  Tensor a = rand_tensor({6, 4}, 3), b = rand_tensor({5, 6}, 4);
  // a^T (a view) times b^T (a view): same as the flags.
  Tensor c1 = matmul(a.transpose(0, 1), b.transpose(0, 1));
  Tensor c2 = matmul(a, b, true, true);
  EXPECT_LT(max_abs_diff(c1, c2), 1e-5f);
  // A column slice keeps the parent's row stride (lda > cols).
  Tensor big = rand_tensor({4, 10}, 5), w = rand_tensor({3, 5}, 6);
  Tensor c3 = matmul(big.slice(1, 2, 7), w, false, true);
  Tensor c4 = matmul(big.slice(1, 2, 7).contiguous(), w, false, true);
  EXPECT_EQ(max_abs_diff(c3, c4), 0.0f);
  // Accumulating into an output with beta = 1.
  Tensor out = Tensor::full({4, 3}, 1.0f);
  matmul_into(big.slice(1, 2, 7), w, out, false, true, 2.0f, 1.0f);
  Tensor want = add(scale(c4, 2.0f), Tensor::full({4, 3}, 1.0f));
  EXPECT_LT(max_abs_diff(out, want), 1e-5f);
  EXPECT_THROW(matmul(a, b), InvalidArgument);  // [6,4] x [5,6]
}

TEST(RowOps, SoftmaxLogSoftmaxBiasAndColumnSums) {
  ThreadPool pool(2);
  for (int64_t c : {1, 7, 16, 33, 1000}) {
    Tensor x = rand_tensor({5, c}, 7, -5.0f, 5.0f);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      Tensor s = softmax(x, p), ls = log_softmax(x, p);
      for (int64_t r = 0; r < 5; ++r) {
        double total = 0, m = -1e30, z = 0;
        for (int64_t j = 0; j < c; ++j) m = std::max(m, double(x.at({r, j})));
        for (int64_t j = 0; j < c; ++j) z += std::exp(x.at({r, j}) - m);
        for (int64_t j = 0; j < c; ++j) {
          total += s.at({r, j});
          ASSERT_NEAR(ls.at({r, j}), x.at({r, j}) - m - std::log(z), 1e-5);
        }
        ASSERT_NEAR(total, 1.0, 1e-5);
      }
    }
    Tensor bias = rand_tensor({c}, 8);
    Tensor y = x.clone();
    bias_add_relu_(y, bias, &pool);
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t j = 0; j < c; ++j) ASSERT_EQ(y.at({r, j}), std::max(0.0f, x.at({r, j}) + bias.at({j})));
    std::vector<float> colsum(c, 1.0f);
    sum_rows_into(x, colsum.data(), /*accumulate=*/true, &pool);
    for (int64_t j = 0; j < c; ++j) {
      double want = 1.0;
      for (int64_t r = 0; r < 5; ++r) want += x.at({r, j});
      ASSERT_NEAR(colsum[j], want, 1e-5);
    }
  }
  EXPECT_EQ(argmax_rows(Tensor::from({2, 3}, {1, 5, 5, -1, -2, -0.5f})), (std::vector<int32_t>{1, 2}));
}

TEST(Reductions, PoolSplitIsDeterministicAndAccurate) {
  ThreadPool pool(2);
  Tensor x = rand_tensor({200003}, 9);
  double want = 0, want_sq = 0;
  for (float v : x.span()) {
    want += v;
    want_sq += double(v) * v;
  }
  float a = sum(x, &pool), b = sum(x, &pool);
  EXPECT_EQ(a, b);
  EXPECT_NEAR(a, want, 1e-2);
  EXPECT_NEAR(sumsq(x.span(), &pool), want_sq, 1e-6 * want_sq);
  EXPECT_NEAR(mean(x), want / 200003, 1e-6);
  EXPECT_EQ(max(Tensor::from({3}, {-1, 4, 2})), 4.0f);
}

TEST(ElementWise, OddSizesMatchReference) {
  ThreadPool pool(2);
  for (int64_t n : {1, 15, 17, 100001}) {
    Tensor a = rand_tensor({n}, 10), b = rand_tensor({n}, 11);
    Tensor s = add(a, b, &pool), m = mul(a, b, &pool), r = relu(a, &pool), sg = sigmoid(a, &pool);
    for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 97)) {
      ASSERT_EQ(s.data()[i], a.data()[i] + b.data()[i]);
      ASSERT_EQ(m.data()[i], a.data()[i] * b.data()[i]);
      ASSERT_EQ(r.data()[i], std::max(0.0f, a.data()[i]));
      ASSERT_NEAR(sg.data()[i], 1.0 / (1.0 + std::exp(-double(a.data()[i]))), 1e-6);
    }
  }
  // Non-contiguous input goes through a copy.
  Tensor t = rand_tensor({3, 4}, 12);
  EXPECT_EQ(relu(t.transpose(0, 1)).to_vector(), relu(t.transpose(0, 1).contiguous()).to_vector());
}

TEST(Convert, HalfRoundTrips) {
  std::vector<float> x = {0.0f, 1.0f, -2.5f, 3.14159f, 65504.0f, 1e-3f, INFINITY};
  std::vector<uint16_t> h(x.size());
  std::vector<float> bf(x.size()), fp(x.size());
  to_bf16(x, h);
  from_bf16(h, bf);
  to_fp16(x, h);
  from_fp16(h, fp);
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    EXPECT_NEAR(bf[i], x[i], std::fabs(x[i]) / 128) << i;
    EXPECT_NEAR(fp[i], x[i], std::fabs(x[i]) / 1024 + 1e-6) << i;
  }
  EXPECT_EQ(bf.back(), INFINITY);
  EXPECT_EQ(fp.back(), INFINITY);
  std::vector<float> y = x;
  round_trip_bf16(y);
  EXPECT_EQ(y, bf);
  y = x;
  round_trip_fp16(y);
  EXPECT_EQ(y, fp);
  std::vector<uint16_t> small(2);
  EXPECT_THROW(to_bf16(x, small), InvalidArgument);
}

TEST(Rng, DeterministicAcrossInstances) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
  EXPECT_NE(Rng(42).next_u64(), c.next_u64());
  double mean = 0, var = 0;
  Rng n(1);
  for (int i = 0; i < 20000; ++i) {
    float v = n.normal();
    mean += v;
    var += double(v) * v;
  }
  EXPECT_NEAR(mean / 20000, 0.0, 0.03);
  EXPECT_NEAR(var / 20000, 1.0, 0.05);
  EXPECT_EQ(hash_uniform(5, 17), hash_uniform(5, 17));
}

TEST(Denormals, ScopedFlushToZero) {
  volatile float tiny = 1e-39f;  // subnormal
  ASSERT_FALSE(FlushDenormals::active());
  EXPECT_GT(tiny * 0.5f, 0.0f);
  {
    FlushDenormals ftz;
    EXPECT_TRUE(FlushDenormals::active());
    EXPECT_EQ(tiny * 0.5f, 0.0f);           // subnormal input treated as zero
    volatile float small = 1e-30f;
    EXPECT_EQ(small * 1e-10f, 0.0f);         // subnormal result flushed
  }
  EXPECT_FALSE(FlushDenormals::active());
  EXPECT_GT(tiny * 0.5f, 0.0f);
}

TEST(Blas, ThreadCountIsExplicit) {
  set_blas_threads(1);
  EXPECT_EQ(blas_threads(), 1);
  EXPECT_THROW(set_blas_threads(0), InvalidArgument);
  EXPECT_NE(std::string(blas_config()), "");
}

// OpenBLAS's pre-AVX fallbacks (what it picks where a VM hides the CPU model) are replaced by
// the family the CPU runs; its AVX-era choices, and any choice on a CPU without AVX2, stand.
TEST(Blas, BetterCoreOnlyReplacesPreAvxFallbacks) {
  EXPECT_STREQ(better_blas_core("Prescott", true, true), "SkylakeX");
  EXPECT_STREQ(better_blas_core("prescott", false, true), "Haswell");
  EXPECT_STREQ(better_blas_core("Nehalem", false, true), "Haswell");
  EXPECT_STREQ(better_blas_core("Core2", true, true), "SkylakeX");
  EXPECT_EQ(better_blas_core("Prescott", false, false), nullptr);  // an SSE3 CPU: Prescott is right
  EXPECT_EQ(better_blas_core("SkylakeX", true, true), nullptr);
  EXPECT_EQ(better_blas_core("Haswell", true, true), nullptr);      // a choice of its own, kept
  EXPECT_EQ(better_blas_core("Zen", true, true), nullptr);
  EXPECT_EQ(better_blas_core(nullptr, true, true), nullptr);
  EXPECT_NE(std::string(blas_core()), "");
}

}  // namespace
}  // namespace dtrain

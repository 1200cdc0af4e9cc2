// tensor/ops.cc — tensor-level ops: shape checks, contiguity, and splitting SIMD kernels
// (tensor/kernels.h) over a ThreadPool.
//
// Splitting rule: element-wise maps split the flat range in chunks of at least kGrain
// elements; row ops split whole rows so one row is never shared by two threads. A reduction
// computes one partial per chunk and adds the partials in chunk order (deterministic for a
// given pool size).
#include "tensor/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/thread_pool.h"
#include "tensor/blas.h"
#include "tensor/kernels.h"

namespace dtrain {

namespace {

constexpr int64_t kGrain = 1 << 15;

void split(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (pool == nullptr || pool->size() == 1 || n < 2 * grain) {
    fn(0, n);
    return;
  }
  pool->parallel_for(0, n, grain, fn);
}

// Rows per chunk so a chunk holds at least kGrain elements.
int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)); }

void check_same(const Tensor& a, const Tensor& b, const char* op) {
  DT_CHECK(a.shape() == b.shape(), InvalidArgument,
           op << ": shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()) << " differ");
}

using BinaryKernel = void (*)(const float*, const float*, float*, int64_t);
using UnaryKernel = void (*)(const float*, float*, int64_t);

Tensor binary(const Tensor& a_in, const Tensor& b_in, BinaryKernel k, const char* op, ThreadPool* pool) {
  check_same(a_in, b_in, op);
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor out = Tensor::empty(a.shape());
  const float *pa = a.data(), *pb = b.data();
  float* po = out.data();
  split(pool, a.numel(), kGrain, [&](int64_t lo, int64_t hi) { k(pa + lo, pb + lo, po + lo, hi - lo); });
  return out;
}

Tensor unary(const Tensor& x_in, UnaryKernel k, ThreadPool* pool) {
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape());
  const float* px = x.data();
  float* po = out.data();
  split(pool, x.numel(), kGrain, [&](int64_t lo, int64_t hi) { k(px + lo, po + lo, hi - lo); });
  return out;
}

// Ordered sum of per-chunk partials.
double chunked_sum(ThreadPool* pool, int64_t n, const std::function<double(int64_t, int64_t)>& part) {
  if (pool == nullptr || pool->size() == 1 || n < 2 * kGrain) return part(0, n);
  int chunks = pool->size();
  std::vector<double> partial(chunks, 0.0);
  pool->parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) partial[c] = part(n * c / chunks, n * (c + 1) / chunks);
  });
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

int64_t last_dim(const Tensor& x) { return x.ndim() == 0 ? 1 : x.shape().back(); }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, ThreadPool* pool) { return binary(a, b, kernels().add, "add", pool); }
Tensor sub(const Tensor& a, const Tensor& b, ThreadPool* pool) { return binary(a, b, kernels().sub, "sub", pool); }
Tensor mul(const Tensor& a, const Tensor& b, ThreadPool* pool) { return binary(a, b, kernels().mul, "mul", pool); }

Tensor scale(const Tensor& x_in, float alpha, ThreadPool* pool) {
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape());
  const float* px = x.data();
  float* po = out.data();
  split(pool, x.numel(), kGrain, [&](int64_t lo, int64_t hi) { kernels().scale(alpha, px + lo, po + lo, hi - lo); });
  return out;
}

void axpy_(float alpha, const Tensor& x_in, Tensor& y, ThreadPool* pool) {
  check_same(x_in, y, "axpy_");
  DT_CHECK(y.is_contiguous(), InvalidArgument, "axpy_: destination " << shape_str(y.shape()) << " is not contiguous");
  Tensor x = x_in.contiguous();
  const float* px = x.data();
  float* py = y.data();
  split(pool, x.numel(), kGrain, [&](int64_t lo, int64_t hi) { kernels().axpy(alpha, px + lo, py + lo, hi - lo); });
}

Tensor relu(const Tensor& x, ThreadPool* pool) { return unary(x, kernels().relu, pool); }
Tensor gelu(const Tensor& x, ThreadPool* pool) { return unary(x, kernels().gelu, pool); }
Tensor tanh(const Tensor& x, ThreadPool* pool) { return unary(x, kernels().tanh, pool); }
Tensor sigmoid(const Tensor& x, ThreadPool* pool) { return unary(x, kernels().sigmoid, pool); }
Tensor exp(const Tensor& x, ThreadPool* pool) { return unary(x, kernels().exp, pool); }

namespace {
void check_bias(const Tensor& x, const Tensor& bias, const char* op) {
  DT_CHECK(bias.ndim() == 1 && x.ndim() >= 1 && bias.dim(0) == x.dim(-1), InvalidArgument,
           op << ": bias " << shape_str(bias.shape()) << " does not match the last dimension of "
              << shape_str(x.shape()));
}
void bias_rows(Tensor& x, const Tensor& bias_in, BinaryKernel k, ThreadPool* pool) {
  Tensor bias = bias_in.contiguous();
  int64_t c = last_dim(x), rows = x.numel() / std::max<int64_t>(c, 1);
  float* px = x.data();
  const float* pb = bias.data();
  split(pool, rows, row_grain(c), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) k(px + r * c, pb, px + r * c, c);
  });
}
}  // namespace

Tensor bias_add(const Tensor& x, const Tensor& bias, ThreadPool* pool) {
  check_bias(x, bias, "bias_add");
  Tensor out = x.clone();
  bias_rows(out, bias, kernels().add, pool);
  return out;
}

void bias_add_(Tensor& x, const Tensor& bias, ThreadPool* pool) {
  check_bias(x, bias, "bias_add_");
  DT_CHECK(x.is_contiguous(), InvalidArgument, "bias_add_: " << shape_str(x.shape()) << " is not contiguous");
  bias_rows(x, bias, kernels().add, pool);
}

void bias_add_relu_(Tensor& x, const Tensor& bias, ThreadPool* pool) {
  check_bias(x, bias, "bias_add_relu_");
  DT_CHECK(x.is_contiguous(), InvalidArgument, "bias_add_relu_: " << shape_str(x.shape()) << " is not contiguous");
  bias_rows(x, bias, kernels().add_relu, pool);
}

// Softmax of a row: m = max(x); e = exp(x - m); s = sum(e); out = e / s. Log-softmax is
// x - m - log(s), which never takes the log of an underflowed probability.
Tensor softmax(const Tensor& x_in, ThreadPool* pool) {
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape());
  int64_t c = last_dim(x), rows = c == 0 ? 0 : x.numel() / c;
  const Kernels& k = kernels();
  split(pool, rows, row_grain(c), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x.data() + r * c;
      float* orow = out.data() + r * c;
      float s = k.exp_shift_sum(xr, k.max(xr, c), orow, c);
      k.scale(1.0f / s, orow, orow, c);
    }
  });
  return out;
}

Tensor log_softmax(const Tensor& x_in, ThreadPool* pool) {
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape());
  int64_t c = last_dim(x), rows = c == 0 ? 0 : x.numel() / c;
  const Kernels& k = kernels();
  split(pool, rows, row_grain(c), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x.data() + r * c;
      float* orow = out.data() + r * c;
      float m = k.max(xr, c);
      float s = k.exp_shift_sum(xr, m, orow, c);
      float shift = m + std::log(s);
      for (int64_t j = 0; j < c; ++j) orow[j] = xr[j] - shift;
    }
  });
  return out;
}

std::vector<int32_t> argmax_rows(const Tensor& x_in) {
  Tensor x = x_in.contiguous();
  int64_t c = last_dim(x), rows = c == 0 ? 0 : x.numel() / c;
  std::vector<int32_t> out(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * c;
    out[r] = static_cast<int32_t>(std::max_element(xr, xr + c) - xr);
  }
  return out;
}

// Column sums, cache-friendly: each thread owns a band of columns and walks all rows of its
// band, adding row segments with the vector add kernel. The band split keeps each output
// element written by exactly one thread, in row order (deterministic).
void sum_rows_into(const Tensor& x_in, float* out, bool accumulate, ThreadPool* pool) {
  Tensor x = x_in.contiguous();
  int64_t c = last_dim(x), rows = c == 0 ? 0 : x.numel() / c;
  const Kernels& k = kernels();
  int64_t band_grain = std::max<int64_t>(64, kGrain / std::max<int64_t>(rows, 1));
  split(pool, c, band_grain, [&](int64_t lo, int64_t hi) {
    int64_t w = hi - lo;
    if (!accumulate) k.fill(0.0f, out + lo, w);
    for (int64_t r = 0; r < rows; ++r) k.add(out + lo, x.data() + r * c + lo, out + lo, w);
  });
  if (c > 0 && rows == 0 && !accumulate) std::fill_n(out, c, 0.0f);
}

float sum(const Tensor& x_in, ThreadPool* pool) {
  Tensor x = x_in.contiguous();
  const float* p = x.data();
  return static_cast<float>(chunked_sum(pool, x.numel(), [&](int64_t lo, int64_t hi) {
    return static_cast<double>(kernels().sum(p + lo, hi - lo));
  }));
}

float mean(const Tensor& x, ThreadPool* pool) {
  DT_CHECK(x.numel() > 0, InvalidArgument, "mean of an empty tensor " << shape_str(x.shape()));
  return sum(x, pool) / static_cast<float>(x.numel());
}

float sumsq(const Tensor& x_in, ThreadPool* pool) {
  Tensor x = x_in.contiguous();
  return static_cast<float>(sumsq(x.span(), pool));
}

float max(const Tensor& x_in) {
  Tensor x = x_in.contiguous();
  return kernels().max(x.data(), x.numel());
}

double sumsq(std::span<const float> x, ThreadPool* pool) {
  const float* p = x.data();
  return chunked_sum(pool, static_cast<int64_t>(x.size()), [&](int64_t lo, int64_t hi) {
    return static_cast<double>(kernels().sumsq(p + lo, hi - lo));
  });
}

void scale_(std::span<float> x, float alpha, ThreadPool* pool) {
  float* p = x.data();
  split(pool, static_cast<int64_t>(x.size()), kGrain,
        [&](int64_t lo, int64_t hi) { kernels().scale(alpha, p + lo, p + lo, hi - lo); });
}

namespace {
// A 2-D view usable by BLAS directly: unit column stride and row stride >= columns.
// Returns the row stride, or makes `t` contiguous first.
int64_t blas_ld(Tensor& t) {
  if (t.strides()[1] == 1 && t.strides()[0] >= std::max<int64_t>(t.dim(1), 1)) return t.strides()[0];
  if (t.strides()[0] == 1 && t.strides()[1] >= std::max<int64_t>(t.dim(0), 1)) return -t.strides()[1];  // transposed view
  t = t.contiguous();
  return std::max<int64_t>(t.dim(1), 1);
}
}  // namespace

void matmul_into(const Tensor& a_in, const Tensor& b_in, Tensor& out, bool trans_a, bool trans_b,
                 float alpha, float beta) {
  DT_CHECK(a_in.ndim() == 2 && b_in.ndim() == 2, InvalidArgument,
           "matmul needs 2-D operands, got " << shape_str(a_in.shape()) << " and " << shape_str(b_in.shape()));
  Tensor a = a_in, b = b_in;
  int64_t m = trans_a ? a.dim(1) : a.dim(0), ka = trans_a ? a.dim(0) : a.dim(1);
  int64_t kb = trans_b ? b.dim(1) : b.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  DT_CHECK(ka == kb, InvalidArgument,
           "matmul: " << shape_str(a.shape()) << (trans_a ? "^T" : "") << " x " << shape_str(b.shape())
                      << (trans_b ? "^T" : "") << ": inner dimensions " << ka << " and " << kb << " differ");
  DT_CHECK(out.ndim() == 2 && out.dim(0) == m && out.dim(1) == n && out.is_contiguous(), InvalidArgument,
           "matmul: output " << shape_str(out.shape()) << " should be contiguous [" << m << ", " << n << "]");
  // A view stored transposed (column stride 1 in dim 0) is the transpose of a row-major
  // matrix: flip the flag instead of copying.
  int64_t lda = blas_ld(a), ldb = blas_ld(b);
  if (lda < 0) {
    trans_a = !trans_a;
    lda = -lda;
  }
  if (ldb < 0) {
    trans_b = !trans_b;
    ldb = -ldb;
  }
  gemm(trans_a, trans_b, m, n, ka, alpha, a.data(), lda, b.data(), ldb, beta, out.data(), std::max<int64_t>(n, 1));
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  DT_CHECK(a.ndim() == 2 && b.ndim() == 2, InvalidArgument,
           "matmul needs 2-D operands, got " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  int64_t m = trans_a ? a.dim(1) : a.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  Tensor out = Tensor::empty({m, n});
  matmul_into(a, b, out, trans_a, trans_b, 1.0f, 0.0f);
  return out;
}

}  // namespace dtrain

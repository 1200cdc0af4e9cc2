// tensor/gemm_small.cc — the AVX-512 products of tensor/gemm_small.h.
//
// One register tile does all the arithmetic: 6 rows of C by 16*NV columns (NV vectors of 16
// floats, 24 accumulators at NV = 4). Each step over k broadcasts one element of each of
// the 6 rows of A and multiplies it into the NV vectors of row k of B; A's element (i, k)
// lies at a[i*ars + k*acs], so the same tile reads A in place along its rows (acs = 1) or
// from a packed copy (6 elements per k). Run from L1 it reaches 185 of the core's 214
// GFLOP/s; what the products below arrange is that its operands come from cache in order.
//
// Forward, C = A B^T with A the small side (m <= 64 rows): computed transposed,
// C^T[n, m] = B[n, k] A^T[k, m]. The large B is the broadcast side, read in place row by
// row along the whole of k (6 sequential streams the prefetchers follow; each element read
// once); A^T is packed once into k rows of 16*NV floats, zero-padded, which stay in L2. C^T
// lands in scratch and is transposed into C at the end (beta applied there).
//
// Weight gradient, C = A^T B with k <= 64 (the batch): both operands are small (k rows), so
// both are packed: A^T into tiles of 6 columns by k, B into panels of 64 columns by k. Tiles
// of 6 rows of C go in order and each sweeps all the panels, so C is written row after row.
//
// Compiled for AVX-512 by the pragma below (tensor/kernels_avx512.cc explains the pattern);
// called only where the CPU has it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/gemm_small.h"

namespace dtrain {
namespace {

// Per-thread packing scratch, grown on demand and kept (a training loop asks for the same
// sizes every step).
struct Scratch {
  std::vector<float> a;  // the forward's packed A^T, or the weight gradient's packed A
  std::vector<float> b;  // the weight gradient's packed B
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
constexpr int kRows = 6;      // rows of C per register tile
constexpr int kPanel = 64;    // columns of C per weight-gradient panel (4 vectors)
constexpr int64_t kMaxSmall = 64;
constexpr int64_t kForwardBlock = 96;   // rows of B per forward block (16 tiles)

bool takes_forward(int64_t m, int64_t n, int64_t k) { return m >= 1 && m <= kMaxSmall && n >= 256 && k >= 256; }
bool takes_weight_gradient(int64_t m, int64_t n, int64_t k) { return k >= 1 && k <= kMaxSmall && m >= 256 && n >= 256; }
float* grown(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")

namespace {

// Plain helpers, not std::min/std::fill: no shared inline code gets instantiated for AVX-512.
inline int64_t least(int64_t x, int64_t y) { return x < y ? x : y; }

// C[mr x 16*NV] (+)= sum over k of A(i, k) * B[k][0 .. 16*NV), rows of C ldc apart. Rows of A
// past mr repeat row mr-1 (read, never stored).
template <int NV>
void tile(int64_t K, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb, float* c, int64_t ldc,
          bool accumulate, int mr) {
  __m512 acc[kRows][NV];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[i][v] = accumulate && i < mr ? _mm512_loadu_ps(c + i * ldc + 16 * v) : _mm512_setzero_ps();
  const float* row[kRows];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) row[i] = a + (i < mr ? i : mr - 1) * ars;
  for (int64_t k = 0; k < K; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      const __m512 ai = _mm512_set1_ps(row[i][k * acs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
    b += ldb;
  }
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i)
    if (i < mr)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}

void tile_nv(int nv, int64_t K, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb, float* c,
             int64_t ldc, bool accumulate, int mr) {
  switch (nv) {
    case 1: return tile<1>(K, a, ars, acs, b, ldb, c, ldc, accumulate, mr);
    case 2: return tile<2>(K, a, ars, acs, b, ldb, c, ldc, accumulate, mr);
    case 3: return tile<3>(K, a, ars, acs, b, ldb, c, ldc, accumulate, mr);
    default: return tile<4>(K, a, ars, acs, b, ldb, c, ldc, accumulate, mr);
  }
}

// C[m,n] = A[m,k] B[n,k]^T (+ C when beta is 1), m <= 64.
void forward(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, bool beta1,
             float* c, int64_t ldc) {
  const int nv = static_cast<int>((m + 15) / 16);
  const int64_t mp = 16 * nv;
  float* at = grown(scratch().a, static_cast<size_t>(k * mp));
  for (int64_t kk = 0; kk < k; ++kk) {
    float* dst = at + kk * mp;
    for (int64_t i = 0; i < m; ++i) dst[i] = a[i * lda + kk];
    for (int64_t i = m; i < mp; ++i) dst[i] = 0.0f;
  }
  // kForwardBlock rows of B at a time: their C^T (at most 24 KiB) is still in L1 when it is
  // transposed into C, 16 columns of C at a time.
  alignas(64) float ct[kForwardBlock * kMaxSmall];
  for (int64_t j0 = 0; j0 < n; j0 += kForwardBlock) {
    const int64_t jn = least(kForwardBlock, n - j0);
    for (int64_t j = 0; j < jn; j += kRows)
      tile_nv(nv, k, b + (j0 + j) * ldb, ldb, 1, at, mp, ct + j * mp, mp, false, static_cast<int>(least(kRows, jn - j)));
    for (int64_t q = 0; q < jn; q += 16) {
      const int64_t q1 = least(jn, q + 16);
      for (int64_t i = 0; i < m; ++i) {
        float* out = c + i * ldc + j0;
        if (beta1)
          for (int64_t j = q; j < q1; ++j) out[j] += ct[j * mp + i];
        else
          for (int64_t j = q; j < q1; ++j) out[j] = ct[j * mp + i];
      }
    }
  }
}

// C[m,n] = A[k,m]^T B[k,n] (+ C when beta is 1), k <= 64. Both operands are packed whole
// (each the size of a small operand, k rows). Bounding the scratch instead, B packed 256
// columns at a time and A 48 columns at a time (once per block), lost a third: both MLP
// layers at 64 rows 1.79-1.82 -> 2.41-2.43 ms (C then written in 1 KiB pieces of its rows,
// four passes over it).
void weight_gradient(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                     bool beta1, float* c, int64_t ldc) {
  const int64_t tiles = (m + kRows - 1) / kRows, panels = (n + kPanel - 1) / kPanel;
  Scratch& s = scratch();
  float* ap = grown(s.a, static_cast<size_t>(tiles * k * kRows));
  float* bp = grown(s.b, static_cast<size_t>(panels * k * kPanel));
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t kk = 0; kk < k; ++kk) {
      float* dst = ap + (t * k + kk) * kRows;
      for (int i = 0; i < kRows; ++i) dst[i] = t * kRows + i < m ? a[kk * lda + t * kRows + i] : 0.0f;
    }
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t w = least(kPanel, n - p * kPanel);
    for (int64_t kk = 0; kk < k; ++kk) {
      float* dst = bp + (p * k + kk) * kPanel;
      std::memcpy(dst, b + kk * ldb + p * kPanel, static_cast<size_t>(w) * sizeof(float));
      for (int64_t j = w; j < kPanel; ++j) dst[j] = 0.0f;
    }
  }
  alignas(64) float edge[kRows * kPanel];
  for (int64_t t = 0; t < tiles; ++t) {
    const int mr = static_cast<int>(least(kRows, m - t * kRows));
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t w = least(kPanel, n - p * kPanel);
      float* out = c + t * kRows * ldc + p * kPanel;
      const float* at = ap + t * k * kRows;
      const float* bt = bp + p * k * kPanel;
      if (w == kPanel) {
        tile<4>(k, at, 1, kRows, bt, kPanel, out, ldc, beta1, mr);
        continue;
      }
      // The last, narrower panel goes through a full-width buffer.
      if (beta1)
        for (int i = 0; i < mr; ++i) std::memcpy(edge + i * kPanel, out + i * ldc, static_cast<size_t>(w) * sizeof(float));
      tile<4>(k, at, 1, kRows, bt, kPanel, edge, kPanel, beta1, mr);
      for (int i = 0; i < mr; ++i) std::memcpy(out + i * ldc, edge + i * kPanel, static_cast<size_t>(w) * sizeof(float));
    }
  }
}

}  // namespace

#pragma GCC diagnostic pop
#pragma GCC pop_options

size_t gemm_small_scratch_bytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  if (!trans_a && trans_b && takes_forward(m, n, k)) return static_cast<size_t>(k * 16 * ((m + 15) / 16)) * sizeof(float);
  if (trans_a && !trans_b && takes_weight_gradient(m, n, k)) {
    const int64_t tiles = (m + kRows - 1) / kRows, panels = (n + kPanel - 1) / kPanel;
    return static_cast<size_t>(k * (tiles * kRows + panels * kPanel)) * sizeof(float);
  }
  return 0;
}

bool gemm_small(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (beta != 0.0f && beta != 1.0f) return false;
  if (!trans_a && trans_b && takes_forward(m, n, k)) {
    forward(m, n, k, a, lda, b, ldb, beta == 1.0f, c, ldc);
    return true;
  }
  if (trans_a && !trans_b && takes_weight_gradient(m, n, k)) {
    weight_gradient(m, n, k, a, lda, b, ldb, beta == 1.0f, c, ldc);
    return true;
  }
  return false;
}

}  // namespace dtrain

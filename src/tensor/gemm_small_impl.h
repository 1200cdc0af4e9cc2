// tensor/gemm_small_impl.h — the products of tensor/gemm_small.h, written once over a vector
// type S and compiled once per instruction set.
//
// Included ONLY by gemm_small_avx512.cc and gemm_small_avx2.cc, each after its
// `#pragma GCC target(...)` line (and after tensor/gemm_small_isa.h, whose scratch is
// compiled for the base ISA). Everything here has internal linkage, as in kernels_impl.h, so
// the two instantiations can never be merged.
//
// S provides: V (a register of W floats), W, kMaxNv (vectors per register tile: the tile's
// 6 x kMaxNv accumulators plus kMaxNv loads and one broadcast fit the register file — 4 of
// 32 on AVX-512, 2 of 16 on AVX2), kForwardRows and kGradientRows (the largest small side
// each product takes: where it stops beating OpenBLAS, measured per set), zero(), set1(x),
// load(p), store(p, v), fmadd(a, b, c).
//
// One register tile does all the arithmetic: 6 rows of C by W*NV columns. Each step over k
// broadcasts one element of each of the 6 rows of A and multiplies it into the NV vectors of
// row k of B; A's element (i, k) lies at a[i*ars + k*acs], so the same tile reads A in place
// along its rows (acs = 1) or from a packed copy (6 elements per k). What the products below
// arrange is that its operands come from cache in order.
//
// Forward, C = A B^T with A the small side (m <= 64 rows): computed transposed,
// C^T[n, m] = B[n, k] A^T[k, m]. The large B is the broadcast side, read in place 6 rows at
// a time along the whole of k (6 sequential streams the prefetchers follow; each element
// comes from memory once); A^T is packed once into k rows of W*ceil(m/W) floats,
// zero-padded, which stay in L2. When A^T is wider than one tile (more than 16 rows of A on
// AVX2) the tiles of one strip of B go across it in turn, the strip (6 x k floats, 24 KiB
// at k = 1024) still in L1 for the second. C^T lands in scratch and is transposed into C at
// the end of each block (beta applied there).
//
// Weight gradient, C = A^T B with k <= 64 (the batch): both operands are small (k rows), so
// both are packed: A^T into tiles of 6 columns by k, B into panels of W*kMaxNv columns by k.
// Tiles of 6 rows of C go in order and each sweeps all the panels, so C is written row after
// row.
//
// Input gradient, C = A B with A the small side (m rows; taken only where OpenBLAS runs
// narrower vectors: against its kernels of the same width it won, 0.7-0.9x): B is read in
// place, one panel of W*kMaxNv columns by all of k at a time (the 1024x1024 layer's panel is
// 256 KiB, in L2 after the first row tile reads it), and every tile of 6 rows of A, read in
// place along its rows, sweeps that panel; the last, narrower panel is packed zero-padded
// (read in place it would run past B's last row).

namespace dtrain {
namespace {

constexpr int kRows = 6;                 // rows of C per register tile
constexpr int64_t kMaxSmall = 64;        // the small side's largest extent
constexpr int64_t kForwardBlock = 96;    // rows of B per forward block (16 tiles)

// Plain helpers, not std::min/std::fill: no shared inline code gets instantiated for this ISA.
inline int64_t least(int64_t x, int64_t y) { return x < y ? x : y; }

template <class S>
struct SmallGemm {
  using V = typename S::V;
  static constexpr int64_t kPanel = S::W * S::kMaxNv;  // columns of C per weight-gradient panel

  // The shapes taken: the small side up to S::kForwardRows (forward) or S::kGradientRows
  // (weight gradient), or of any size where `any_rows` (OpenBLAS runs narrower vectors than
  // S), worked in blocks of kMaxSmall; the large sides at least 256, or 32 where `any_rows`
  // (gemm_small.h: narrow layers against narrower kernels).
  static constexpr int64_t large_side(bool any_rows) { return any_rows ? 32 : 256; }
  static bool takes_forward(int64_t m, int64_t n, int64_t k, bool any_rows) {
    return m >= 1 && (any_rows || m <= S::kForwardRows) && least(n, k) >= large_side(any_rows);
  }
  static bool takes_weight_gradient(int64_t m, int64_t n, int64_t k, bool any_rows) {
    return k >= 1 && (any_rows || k <= S::kGradientRows) && least(m, n) >= large_side(any_rows);
  }
  static bool takes_input_gradient(int64_t m, int64_t n, int64_t k, bool any_rows) {
    return any_rows && m >= 1 && least(n, k) >= large_side(any_rows);
  }

  // C[mr x W*NV] (+)= sum over k of A(i, k) * B[k][0 .. W*NV), rows of C ldc apart. Rows of
  // A past mr repeat row mr-1 (read, never stored).
  template <int NV>
  static void tile(int64_t K, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb, float* c,
                   int64_t ldc, bool accumulate, int mr) {
    V acc[kRows][NV];
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = accumulate && i < mr ? S::load(c + i * ldc + S::W * v) : S::zero();
    const float* row[kRows];
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) row[i] = a + (i < mr ? i : mr - 1) * ars;
    for (int64_t k = 0; k < K; ++k) {
      V bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = S::load(b + S::W * v);
#pragma GCC unroll 8
      for (int i = 0; i < kRows; ++i) {
        const V ai = S::set1(row[i][k * acs]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = S::fmadd(ai, bv[v], acc[i][v]);
      }
      b += ldb;
    }
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i)
      if (i < mr)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) S::store(c + i * ldc + S::W * v, acc[i][v]);
  }

  static void tile_nv(int nv, int64_t K, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
                      float* c, int64_t ldc, bool accumulate, int mr) {
    if constexpr (S::kMaxNv >= 4)
      if (nv >= 4) return tile<4>(K, a, ars, acs, b, ldb, c, ldc, accumulate, mr);
    if constexpr (S::kMaxNv >= 3)
      if (nv == 3) return tile<3>(K, a, ars, acs, b, ldb, c, ldc, accumulate, mr);
    if (nv >= 2) return tile<2>(K, a, ars, acs, b, ldb, c, ldc, accumulate, mr);
    return tile<1>(K, a, ars, acs, b, ldb, c, ldc, accumulate, mr);
  }

  // C[m,n] = A[m,k] B[n,k]^T (+ C when beta is 1), m <= 64.
  static void forward(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                      bool beta1, float* c, int64_t ldc) {
    const int64_t nv_all = (m + S::W - 1) / S::W;
    const int64_t mp = S::W * nv_all;
    float* at = SmallGemmScratch::grown(small_gemm_scratch().a, static_cast<size_t>(k * mp));
    for (int64_t kk = 0; kk < k; ++kk) {
      float* dst = at + kk * mp;
      for (int64_t i = 0; i < m; ++i) dst[i] = a[i * lda + kk];
      for (int64_t i = m; i < mp; ++i) dst[i] = 0.0f;
    }
    // kForwardBlock rows of B at a time: their C^T (at most 24 KiB) is still in L1 when it
    // is transposed into C, 16 columns of C at a time.
    alignas(64) float ct[kForwardBlock * kMaxSmall];
    for (int64_t j0 = 0; j0 < n; j0 += kForwardBlock) {
      const int64_t jn = least(kForwardBlock, n - j0);
      for (int64_t j = 0; j < jn; j += kRows) {
        const int mr = static_cast<int>(least(kRows, jn - j));
        for (int64_t v = 0; v < nv_all; v += S::kMaxNv)
          tile_nv(static_cast<int>(least(S::kMaxNv, nv_all - v)), k, b + (j0 + j) * ldb, ldb, 1, at + v * S::W, mp,
                  ct + j * mp + v * S::W, mp, false, mr);
      }
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
  // columns at a time and A 48 columns at a time (once per block), lost a third on AVX-512:
  // both MLP layers at 64 rows 1.79-1.82 -> 2.41-2.43 ms (C then written in 1 KiB pieces of
  // its rows, four passes over it).
  static void weight_gradient(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                              int64_t ldb, bool beta1, float* c, int64_t ldc) {
    const int64_t tiles = (m + kRows - 1) / kRows, panels = (n + kPanel - 1) / kPanel;
    SmallGemmScratch& s = small_gemm_scratch();
    float* ap = SmallGemmScratch::grown(s.a, static_cast<size_t>(tiles * k * kRows));
    float* bp = SmallGemmScratch::grown(s.b, static_cast<size_t>(panels * k * kPanel));
    for (int64_t t = 0; t < tiles; ++t)
      for (int64_t kk = 0; kk < k; ++kk) {
        float* dst = ap + (t * k + kk) * kRows;
        for (int i = 0; i < kRows; ++i) dst[i] = t * kRows + i < m ? a[kk * lda + t * kRows + i] : 0.0f;
      }
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t w = least(kPanel, n - p * kPanel);
      for (int64_t kk = 0; kk < k; ++kk) {
        float* dst = bp + (p * k + kk) * kPanel;
        const float* src = b + kk * ldb + p * kPanel;
        for (int64_t j = 0; j < w; ++j) dst[j] = src[j];
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
          tile<S::kMaxNv>(k, at, 1, kRows, bt, kPanel, out, ldc, beta1, mr);
          continue;
        }
        // The last, narrower panel goes through a full-width buffer.
        if (beta1)
          for (int i = 0; i < mr; ++i)
            for (int64_t j = 0; j < w; ++j) edge[i * kPanel + j] = out[i * ldc + j];
        tile<S::kMaxNv>(k, at, 1, kRows, bt, kPanel, edge, kPanel, beta1, mr);
        for (int i = 0; i < mr; ++i)
          for (int64_t j = 0; j < w; ++j) out[i * ldc + j] = edge[i * kPanel + j];
      }
    }
  }

  // C[m,n] = A[m,k] B[k,n] (+ C when beta is 1).
  static void input_gradient(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                             int64_t ldb, bool beta1, float* c, int64_t ldc) {
    const int64_t full = n / kPanel;
    for (int64_t p = 0; p < full; ++p)
      for (int64_t i = 0; i < m; i += kRows)
        tile<S::kMaxNv>(k, a + i * lda, lda, 1, b + p * kPanel, ldb, c + i * ldc + p * kPanel, ldc, beta1,
                        static_cast<int>(least(kRows, m - i)));
    const int64_t w = n - full * kPanel;
    if (w == 0) return;
    float* bp = SmallGemmScratch::grown(small_gemm_scratch().b, static_cast<size_t>(k * kPanel));
    for (int64_t kk = 0; kk < k; ++kk) {
      const float* src = b + kk * ldb + full * kPanel;
      for (int64_t j = 0; j < w; ++j) bp[kk * kPanel + j] = src[j];
      for (int64_t j = w; j < kPanel; ++j) bp[kk * kPanel + j] = 0.0f;
    }
    alignas(64) float edge[kRows * kPanel];
    for (int64_t i = 0; i < m; i += kRows) {
      const int mr = static_cast<int>(least(kRows, m - i));
      float* out = c + i * ldc + full * kPanel;
      if (beta1)
        for (int r = 0; r < mr; ++r)
          for (int64_t j = 0; j < w; ++j) edge[r * kPanel + j] = out[r * ldc + j];
      tile<S::kMaxNv>(k, a + i * lda, lda, 1, bp, kPanel, edge, kPanel, beta1, mr);
      for (int r = 0; r < mr; ++r)
        for (int64_t j = 0; j < w; ++j) out[r * ldc + j] = edge[r * kPanel + j];
    }
  }

  static size_t scratch_bytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, bool any_rows) {
    if (!trans_a && trans_b && takes_forward(m, n, k, any_rows))
      return static_cast<size_t>(k * S::W * ((least(m, kMaxSmall) + S::W - 1) / S::W)) * sizeof(float);
    if (trans_a && !trans_b && takes_weight_gradient(m, n, k, any_rows)) {
      const int64_t tiles = (m + kRows - 1) / kRows, panels = (n + kPanel - 1) / kPanel;
      return static_cast<size_t>(least(k, kMaxSmall) * (tiles * kRows + panels * kPanel)) * sizeof(float);
    }
    if (!trans_a && !trans_b && takes_input_gradient(m, n, k, any_rows))
      return n % kPanel == 0 ? 0 : static_cast<size_t>(k * kPanel) * sizeof(float);
    return 0;
  }

  static bool run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc, bool any_rows) {
    if (beta != 0.0f && beta != 1.0f) return false;
    const bool beta1 = beta == 1.0f;
    if (!trans_a && trans_b && takes_forward(m, n, k, any_rows)) {
      // Blocks of kMaxSmall rows of A, each a pass over B.
      for (int64_t i0 = 0; i0 < m; i0 += kMaxSmall)
        forward(least(kMaxSmall, m - i0), n, k, a + i0 * lda, lda, b, ldb, beta1, c + i0 * ldc, ldc);
      return true;
    }
    if (!trans_a && !trans_b && takes_input_gradient(m, n, k, any_rows)) {
      input_gradient(m, n, k, a, lda, b, ldb, beta1, c, ldc);
      return true;
    }
    if (trans_a && !trans_b && takes_weight_gradient(m, n, k, any_rows)) {
      // Chunks of kMaxSmall along k, each added onto C: the tile reloads C's running sums, so
      // every element's sum still runs over k in order.
      for (int64_t k0 = 0; k0 < k; k0 += kMaxSmall)
        weight_gradient(m, n, least(kMaxSmall, k - k0), a + k0 * lda, lda, b + k0 * ldb, ldb, beta1 || k0 > 0, c, ldc);
      return true;
    }
    return false;
  }
};

}  // namespace
}  // namespace dtrain

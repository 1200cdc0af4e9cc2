// tensor/blas.cc — the one file that talks to OpenBLAS (cblas).
#include "tensor/blas.h"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string>

#include "base/error.h"
#include "tensor/gemm_small.h"

namespace dtrain {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  DT_CHECK(m >= 0 && n >= 0 && k >= 0, InvalidArgument,
           "gemm with negative size m=" << m << " n=" << n << " k=" << k);
  if (m == 0 || n == 0) return;
  // cblas rejects ld < 1 even when the matrix is empty in that direction.
  lda = std::max<int64_t>(lda, 1);
  ldb = std::max<int64_t>(ldb, 1);
  if (k == 0) {
    // C = beta * C; BLAS would do the same but some builds skip beta == 0 NaN clearing.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  // A small batch on one side: the AVX-512 or AVX2 products that read the large operand in
  // place (tensor/gemm_small.h says which shapes, and why).
  if (alpha == 1.0f && gemm_small(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc))
    return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void set_blas_threads(int threads) {
  DT_CHECK(threads >= 1, InvalidArgument, "BLAS thread count must be >= 1, got " << threads);
  openblas_set_num_threads(threads);
}

int blas_threads() { return openblas_get_num_threads(); }

const char* blas_config() { return openblas_get_config(); }

const char* blas_core() { return openblas_get_corename(); }

namespace {

std::string lower(const char* s) {
  std::string name(s ? s : "");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return name;
}

}  // namespace

int blas_vector_bits() {
  static constexpr const char* k512[] = {"skylakex", "cooperlake", "sapphirerapids"};
  static constexpr const char* k256[] = {"sandybridge", "haswell", "zen", "bulldozer", "piledriver", "steamroller",
                                         "excavator"};
  const std::string name = lower(blas_core());
  if (std::find(std::begin(k512), std::end(k512), name) != std::end(k512)) return 512;
  if (std::find(std::begin(k256), std::end(k256), name) != std::end(k256)) return 256;
  return 128;
}

const char* better_blas_core(const char* chosen, bool avx512, bool avx2_fma) {
  if (!chosen || !avx2_fma) return nullptr;
  // OpenBLAS's x86-64 families before AVX (its generic fallbacks for a model it does not
  // know), lower-cased as openblas_get_corename prints them in some versions.
  static constexpr const char* kPreAvx[] = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom",
                                            "katmai", "coppermine", "northwood", "banias", "athlon", "opteron",
                                            "opteron_sse3", "barcelona", "bobcat", "nano", "unknown"};
  const std::string name = lower(chosen);
  if (std::find(std::begin(kPreAvx), std::end(kPreAvx), name) == std::end(kPreAvx)) return nullptr;
  return avx512 ? "SkylakeX" : "Haswell";
}

}  // namespace dtrain

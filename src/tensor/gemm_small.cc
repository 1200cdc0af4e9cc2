// tensor/gemm_small.cc — picks the instruction set's products (gemm_small_avx512.cc,
// gemm_small_avx2.cc; the algorithm is in gemm_small_impl.h) and keeps their scratch.
#include "tensor/gemm_small.h"

#include "tensor/blas.h"
#include "tensor/cpu_features.h"
#include "tensor/gemm_small_isa.h"

namespace dtrain {

// Per-thread packing scratch, grown on demand and kept (a training loop asks for the same
// sizes every step).
SmallGemmScratch& small_gemm_scratch() {
  thread_local SmallGemmScratch s;
  return s;
}

// To exactly n, the old buffer released first: its contents are dead (each call packs anew),
// and resize would hold old and new at once and double the capacity. ddp's measured cut
// (parallel/batch_split.h) moves a rank's rows an item at a time, and each new high would
// have added both to the rank's peak heap (2 ranks, batch 64: 0.19 MB over the planner's
// price for the largest share).
float* SmallGemmScratch::grown(std::vector<float>& v, size_t n) {
  if (v.size() < n) {
    std::vector<float>().swap(v);
    v.resize(n);
  }
  return v.data();
}

namespace {

// Whether OpenBLAS's kernels are narrower than the set gemm_small runs, so that its products
// win at every size (the sets' limits were measured against OpenBLAS's kernels of the same
// width). Decided once: OpenBLAS chose its family as it loaded.
bool blas_narrower_than(Isa isa) {
  static const int bits = blas_vector_bits();
  return isa == Isa::kAvx512 ? bits < 512 : bits < 256;
}

}  // namespace

bool gemm_small(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  switch (best_isa()) {
    case Isa::kAvx512:
      return gemm_small_avx512(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, blas_narrower_than(Isa::kAvx512));
    case Isa::kAvx2:
      return gemm_small_avx2(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, blas_narrower_than(Isa::kAvx2));
    default: return false;
  }
}

bool gemm_small_every_size() {
  const Isa isa = best_isa();
  return (isa == Isa::kAvx512 || isa == Isa::kAvx2) && blas_narrower_than(isa);
}

size_t gemm_small_scratch_bytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  switch (best_isa()) {
    case Isa::kAvx512: return gemm_small_scratch_bytes_avx512(trans_a, trans_b, m, n, k, blas_narrower_than(Isa::kAvx512));
    case Isa::kAvx2: return gemm_small_scratch_bytes_avx2(trans_a, trans_b, m, n, k, blas_narrower_than(Isa::kAvx2));
    default: return 0;
  }
}

}  // namespace dtrain

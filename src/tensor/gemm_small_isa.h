// tensor/gemm_small_isa.h — what gemm_small.cc and its per-ISA files share (internal to
// tensor/; callers use tensor/gemm_small.h).
//
// Contract
// - gemm_small_avx512 / gemm_small_avx2 are gemm_small (tensor/gemm_small.h) compiled for
//   that instruction set; call one only where isa_supported() says the CPU runs it. The
//   _scratch_bytes twins are gemm_small_scratch_bytes for that set (the packed widths
//   differ: 16 floats per vector on AVX-512, 8 on AVX2).
// - small_gemm_scratch() is this thread's packing scratch, shared by both sets (a process
//   runs one); SmallGemmScratch::grown(v, n) resizes v to at least n floats and returns its
//   data. Both are compiled for the base ISA, so no standard-library code is built for AVX.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain {

struct SmallGemmScratch {
  std::vector<float> a;  // the forward's packed A^T, or the weight gradient's packed A
  std::vector<float> b;  // the weight gradient's packed B
  static float* grown(std::vector<float>& v, size_t n);
};
SmallGemmScratch& small_gemm_scratch();

// any_rows: take the forward and weight-gradient shapes at every size of the small side, not
// only up to the set's measured limit (gemm_small.cc: where OpenBLAS runs narrower vectors).
bool gemm_small_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                       const float* b, int64_t ldb, float beta, float* c, int64_t ldc, bool any_rows);
size_t gemm_small_scratch_bytes_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, bool any_rows);
bool gemm_small_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc, bool any_rows);
size_t gemm_small_scratch_bytes_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, bool any_rows);

}  // namespace dtrain

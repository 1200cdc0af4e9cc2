// coll/reduce_kernels.h — the arithmetic of the collectives: elementwise reductions per type.
//
// Contract
// - reduce_into(t, op, dst, src, n): dst[i] = dst[i] op src[i]. kAvg reduces like kSum (the
//   division happens once, in finish_avg). Half types are widened to float32, combined, and
//   rounded back (round-to-nearest-even), so a op b == b op a bit for bit for every op: two
//   ranks that combine the same two partial results in either order hold the same bits. A
//   NaN result is stored as one quiet NaN, kHalfNaN (float16) or kBHalfNaN (bfloat16), whatever
//   the inputs' signs and payloads: which input NaN an addition returns depends on operand
//   order, which the compiler may swap (an AVX2-only CPU gave -NaN + NaN = NaN on the
//   portable loop where the reference gave -NaN).
// - reduce_ordered(t, op, out, srcs, k, n): out[i] = srcs[0][i] op srcs[1][i] op ... in that
//   order, accumulated in float32 for half types (one rounding at the end) and in the native
//   type otherwise. This is the deterministic-mode kernel: the order is the rank order.
//   `out` may alias any source. The float32 and float16 sums have AVX-512 and AVX2 (+F16C)
//   paths (the widest the CPU has, chosen at run time; reduce_into's float32 and float16 sums
//   too) that add in the same order and round the same way, so the bits are the same on
//   every CPU. DTRAIN_ISA=generic|avx2 caps the choice, as it caps tensor/'s kernels;
//   reduce_kernels_isa() names the one in use ("generic", "avx2" or "avx512").
// - finish_avg(t, buf, n, p): buf[i] /= p (float types in float32/64, integers truncate).
// Thread-safety: pure functions on caller-owned memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll/types.h"

namespace dtrain {

constexpr uint16_t kHalfNaN = 0x7e00;   // the float16 NaN a half-type reduction stores
constexpr uint16_t kBHalfNaN = 0x7fc0;  // the bfloat16 one

void reduce_into(DType t, ReduceOp op, void* dst, const void* src, size_t n);
void reduce_ordered(DType t, ReduceOp op, void* out, const void* const* srcs, int k, size_t n);
void finish_avg(DType t, void* buf, size_t n, int p);
const char* reduce_kernels_isa();

}  // namespace dtrain

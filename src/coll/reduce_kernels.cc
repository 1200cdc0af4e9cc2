// Elementwise reduction kernels. Each (type, op) pair is one tight loop the compiler can
// vectorise; half types go through float32 per element.
#pragma GCC optimize("O3")
#include "coll/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/settings.h"

namespace dtrain {
namespace {

template <class T>
struct Native {
  using Acc = T;
  static T load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  static void store(void* p, size_t i, T v) { static_cast<T*>(p)[i] = v; }
};
// Half types store a NaN result as the one quiet NaN of reduce_kernels.h (kHalfNaN,
// kBHalfNaN): which input NaN an addition returns depends on its operand order, which the
// compiler may swap (a + b is commutative to it), so the sign and payload of a NaN sum would
// differ between builds, CPUs and the AVX-512 path.
struct Half {
  using Acc = float;
  static float load(const void* p, size_t i) { return fp16_to_float(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = v != v ? kHalfNaN : float_to_fp16(v); }
};
struct BHalf {
  using Acc = float;
  static float load(const void* p, size_t i) { return bf16_to_float(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = v != v ? kBHalfNaN : float_to_bf16(v); }
};

struct Add {
  template <class A>
  static A f(A a, A b) { return a + b; }
};
struct Mul {
  template <class A>
  static A f(A a, A b) { return a * b; }
};
struct Min {
  template <class A>
  static A f(A a, A b) { return b < a ? b : a; }
};
struct Max {
  template <class A>
  static A f(A a, A b) { return a < b ? b : a; }
};

// Native types: a plain loop over restrict pointers vectorises.
template <class T, class F>
void native_into(void* dst, const void* src, size_t n) {
  T* __restrict d = static_cast<T*>(dst);
  const T* __restrict s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = F::f(d[i], s[i]);
}

template <class L, class F>
void widened_into(void* dst, const void* src, size_t n) {
  for (size_t i = 0; i < n; ++i) L::store(dst, i, F::template f<typename L::Acc>(L::load(dst, i), L::load(src, i)));
}

// Ordered accumulation in blocks so the accumulator stays in cache.
template <class L, class F>
void ordered(void* out, const void* const* srcs, int k, size_t n) {
  using Acc = typename L::Acc;
  constexpr size_t kBlock = 1024;
  Acc acc[kBlock];
  for (size_t lo = 0; lo < n; lo += kBlock) {
    size_t m = std::min(kBlock, n - lo);
    for (size_t i = 0; i < m; ++i) acc[i] = L::load(srcs[0], lo + i);
    for (int j = 1; j < k; ++j)
      for (size_t i = 0; i < m; ++i) acc[i] = F::template f<Acc>(acc[i], L::load(srcs[j], lo + i));
    for (size_t i = 0; i < m; ++i) L::store(out, lo + i, acc[i]);
  }
}

template <class F>
void into_by_type(DType t, void* dst, const void* src, size_t n) {
  switch (t) {
    case DType::kFloat32: return native_into<float, F>(dst, src, n);
    case DType::kFloat64: return native_into<double, F>(dst, src, n);
    case DType::kInt32: return native_into<int32_t, F>(dst, src, n);
    case DType::kInt64: return native_into<int64_t, F>(dst, src, n);
    case DType::kUInt8: return native_into<uint8_t, F>(dst, src, n);
    case DType::kFloat16: return widened_into<Half, F>(dst, src, n);
    case DType::kBFloat16: return widened_into<BHalf, F>(dst, src, n);
  }
}

template <class F>
void ordered_by_type(DType t, void* out, const void* const* srcs, int k, size_t n) {
  switch (t) {
    case DType::kFloat32: return ordered<Native<float>, F>(out, srcs, k, n);
    case DType::kFloat64: return ordered<Native<double>, F>(out, srcs, k, n);
    case DType::kInt32: return ordered<Native<int32_t>, F>(out, srcs, k, n);
    case DType::kInt64: return ordered<Native<int64_t>, F>(out, srcs, k, n);
    case DType::kUInt8: return ordered<Native<uint8_t>, F>(out, srcs, k, n);
    case DType::kFloat16: return ordered<Half, F>(out, srcs, k, n);
    case DType::kBFloat16: return ordered<BHalf, F>(out, srcs, k, n);
  }
}

template <class L, class D>
void divide(void* buf, size_t n, D p) {
  for (size_t i = 0; i < n; ++i) L::store(buf, i, static_cast<typename L::Acc>(L::load(buf, i) / p));
}

}  // namespace

void sum_f32_ordered_avx512(float* out, const float* const* srcs, int k, size_t n);
void sum_f16_ordered_avx512(uint16_t* out, const uint16_t* const* srcs, int k, size_t n);
void divide_f32_avx512(float* x, size_t n, float p, bool power_of_two);
void sum_f32_ordered_avx2(float* out, const float* const* srcs, int k, size_t n);
void sum_f16_ordered_avx2(uint16_t* out, const uint16_t* const* srcs, int k, size_t n);
void divide_f32_avx2(float* x, size_t n, float p, bool power_of_two);

namespace {
// The widest kernels this CPU runs (reduce_kernels_avx512.cc, reduce_kernels_avx2.cc), probed
// once and capped by DTRAIN_ISA as tensor/'s kernels are (generic: the portable loops; avx2: no
// AVX-512), so one machine can test every path; the portable loops below are the definition
// both vector paths keep to, bit for bit.
enum class Simd { kPortable, kAvx2, kAvx512 };
Simd probe_simd() {
  __builtin_cpu_init();
  const Simd avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") ? Simd::kAvx2 : Simd::kPortable;
  const Simd widest = __builtin_cpu_supports("avx512f") ? Simd::kAvx512 : avx2;
  const Settings& settings = Settings::process();
  const std::string cap = settings.has("DTRAIN_ISA") ? settings.choice("DTRAIN_ISA") : "";
  if (cap == "generic") return Simd::kPortable;
  if (cap == "avx2" && widest == Simd::kAvx512) return avx2;
  return widest;
}
Simd simd() {
  static const Simd s = probe_simd();
  return s;
}
bool is_sum(ReduceOp op) { return op == ReduceOp::kSum || op == ReduceOp::kAvg; }
// The vector sums, when this CPU has them: true when done.
bool vector_sum(DType t, void* out, const void* const* srcs, int k, size_t n) {
  const Simd s = simd();
  if (s == Simd::kPortable || k > 64) return false;
  if (t == DType::kFloat32) {
    auto* o = static_cast<float*>(out);
    auto* in = reinterpret_cast<const float* const*>(srcs);
    s == Simd::kAvx512 ? sum_f32_ordered_avx512(o, in, k, n) : sum_f32_ordered_avx2(o, in, k, n);
    return true;
  }
  if (t == DType::kFloat16) {
    auto* o = static_cast<uint16_t*>(out);
    auto* in = reinterpret_cast<const uint16_t* const*>(srcs);
    s == Simd::kAvx512 ? sum_f16_ordered_avx512(o, in, k, n) : sum_f16_ordered_avx2(o, in, k, n);
    return true;
  }
  return false;
}
}  // namespace

const char* reduce_kernels_isa() {
  switch (simd()) {
    case Simd::kAvx512: return "avx512";
    case Simd::kAvx2: return "avx2";
    case Simd::kPortable: break;
  }
  return "generic";
}

void reduce_into(DType t, ReduceOp op, void* dst, const void* src, size_t n) {
  // dst + src in that order: the ordered sum of two sources, written over the first.
  const void* both[2] = {dst, src};
  if (is_sum(op) && vector_sum(t, dst, both, 2, n)) return;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return into_by_type<Add>(t, dst, src, n);
    case ReduceOp::kProd: return into_by_type<Mul>(t, dst, src, n);
    case ReduceOp::kMin: return into_by_type<Min>(t, dst, src, n);
    case ReduceOp::kMax: return into_by_type<Max>(t, dst, src, n);
  }
}

void reduce_ordered(DType t, ReduceOp op, void* out, const void* const* srcs, int k, size_t n) {
  DT_CHECK(k >= 1, InvalidArgument, "reduce_ordered needs at least one source");
  if (is_sum(op) && vector_sum(t, out, srcs, k, n)) return;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return ordered_by_type<Add>(t, out, srcs, k, n);
    case ReduceOp::kProd: return ordered_by_type<Mul>(t, out, srcs, k, n);
    case ReduceOp::kMin: return ordered_by_type<Min>(t, out, srcs, k, n);
    case ReduceOp::kMax: return ordered_by_type<Max>(t, out, srcs, k, n);
  }
}

void finish_avg(DType t, void* buf, size_t n, int p) {
  // float32, the training case: by 1/p where p is a power of two (exactly x / p), 16 wide with
  // AVX-512, 8 with AVX2. The portable loop's 4-wide divisions took most of a 2-rank in-place
  // average of 0.94 MB (local SGD's model average): 147 us against the sum's 55.
  const bool power_of_two = p > 0 && (p & (p - 1)) == 0;
  if (t == DType::kFloat32 && simd() == Simd::kAvx512)
    return divide_f32_avx512(static_cast<float*>(buf), n, static_cast<float>(p), power_of_two);
  if (t == DType::kFloat32 && simd() == Simd::kAvx2)
    return divide_f32_avx2(static_cast<float*>(buf), n, static_cast<float>(p), power_of_two);
  if (t == DType::kFloat32 && power_of_two) {
    float* __restrict x = static_cast<float*>(buf);
    const float inv = 1.0f / static_cast<float>(p);
    for (size_t i = 0; i < n; ++i) x[i] *= inv;
    return;
  }
  switch (t) {
    case DType::kFloat32: return divide<Native<float>>(buf, n, static_cast<float>(p));
    case DType::kFloat64: return divide<Native<double>>(buf, n, static_cast<double>(p));
    case DType::kInt32: return divide<Native<int32_t>>(buf, n, static_cast<int32_t>(p));
    case DType::kInt64: return divide<Native<int64_t>>(buf, n, static_cast<int64_t>(p));
    case DType::kUInt8: return divide<Native<uint8_t>>(buf, n, static_cast<unsigned>(p));
    case DType::kFloat16: return divide<Half>(buf, n, static_cast<float>(p));
    case DType::kBFloat16: return divide<BHalf>(buf, n, static_cast<float>(p));
  }
}

}  // namespace dtrain

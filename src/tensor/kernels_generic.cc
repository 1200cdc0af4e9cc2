// tensor/kernels_generic.cc — the kernel table for any x86-64 (or other) CPU: one float per
// "register". The compiler may still auto-vectorize with the baseline instruction set.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "tensor/kernels.h"
#include "tensor/kernels_impl.h"

namespace {

struct ScalarOps {
  using V = float;
  static constexpr int W = 1;
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  // W == 1: a partial register never occurs, but the template needs the names.
  static V load_partial(const float* p, int64_t n, float fill) { return n > 0 ? *p : fill; }
  static void store_partial(float* p, V v, int64_t n) {
    if (n > 0) *p = v;
  }
  static V set1(float x) { return x; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V min(V a, V b) { return a < b ? a : b; }
  static V sqrt(V a) { return std::sqrt(a); }
  static V select_pos(V c, V x) { return c > 0.0f ? x : 0.0f; }
  static V round(V a) { return std::nearbyint(a); }
  static V pow2(V n) {
    int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static float hsum(V a) { return a; }
  static float hmax(V a) { return a; }
};

}  // namespace

#include "tensor/kernels_table.h"

namespace dtrain {
Kernels make_generic_kernels() { return kernel_table<Impl<ScalarOps>>(Isa::kGeneric); }
}  // namespace dtrain

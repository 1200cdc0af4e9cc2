// tensor/kernels_impl.h — the kernel bodies, written once over a vector-register type S.
//
// Included ONLY by kernels_generic.cc, kernels_avx2.cc and kernels_avx512.cc, each after a
// `#pragma GCC target(...)` line, so every function here is compiled once per instruction set.
// Everything is in an anonymous namespace: each including file gets its own private copy
// (internal linkage), so the linker can never merge an AVX-512 instantiation into the generic
// table (which a normal inline template would allow under the one-definition rule).
//
// S provides: W (lanes), V (register type), load/store, load_partial(p, n, fill) and
// store_partial(p, v, n) for the last n < W elements (masked, so the tail is computed with
// exactly the same instructions as the body), set1, add, sub, mul, div, fmadd(a, b, c) =
// a*b + c, max, min, sqrt, select_pos(c, x) = c > 0 ? x : 0, round (to nearest), pow2(n) =
// 2^n for integral n in [-126, 127], hsum, hmax.
//
// Each loop below is the same shape: full registers over [0, n - n % W), then one masked
// register for the remainder.

#include <cmath>
#include <cstdint>
#include <limits>

#include "tensor/kernels.h"

namespace {

template <class S, class F>
inline void map1(const float* x, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) S::store(out + i, f(S::load(x + i)));
  if (i < n) S::store_partial(out + i, f(S::load_partial(x + i, n - i, 0.0f)), n - i);
}

template <class S, class F>
inline void map2(const float* a, const float* b, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) S::store(out + i, f(S::load(a + i), S::load(b + i)));
  if (i < n) {
    int64_t r = n - i;
    S::store_partial(out + i, f(S::load_partial(a + i, r, 0.0f), S::load_partial(b + i, r, 0.0f)), r);
  }
}

// Four independent accumulators hide the add latency; combined in a fixed order at the end.
template <class S, class F>
inline float reduce2(const float* a, const float* b, int64_t n, F f) {
  using V = typename S::V;
  V acc0 = S::set1(0), acc1 = S::set1(0), acc2 = S::set1(0), acc3 = S::set1(0);
  int64_t i = 0;
  for (; i + 4 * S::W <= n; i += 4 * S::W) {
    acc0 = f(acc0, S::load(a + i), S::load(b + i));
    acc1 = f(acc1, S::load(a + i + S::W), S::load(b + i + S::W));
    acc2 = f(acc2, S::load(a + i + 2 * S::W), S::load(b + i + 2 * S::W));
    acc3 = f(acc3, S::load(a + i + 3 * S::W), S::load(b + i + 3 * S::W));
  }
  for (; i + S::W <= n; i += S::W) acc0 = f(acc0, S::load(a + i), S::load(b + i));
  if (i < n) acc1 = f(acc1, S::load_partial(a + i, n - i, 0.0f), S::load_partial(b + i, n - i, 0.0f));
  return S::hsum(S::add(S::add(acc0, acc1), S::add(acc2, acc3)));
}

// exp(x) by range reduction: x = n ln2 + r with n = round(x / ln2) and |r| <= ln2/2, where
// ln2 is split in a high part with few mantissa bits (exact n*hi) and a low correction.
// e^r is a degree-6 polynomial (Cephes expf coefficients), and 2^n is built directly in the
// exponent bits. Inputs are clamped to [-87, 88] so 2^n stays a normal float.
template <class S>
inline typename S::V vexp(typename S::V x) {
  using V = typename S::V;
  x = S::min(S::max(x, S::set1(-87.0f)), S::set1(88.0f));
  V n = S::round(S::mul(x, S::set1(1.44269504088896341f)));
  V r = S::fmadd(n, S::set1(-0.693359375f), x);
  r = S::fmadd(n, S::set1(2.12194440e-4f), r);
  V p = S::set1(1.9875691500e-4f);
  p = S::fmadd(p, r, S::set1(1.3981999507e-3f));
  p = S::fmadd(p, r, S::set1(8.3334519073e-3f));
  p = S::fmadd(p, r, S::set1(4.1665795894e-2f));
  p = S::fmadd(p, r, S::set1(1.6666665459e-1f));
  p = S::fmadd(p, r, S::set1(5.0000001201e-1f));
  V y = S::add(S::fmadd(S::mul(p, r), r, r), S::set1(1.0f));
  return S::mul(y, S::pow2(n));
}

// sigmoid(x) = 1 / (1 + e^-x); saturates cleanly because e^-x is clamped.
template <class S>
inline typename S::V vsigmoid(typename S::V x) {
  return S::div(S::set1(1.0f), S::add(S::set1(1.0f), vexp<S>(S::sub(S::set1(0.0f), x))));
}
// tanh(x) = 2 sigmoid(2x) - 1.
template <class S>
inline typename S::V vtanh(typename S::V x) {
  return S::sub(S::mul(S::set1(2.0f), vsigmoid<S>(S::add(x, x))), S::set1(1.0f));
}

constexpr float kGeluK0 = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluK1 = 0.044715f;

// gelu(x) = x/2 (1 + tanh(k0 (x + k1 x^3)))
template <class S>
inline typename S::V vgelu(typename S::V x) {
  using V = typename S::V;
  V x2 = S::mul(x, x);
  V u = S::mul(S::set1(kGeluK0), S::fmadd(S::mul(S::set1(kGeluK1), x2), x, x));
  V t = vtanh<S>(u);
  return S::mul(S::mul(S::set1(0.5f), x), S::add(S::set1(1.0f), t));
}
// d gelu/dx = (1 + t)/2 + x/2 (1 - t^2) k0 (1 + 3 k1 x^2)
template <class S>
inline typename S::V vgelu_grad(typename S::V x) {
  using V = typename S::V;
  V x2 = S::mul(x, x);
  V u = S::mul(S::set1(kGeluK0), S::fmadd(S::mul(S::set1(kGeluK1), x2), x, x));
  V t = vtanh<S>(u);
  V one = S::set1(1.0f), half = S::set1(0.5f);
  V du = S::mul(S::set1(kGeluK0), S::fmadd(S::set1(3.0f * kGeluK1), x2, one));
  V left = S::mul(half, S::add(one, t));
  V right = S::mul(S::mul(S::mul(half, x), S::sub(one, S::mul(t, t))), du);
  return S::add(left, right);
}

template <class S>
struct Impl {
  using V = typename S::V;

  static void add(const float* a, const float* b, float* o, int64_t n) { map2<S>(a, b, o, n, [](V x, V y) { return S::add(x, y); }); }
  static void sub(const float* a, const float* b, float* o, int64_t n) { map2<S>(a, b, o, n, [](V x, V y) { return S::sub(x, y); }); }
  static void mul(const float* a, const float* b, float* o, int64_t n) { map2<S>(a, b, o, n, [](V x, V y) { return S::mul(x, y); }); }
  static void add_relu(const float* a, const float* b, float* o, int64_t n) {
    map2<S>(a, b, o, n, [](V x, V y) { return S::max(S::add(x, y), S::set1(0.0f)); });
  }
  static void axpy(float alpha, const float* x, float* y, int64_t n) {
    V va = S::set1(alpha);
    map2<S>(x, y, y, n, [va](V xv, V yv) { return S::fmadd(va, xv, yv); });
  }
  static void scale(float alpha, const float* x, float* o, int64_t n) {
    V va = S::set1(alpha);
    map1<S>(x, o, n, [va](V xv) { return S::mul(va, xv); });
  }
  static void axpby(float alpha, const float* x, float beta, const float* y, float* o, int64_t n) {
    V va = S::set1(alpha), vb = S::set1(beta);
    map2<S>(x, y, o, n, [va, vb](V xv, V yv) { return S::fmadd(va, xv, S::mul(vb, yv)); });
  }
  static void fill(float value, float* o, int64_t n) {
    V v = S::set1(value);
    int64_t i = 0;
    for (; i + S::W <= n; i += S::W) S::store(o + i, v);
    if (i < n) S::store_partial(o + i, v, n - i);
  }
  static void relu(const float* x, float* o, int64_t n) { map1<S>(x, o, n, [](V v) { return S::max(v, S::set1(0.0f)); }); }
  static void exp(const float* x, float* o, int64_t n) { map1<S>(x, o, n, [](V v) { return vexp<S>(v); }); }
  static void tanh(const float* x, float* o, int64_t n) { map1<S>(x, o, n, [](V v) { return vtanh<S>(v); }); }
  static void sigmoid(const float* x, float* o, int64_t n) { map1<S>(x, o, n, [](V v) { return vsigmoid<S>(v); }); }
  static void gelu(const float* x, float* o, int64_t n) { map1<S>(x, o, n, [](V v) { return vgelu<S>(v); }); }
  static void relu_backward(const float* y, const float* gy, float* gx, int64_t n) {
    map2<S>(y, gy, gx, n, [](V yv, V g) { return S::select_pos(yv, g); });
  }
  static void tanh_backward(const float* y, const float* gy, float* gx, int64_t n) {
    map2<S>(y, gy, gx, n, [](V yv, V g) { return S::mul(g, S::sub(S::set1(1.0f), S::mul(yv, yv))); });
  }
  static void sigmoid_backward(const float* y, const float* gy, float* gx, int64_t n) {
    map2<S>(y, gy, gx, n, [](V yv, V g) { return S::mul(g, S::mul(yv, S::sub(S::set1(1.0f), yv))); });
  }
  static void gelu_backward(const float* x, const float* gy, float* gx, int64_t n) {
    map2<S>(x, gy, gx, n, [](V xv, V g) { return S::mul(g, vgelu_grad<S>(xv)); });
  }
  static float sum(const float* x, int64_t n) {
    return reduce2<S>(x, x, n, [](V acc, V a, V) { return S::add(acc, a); });
  }
  static float dot(const float* a, const float* b, int64_t n) {
    return reduce2<S>(a, b, n, [](V acc, V x, V y) { return S::fmadd(x, y, acc); });
  }
  static float sumsq(const float* x, int64_t n) {
    return reduce2<S>(x, x, n, [](V acc, V a, V) { return S::fmadd(a, a, acc); });
  }
  static float max(const float* x, int64_t n) {
    const float lowest = -std::numeric_limits<float>::infinity();
    V acc = S::set1(lowest);
    int64_t i = 0;
    for (; i + S::W <= n; i += S::W) acc = S::max(acc, S::load(x + i));
    if (i < n) acc = S::max(acc, S::load_partial(x + i, n - i, lowest));
    return S::hmax(acc);
  }
  static float exp_shift_sum(const float* x, float shift, float* o, int64_t n) {
    V vs = S::set1(shift), acc = S::set1(0.0f);
    int64_t i = 0;
    for (; i + S::W <= n; i += S::W) {
      V e = vexp<S>(S::sub(S::load(x + i), vs));
      S::store(o + i, e);
      acc = S::add(acc, e);
    }
    if (i < n) {
      // Masked-off lanes hold exp(-88)-ish garbage; do not add them.
      float tail[S::W];
      for (int j = 0; j < S::W; ++j) tail[j] = 0.0f;
      V e = vexp<S>(S::sub(S::load_partial(x + i, n - i, 0.0f), vs));
      S::store_partial(o + i, e, n - i);
      S::store_partial(tail, e, n - i);
      acc = S::add(acc, S::load(tail));
    }
    return S::hsum(acc);
  }

  // One pass over (p, g, v) per variant; the branch is hoisted out of the loop.
  static void sgd_update(float* p, const float* g, float* v, int64_t n, const dtrain::SgdUpdate& u) {
    sgd_terms<1>(p, p, &g, 1, v, n, u);
  }
  // The same update written to out (which may be p), with g the sum of k terms added in
  // their order (what coll's reduce_ordered computes): one pass over every input.
  static void sgd_update_sum(float* out, const float* p, const float* const* g, int k, float* v, int64_t n,
                             const dtrain::SgdUpdate& u) {
    if (k == 1) sgd_terms<1>(out, p, g, k, v, n, u);
    else if (k == 2) sgd_terms<2>(out, p, g, k, v, n, u);
    else sgd_terms<0>(out, p, g, k, v, n, u);
  }
  // K terms known at compile time (1 or 2: the loads unrolled), or 0: k at run time.
  template <int K>
  static void sgd_terms(float* out, const float* p, const float* const* g, int k, float* v, int64_t n,
                        const dtrain::SgdUpdate& u) {
    V lr = S::set1(u.lr), mu = S::set1(u.momentum), wd = S::set1(u.weight_decay);
    bool has_wd = u.weight_decay != 0.0f;
    auto run = [&](auto body) {
      int64_t i = 0;
      for (; i + S::W <= n; i += S::W) body(i, S::W);
      if (i < n) body(i, n - i);
    };
    auto ld = [](const float* a, int64_t i, int64_t w) { return w == S::W ? S::load(a + i) : S::load_partial(a + i, w, 0.0f); };
    auto st = [](float* a, int64_t i, int64_t w, V x) { w == S::W ? S::store(a + i, x) : S::store_partial(a + i, x, w); };
    auto grad = [&](int64_t i, int64_t w) {
      V gv = ld(g[0], i, w);
      if constexpr (K == 2) gv = S::add(gv, ld(g[1], i, w));
      if constexpr (K == 0)
        for (int j = 1; j < k; ++j) gv = S::add(gv, ld(g[j], i, w));
      return gv;
    };
    if (u.momentum == 0.0f) {
      run([&](int64_t i, int64_t w) {
        V pv = ld(p, i, w), gv = grad(i, w);
        if (has_wd) gv = S::fmadd(wd, pv, gv);
        st(out, i, w, S::sub(pv, S::mul(lr, gv)));
      });
    } else {
      bool nesterov = u.nesterov;
      run([&](int64_t i, int64_t w) {
        V pv = ld(p, i, w), gv = grad(i, w), vv = ld(v, i, w);
        if (has_wd) gv = S::fmadd(wd, pv, gv);
        vv = S::fmadd(mu, vv, gv);
        st(v, i, w, vv);
        V d = nesterov ? S::fmadd(mu, vv, gv) : vv;
        st(out, i, w, S::sub(pv, S::mul(lr, d)));
      });
    }
  }

  static void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const dtrain::AdamUpdate& u) {
    V b1 = S::set1(u.beta1), b2 = S::set1(u.beta2);
    V c1 = S::set1(1.0f - u.beta1), c2 = S::set1(1.0f - u.beta2);
    V step = S::set1(u.lr / u.bias_correction1);
    V inv_sqrt_bc2 = S::set1(1.0f / std::sqrt(u.bias_correction2));
    V eps = S::set1(u.eps), wd = S::set1(u.weight_decay);
    V decay = S::set1(1.0f - u.lr * u.weight_decay);
    bool has_wd = u.weight_decay != 0.0f, decoupled = u.decoupled;
    auto body = [&](int64_t i, int64_t w) {
      auto ld = [&](const float* a) { return w == S::W ? S::load(a + i) : S::load_partial(a + i, w, 0.0f); };
      auto st = [&](float* a, V x) { w == S::W ? S::store(a + i, x) : S::store_partial(a + i, x, w); };
      V pv = ld(p), gv = ld(g), mv = ld(m), vv = ld(v);
      if (has_wd) {
        if (decoupled) pv = S::mul(pv, decay);
        else gv = S::fmadd(wd, pv, gv);
      }
      mv = S::fmadd(b1, mv, S::mul(c1, gv));
      vv = S::fmadd(b2, vv, S::mul(c2, S::mul(gv, gv)));
      V denom = S::fmadd(S::sqrt(vv), inv_sqrt_bc2, eps);
      st(m, mv);
      st(v, vv);
      st(p, S::sub(pv, S::mul(step, S::div(mv, denom))));
    };
    int64_t i = 0;
    for (; i + S::W <= n; i += S::W) body(i, S::W);
    if (i < n) body(i, n - i);
  }
};

}  // namespace

// tensor/kernels.h — single-threaded SIMD kernels over raw float arrays.
//
// Contract
// - A Kernels table holds function pointers for one instruction set (generic C++, AVX2+FMA,
//   AVX-512). kernels() returns the table for best_isa(), chosen once at run time, so one
//   binary runs on every x86-64 CPU; kernels_for(isa) returns a specific table (tests compare
//   every supported variant against a naive reference).
// - Every kernel handles any n >= 0 (vector body plus scalar tail); pointers need no
//   alignment. Outputs may alias inputs exactly (in-place), never partially.
// - The transcendental kernels (exp, tanh, sigmoid, gelu) use a range-reduced polynomial
//   exp with max relative error about 2e-7 for exp; tanh/sigmoid/gelu inherit about 1e-6
//   absolute error. gelu is the tanh approximation (PyTorch approximate="tanh").
// - Reductions (sum, dot, sumsq, max) accumulate in several vector lanes; their rounding
//   depends on the ISA but is deterministic for a given ISA and n.
// - The fused optimizer updates live here because they are the same kind of streaming loop;
//   optim/ calls them, see optim/sgd.h and optim/adam.h for the math.
// Thread-safety: kernels are pure functions of their arguments; the tables are immutable.
// Multithreading is the caller's job (tensor/ops.h splits work over a ThreadPool).
#pragma once

#include <cstdint>

#include "tensor/cpu_features.h"

namespace dtrain {

struct SgdUpdate {
  float lr = 0, momentum = 0, weight_decay = 0;
  bool nesterov = false;
};
struct AdamUpdate {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
  bool decoupled = false;             // AdamW: p -= lr*wd*p instead of g += wd*p
  float bias_correction1 = 1;         // 1 - beta1^t
  float bias_correction2 = 1;         // 1 - beta2^t
};

struct Kernels {
  Isa isa;
  // Binary element-wise: out[i] = a[i] op b[i].
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  void (*sub)(const float* a, const float* b, float* out, int64_t n);
  void (*mul)(const float* a, const float* b, float* out, int64_t n);
  // out[i] = max(a[i] + b[i], 0)  (fused bias + ReLU when b is a bias row).
  void (*add_relu)(const float* a, const float* b, float* out, int64_t n);
  // y[i] += alpha * x[i]
  void (*axpy)(float alpha, const float* x, float* y, int64_t n);
  // out[i] = alpha * x[i]
  void (*scale)(float alpha, const float* x, float* out, int64_t n);
  // out[i] = alpha * x[i] + beta * y[i]
  void (*axpby)(float alpha, const float* x, float beta, const float* y, float* out, int64_t n);
  void (*fill)(float value, float* out, int64_t n);

  // Unary maps.
  void (*relu)(const float* x, float* out, int64_t n);
  void (*exp)(const float* x, float* out, int64_t n);
  void (*tanh)(const float* x, float* out, int64_t n);
  void (*sigmoid)(const float* x, float* out, int64_t n);
  void (*gelu)(const float* x, float* out, int64_t n);
  // Backward maps: gx[i] = gy[i] * f'(.) given what the forward kept.
  void (*relu_backward)(const float* y, const float* gy, float* gx, int64_t n);     // y>0
  void (*tanh_backward)(const float* y, const float* gy, float* gx, int64_t n);     // 1-y^2
  void (*sigmoid_backward)(const float* y, const float* gy, float* gx, int64_t n);  // y(1-y)
  void (*gelu_backward)(const float* x, const float* gy, float* gx, int64_t n);

  // Reductions.
  float (*sum)(const float* x, int64_t n);
  float (*dot)(const float* a, const float* b, int64_t n);
  float (*sumsq)(const float* x, int64_t n);
  float (*max)(const float* x, int64_t n);  // -inf for n == 0
  // out[i] = exp(x[i] - shift); returns the sum of out (softmax numerator).
  float (*exp_shift_sum)(const float* x, float shift, float* out, int64_t n);

  // Fused optimizer updates over parallel arrays of length n.
  // SGD: g' = g + wd*p; v = mu*v + g'; p -= lr * (nesterov ? g' + mu*v : v). (mu==0: no v.)
  void (*sgd_update)(float* p, const float* g, float* v, int64_t n, const SgdUpdate& u);
  // The same step with g = g[0] + g[1] + ... + g[k-1] (added in that order, k >= 1) and the
  // new parameters written to out (out == p: in place; else apart from p, which is only
  // read): one pass where a sum, then sgd_update on a copy, would take three.
  void (*sgd_update_sum)(float* out, const float* p, const float* const* g, int k, float* v, int64_t n,
                         const SgdUpdate& u);
  // Adam/AdamW with bias corrections given in u.
  void (*adam_update)(float* p, const float* g, float* m, float* v, int64_t n, const AdamUpdate& u);

  // bfloat16 conversion, bit-identical to base/dtype.h's scalar helpers (round to nearest
  // even, NaN stays a quiet NaN, Inf stays Inf).
  void (*to_bf16)(const float* x, uint16_t* out, int64_t n);
  void (*from_bf16)(const uint16_t* x, float* out, int64_t n);
};

// The table for best_isa(), selected once.
const Kernels& kernels();
// The table for a specific ISA; throws InvalidArgument if this CPU cannot run it.
const Kernels& kernels_for(Isa isa);

}  // namespace dtrain

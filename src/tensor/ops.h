// tensor/ops.h — tensor-level math: element-wise maps, row ops, reductions, matmul.
//
// Contract
// - Every op takes an optional ThreadPool* (nullptr = run on the calling thread). Work is
//   split with ThreadPool::parallel_for, whose split depends only on sizes, so results are
//   bit-identical run to run for a given pool size. Reductions combine per-chunk partials in
//   chunk order.
// - Inputs may be any strided view; non-contiguous inputs are made contiguous first (one
//   copy). Outputs are new contiguous tensors unless the name ends in _ (in place) or the
//   op writes into an `out` argument (which must be contiguous and of the right shape).
// - "Rows" means all dimensions but the last flattened: a [B, T, C] tensor has B*T rows of C.
// - Shape mismatches throw InvalidArgument naming both shapes.
// Thread-safety: pure functions; the pool must not be used by another caller concurrently.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace dtrain {

class ThreadPool;

// Element-wise, same shapes.
Tensor add(const Tensor& a, const Tensor& b, ThreadPool* pool = nullptr);
Tensor sub(const Tensor& a, const Tensor& b, ThreadPool* pool = nullptr);
Tensor mul(const Tensor& a, const Tensor& b, ThreadPool* pool = nullptr);
Tensor scale(const Tensor& x, float alpha, ThreadPool* pool = nullptr);
// y += alpha * x (y contiguous).
void axpy_(float alpha, const Tensor& x, Tensor& y, ThreadPool* pool = nullptr);

// Unary maps.
Tensor relu(const Tensor& x, ThreadPool* pool = nullptr);
Tensor gelu(const Tensor& x, ThreadPool* pool = nullptr);  // tanh approximation
Tensor tanh(const Tensor& x, ThreadPool* pool = nullptr);
Tensor sigmoid(const Tensor& x, ThreadPool* pool = nullptr);
Tensor exp(const Tensor& x, ThreadPool* pool = nullptr);

// Row ops: bias has shape [C] where x's last dimension is C.
Tensor bias_add(const Tensor& x, const Tensor& bias, ThreadPool* pool = nullptr);
// x = max(x + bias, 0), in place (x contiguous).
void bias_add_relu_(Tensor& x, const Tensor& bias, ThreadPool* pool = nullptr);
// x += bias, in place.
void bias_add_(Tensor& x, const Tensor& bias, ThreadPool* pool = nullptr);
Tensor softmax(const Tensor& x, ThreadPool* pool = nullptr);      // over the last dim
Tensor log_softmax(const Tensor& x, ThreadPool* pool = nullptr);  // over the last dim
// Index of the largest element of each row (first one on ties), shape = rows.
std::vector<int32_t> argmax_rows(const Tensor& x);
// Sum over all rows: [.., C] -> [C] (the bias gradient). out must have C elements;
// accumulate adds into out instead of overwriting.
void sum_rows_into(const Tensor& x, float* out, bool accumulate, ThreadPool* pool = nullptr);

// Reductions over all elements.
float sum(const Tensor& x, ThreadPool* pool = nullptr);
float mean(const Tensor& x, ThreadPool* pool = nullptr);
float sumsq(const Tensor& x, ThreadPool* pool = nullptr);
float max(const Tensor& x);

// Span helpers for flat buffers (gradient norms, optimizer state): deterministic chunked
// reductions and maps over a pool.
double sumsq(std::span<const float> x, ThreadPool* pool = nullptr);
void scale_(std::span<float> x, float alpha, ThreadPool* pool = nullptr);

// Matrix product of 2-D tensors: op(a) [m, k] x op(b) [k, n] -> [m, n], where op transposes
// when the flag is set (no copy is made). Views with unit column stride are used as-is.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// out = alpha * op(a) op(b) + beta * out.
void matmul_into(const Tensor& a, const Tensor& b, Tensor& out, bool trans_a, bool trans_b,
                 float alpha = 1.0f, float beta = 0.0f);

}  // namespace dtrain

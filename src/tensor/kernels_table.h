// tensor/kernels_table.h — fills a Kernels table with the functions of one Impl<S>.
// Included by the kernels_<isa>.cc files AFTER their target pragma is popped, so building
// the table executes only plain code on any CPU. Anonymous namespace: see kernels_impl.h.
#include "base/dtype.h"
#include "tensor/kernels.h"

namespace {

// Scalar bf16 loops (the reference; also the tails of the vector versions).
inline void scalar_to_bf16(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = dtrain::float_to_bf16(x[i]);
}
inline void scalar_from_bf16(const uint16_t* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = dtrain::bf16_to_float(x[i]);
}

template <class I>
dtrain::Kernels kernel_table(dtrain::Isa isa) {
  dtrain::Kernels k;
  k.isa = isa;
  k.add = &I::add; k.sub = &I::sub; k.mul = &I::mul; k.add_relu = &I::add_relu;
  k.axpy = &I::axpy; k.scale = &I::scale; k.axpby = &I::axpby; k.fill = &I::fill;
  k.relu = &I::relu; k.exp = &I::exp; k.tanh = &I::tanh; k.sigmoid = &I::sigmoid; k.gelu = &I::gelu;
  k.relu_backward = &I::relu_backward; k.tanh_backward = &I::tanh_backward;
  k.sigmoid_backward = &I::sigmoid_backward; k.gelu_backward = &I::gelu_backward;
  k.sum = &I::sum; k.dot = &I::dot; k.sumsq = &I::sumsq; k.max = &I::max;
  k.exp_shift_sum = &I::exp_shift_sum;
  k.sgd_update = &I::sgd_update; k.sgd_update_sum = &I::sgd_update_sum; k.adam_update = &I::adam_update;
  k.to_bf16 = &scalar_to_bf16;  // ISA files replace these with vector versions
  k.from_bf16 = &scalar_from_bf16;
  return k;
}

}  // namespace

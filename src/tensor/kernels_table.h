// tensor/kernels_table.h — fills a Kernels table with the functions of one Impl<S>.
// Included by the kernels_<isa>.cc files AFTER their target pragma is popped, so building
// the table executes only plain code on any CPU. Anonymous namespace: see kernels_impl.h.
#include "tensor/kernels.h"

namespace {

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
  k.sgd_update = &I::sgd_update; k.adam_update = &I::adam_update;
  return k;
}

}  // namespace

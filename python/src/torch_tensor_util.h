// python/src/torch_tensor_util.h — what the backend's operations share: tensor checks, the
// dtype and reduce-op translation, and contiguous staging of strided tensors.
//
// Contract
// - elem_of(t) maps a tensor's scalar type to extra_reduce's Elem (complex types as their
//   real component type, with twice the elements); anything else is InvalidArgument naming
//   the call and the type.
// - Staged wraps a user tensor: `buf` is the tensor itself when contiguous, else a contiguous
//   copy taken now; finish() copies buf back into the user tensor (only when they differ).
//   Staged::bytes()/ptr() address buf's storage as raw bytes (complex included).
// - red_op(op, call) maps c10d's ReduceOp; PREMUL_SUM is InvalidArgument (NCCL only).
// - timeout_of(opts_timeout, default) is the option's timeout in seconds when set, else default.
// Thread-safety: plain functions; a Staged is used by one thread at a time (built on the
// caller's thread, used and finished on the progress thread).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "base/error.h"
#include "extra_reduce.h"

namespace dtrain::py {

inline Elem elem_of(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kFloat: case at::kComplexFloat: return Elem::kF32;
    case at::kDouble: case at::kComplexDouble: return Elem::kF64;
    case at::kHalf: return Elem::kF16;
    case at::kBFloat16: return Elem::kBF16;
    case at::kChar: return Elem::kI8;
    case at::kShort: return Elem::kI16;
    case at::kInt: return Elem::kI32;
    case at::kLong: return Elem::kI64;
    case at::kByte: return Elem::kU8;
    case at::kBool: return Elem::kBool;
    default: DT_THROW(InvalidArgument, call << ": dtrain backend does not support tensors of type " << t.scalar_type());
  }
}

inline void check_cpu(const at::Tensor& t, const char* call) {
  DT_CHECK(t.device().is_cpu(), InvalidArgument,
           call << ": the dtrain backend takes CPU tensors (got one on " << t.device() << "); use nccl for CUDA");
  DT_CHECK(!t.is_sparse(), InvalidArgument, call << ": the dtrain backend does not support sparse tensors");
}

inline void check_one(const std::vector<at::Tensor>& ts, const char* call) {
  DT_CHECK(ts.size() == 1, InvalidArgument, call << ": the dtrain backend takes exactly one tensor (got " << ts.size() << ")");
  check_cpu(ts[0], call);
}

inline RedOp red_op(const c10d::ReduceOp& op, const char* call) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM: return RedOp::kSum;
    case c10d::ReduceOp::AVG: return RedOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return RedOp::kProd;
    case c10d::ReduceOp::MIN: return RedOp::kMin;
    case c10d::ReduceOp::MAX: return RedOp::kMax;
    case c10d::ReduceOp::BAND: return RedOp::kBand;
    case c10d::ReduceOp::BOR: return RedOp::kBor;
    case c10d::ReduceOp::BXOR: return RedOp::kBxor;
    default: DT_THROW(InvalidArgument, call << ": reduce op " << int(op.op_) << " (PREMUL_SUM) is NCCL-only");
  }
}

inline double timeout_of(std::chrono::milliseconds t, double fallback_s) {
  return t.count() >= 0 ? t.count() / 1000.0 : fallback_s;
}

// Elements in extra_reduce's sense (complex counts twice).
inline size_t elems_of(const at::Tensor& t) { return t.numel() * (t.is_complex() ? 2 : 1); }

struct Staged {
  at::Tensor user, buf;
  Staged() = default;
  explicit Staged(const at::Tensor& t) : user(t), buf(t.is_contiguous() ? t : t.contiguous()) {}
  void* ptr() const { return buf.data_ptr(); }
  size_t bytes() const { return buf.numel() * buf.element_size(); }
  size_t elems() const { return elems_of(buf); }
  void finish() {
    if (!buf.is_same(user)) user.copy_(buf);
  }
};

// A fresh contiguous tensor of n x t's shape (a flat scratch for gathers).
inline at::Tensor stacked_like(const at::Tensor& t, int64_t n) {
  std::vector<int64_t> shape{n};
  for (auto d : t.sizes()) shape.push_back(d);
  return at::empty(shape, t.options().memory_format(at::MemoryFormat::Contiguous));
}

}  // namespace dtrain::py

// tensor/denormals.h — flush subnormal floats to zero on the calling thread, scoped.
//
// Why: when a model has nearly memorized its data, gradients and momentum decay into the
// subnormal range (< 1.2e-38), and x86 cores take a slow microcode path for every subnormal
// operand — a training step can get 10-100x slower. FTZ (flush results to zero) + DAZ
// (treat subnormal inputs as zero) avoid that at no cost to training quality (PyTorch:
// torch.set_flush_denormal(True)).
//
// Contract: FlushDenormals sets FTZ and DAZ in the calling thread's MXCSR while it lives and
// restores the previous MXCSR when destroyed. It changes only the current thread's CPU
// state, so each training thread opens its own scope (OpenBLAS worker threads keep their
// own setting). On CPUs other than x86-64 it does nothing. Not copyable; destroy it on the
// thread that made it.
#pragma once

#include <cstdint>

namespace dtrain {

class FlushDenormals {
 public:
  FlushDenormals();
  ~FlushDenormals();
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

  // True when the calling thread currently flushes subnormals (FTZ and DAZ both set).
  static bool active();

 private:
  uint32_t saved_ = 0;
};

}  // namespace dtrain

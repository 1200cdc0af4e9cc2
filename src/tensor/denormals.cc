// tensor/denormals.cc — MXCSR bits 15 (FTZ) and 6 (DAZ).
#include "tensor/denormals.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define DTRAIN_HAVE_MXCSR 1
#endif

namespace dtrain {

namespace {
constexpr uint32_t kFtz = 1u << 15;
constexpr uint32_t kDaz = 1u << 6;
}  // namespace

FlushDenormals::FlushDenormals() {
#ifdef DTRAIN_HAVE_MXCSR
  saved_ = _mm_getcsr();
  _mm_setcsr(saved_ | kFtz | kDaz);
#endif
}

FlushDenormals::~FlushDenormals() {
#ifdef DTRAIN_HAVE_MXCSR
  _mm_setcsr(saved_);
#endif
}

bool FlushDenormals::active() {
#ifdef DTRAIN_HAVE_MXCSR
  return (_mm_getcsr() & (kFtz | kDaz)) == (kFtz | kDaz);
#else
  return false;
#endif
}

}  // namespace dtrain

// tensor/kernels.cc — picks the kernel table for this CPU, once.
#include "tensor/kernels.h"

#include "base/error.h"

namespace dtrain {

Kernels make_generic_kernels();
Kernels make_avx2_kernels();
Kernels make_avx512_kernels();

namespace {
// Immutable after construction; built on first use (only tables this CPU can run are ever
// called, but building the function-pointer struct executes no ISA-specific instruction).
struct Tables {
  Kernels generic = make_generic_kernels();
  Kernels avx2 = make_avx2_kernels();
  Kernels avx512 = make_avx512_kernels();
};
const Tables& tables() {
  static const Tables t;
  return t;
}
}  // namespace

const Kernels& kernels_for(Isa isa) {
  DT_CHECK(isa_supported(isa), InvalidArgument, "this CPU cannot run the " << isa_name(isa) << " kernels");
  switch (isa) {
    case Isa::kAvx512: return tables().avx512;
    case Isa::kAvx2: return tables().avx2;
    default: return tables().generic;
  }
}

const Kernels& kernels() {
  static const Kernels& k = kernels_for(best_isa());
  return k;
}

}  // namespace dtrain

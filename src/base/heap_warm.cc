// base/heap_warm.cc — see heap_warm.h.
#include "base/heap_warm.h"

#include <malloc.h>

namespace dtrain {

void keep_heap_warm() {
#if !defined(__SANITIZE_THREAD__)
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
#endif
}

}  // namespace dtrain

#include "base/huge_pages.h"

#include <cstdint>
#include <fstream>

#include "base/settings.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace dtrain {

size_t advise_huge_pages(void* p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t last = (begin + n) / kHugePageBytes * kHugePageBytes;
  if (p == nullptr || last <= first) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) != 0) return 0;
  return last - first;
#else
  (void)p;
  (void)n;
  return 0;
#endif
}

bool huge_pages_wanted() {
  // Read on the first large allocation. Settings::process() allocates only small strings and
  // maps, so it cannot come back here.
  static const bool wanted = Settings::process().flag("DTRAIN_HUGE_PAGES");
  return wanted;
}

namespace {
// The bracketed word of a sysfs choice ("always [madvise] never"), or "absent".
std::string chosen_word(const char* path) {
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line)) return "absent";
  const auto a = line.find('['), b = line.find(']');
  return a == std::string::npos || b == std::string::npos || b < a ? "absent" : line.substr(a + 1, b - a - 1);
}
}  // namespace

std::string transparent_huge_pages_mode() { return chosen_word("/sys/kernel/mm/transparent_hugepage/enabled"); }

bool transparent_huge_pages_given(const std::string& mode) { return mode == "always" || mode == "madvise"; }

std::string shared_huge_pages_mode() { return chosen_word("/sys/kernel/mm/transparent_hugepage/shmem_enabled"); }

bool shared_huge_pages_given(const std::string& mode) {
  return mode == "always" || mode == "within_size" || mode == "advise" || mode == "force";
}

}  // namespace dtrain

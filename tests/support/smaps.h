// tests/support/smaps.h — what the kernel records about this process's mappings.
//
// advised_huge(addr): whether the mapping that holds `addr` carries madvise(MADV_HUGEPAGE)
// (VmFlags "hg" in /proc/self/smaps); false where the file or the mapping is absent.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace dtrain::testing {

inline bool advised_huge(const void* addr) {
  std::ifstream f("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return (line + " ").find(" hg ") != std::string::npos;
  }
  return false;
}

}  // namespace dtrain::testing

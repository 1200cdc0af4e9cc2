// coll/bytes.h — memcpy/memmove that accept a zero length with null pointers.
//
// Collectives meet empty blocks all the time (count 0, counts smaller than the group), and a
// zero-length std::memcpy with a null pointer is undefined behaviour (UBSan reports it).
#pragma once

#include <cstddef>
#include <cstring>

namespace dtrain {

inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}
// For out-of-place calls that may be in place: nothing to do when dst is src.
inline void copy_bytes_if_apart(void* dst, const void* src, size_t n) {
  if (n && dst != src) std::memmove(dst, src, n);
}

}  // namespace dtrain

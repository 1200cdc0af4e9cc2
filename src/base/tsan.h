// base/tsan.h — happens-before annotations for ThreadSanitizer across shared-memory mappings.
//
// TSan tracks synchronisation by address. When ranks are threads of one process, each still
// maps a shared segment at its own address, so an atomic release in one mapping and the
// matching acquire in another order nothing in TSan's eyes, and data handed over through the
// segment looks racy. Code that publishes through such memory also calls
// tsan_release(tsan_key(id, sub)) before publishing and tsan_acquire(tsan_key(id, sub))
// after observing, with (id, sub) the same in every mapping (e.g. a random segment id stored
// in the segment, and a direction). Outside TSan builds all of this compiles to nothing.
// The key table is the only process-wide object it needs; it exists only in TSan builds and
// holds no data (its addresses are just names for TSan's sync clocks).
#pragma once

#include <cstdint>

namespace dtrain {

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline char tsan_key_table[4096];
inline void* tsan_key(uint64_t id, uint64_t sub) {
  uint64_t h = id ^ (sub * 0x9E3779B97F4A7C15ull);
  return &tsan_key_table[(h ^ (h >> 29)) % sizeof tsan_key_table];
}
inline void tsan_release(void* key) { __tsan_release(key); }
inline void tsan_acquire(void* key) { __tsan_acquire(key); }
#else
inline void* tsan_key(uint64_t, uint64_t) { return nullptr; }
inline void tsan_release(void*) {}
inline void tsan_acquire(void*) {}
#endif

}  // namespace dtrain

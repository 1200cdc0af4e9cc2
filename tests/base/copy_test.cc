// base/copy.h: copy_memory is memcpy, byte for byte, at every size and relative alignment,
// and writes nothing outside its destination.
#include "base/copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace dtrain {
namespace {

// Copies n bytes from offset so of a patterned source to offset d of a destination filled
// with a guard value, and checks the copy and both guards. Both start on a page, so the
// offsets set the distance modulo 4 KiB that decides the path.
void check_copy(size_t n, size_t so, size_t d) {
  constexpr uint8_t kGuard = 0xA5;
  std::vector<uint8_t> src(n + 4096 + 128), dst(n + 4096 + 192, kGuard);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  auto page = [](std::vector<uint8_t>& v) {
    auto at = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + (4096 - at % 4096) % 4096;
  };
  uint8_t* s = page(src) + so;
  uint8_t* t = page(dst) + d;
  ASSERT_LE(s + n, src.data() + src.size());
  ASSERT_LE(t + n, dst.data() + dst.size());
  copy_memory(t, s, n);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(t[i], s[i]) << "n=" << n << " src offset " << so << " dst offset " << d << " byte " << i;
  for (uint8_t* g = dst.data(); g < t; ++g) ASSERT_EQ(*g, kGuard) << "wrote before dst, n=" << n;
  for (uint8_t* g = t + n; g < dst.data() + dst.size(); ++g) ASSERT_EQ(*g, kGuard) << "wrote past dst, n=" << n;
}

TEST(CopyMemory, EqualsMemcpyAtEverySizeAndAlignmentAroundTheLoop) {
  // Sizes around the loop's threshold and its 32/128-byte steps; offsets that take the loop
  // (destination later in its line) and that do not.
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{2079},
                   size_t{2111}, size_t{2175}, size_t{4096}, size_t{4097}, size_t{5000}, size_t{65536 + 17}})
    for (size_t so : {0, 1, 16, 31, 48, 63})
      for (size_t d : {0, 1, 8, 16, 17, 32, 33, 47, 63, 64, 80, 126}) check_copy(n, so, d);
}

TEST(CopyMemory, TakesTheLoopOnlyWhereMemcpyMayCrawl) {
  alignas(4096) static char a[3 * 4096], b[3 * 4096];
#if defined(__x86_64__)
  EXPECT_TRUE(copy_takes_loop(b + 16, a, 4096));  // 16 bytes past the source, modulo 4 KiB
  EXPECT_TRUE(copy_takes_loop(b + 63, a, 2048));
  EXPECT_TRUE(copy_takes_loop(b + 4096 + 1, a + 4096, 8192));
  EXPECT_TRUE(copy_takes_loop(a + 4096 + 20, b + 4096 + 4090, 4096));  // wraps past the page
#endif
  EXPECT_FALSE(copy_takes_loop(b, a + 16, 4096));  // before it: memcpy is fast there
  EXPECT_FALSE(copy_takes_loop(b + 8, a + 8, 4096));
  EXPECT_FALSE(copy_takes_loop(b + 64, a, 4096));
  EXPECT_FALSE(copy_takes_loop(b + 16, a, 2047));  // below rep movsb's sizes
}

TEST(CopyMemory, NullPointersWithZeroBytesAreAllowed) {
  copy_memory(nullptr, nullptr, 0);
  std::vector<float> x{1, 2, 3}, y(3);
  copy_elements(y.data(), x.data(), x.size());
  EXPECT_EQ(y, x);
}

}  // namespace
}  // namespace dtrain

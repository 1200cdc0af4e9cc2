// Huge-page advice: the whole 2 MiB pages inside a block, and only those, are advised, and the
// allocator's large blocks (base/large_blocks.h) are advised (read back from the kernel's own
// record of each mapping, /proc/self/smaps).
#include "base/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/heap_stats.h"
#include "base/large_blocks.h"
#include "support/smaps.h"

namespace dtrain {
namespace {

using testing::advised_huge;

// Skips where the kernel has no transparent huge pages or refuses every advice.
#define SKIP_WITHOUT_THP()                                                                      \
  do {                                                                                          \
    const std::string mode = transparent_huge_pages_mode();                                     \
    if (mode == "absent" || mode == "never")                                                    \
      GTEST_SKIP() << "transparent huge pages are " << mode                                     \
                   << " on this kernel (/sys/kernel/mm/transparent_hugepage/enabled)";          \
  } while (0)

struct Mapping {
  explicit Mapping(size_t n) : bytes(n) {
    p = static_cast<char*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  }
  ~Mapping() {
    if (p != MAP_FAILED) ::munmap(p, bytes);
  }
  size_t bytes;
  char* p;
};

TEST(HugePages, OnlyTheWholePagesInsideABlockAreAdvised) {
  SKIP_WITHOUT_THP();
  Mapping m(5 * kHugePageBytes);
  ASSERT_NE(m.p, MAP_FAILED);
  // A block that starts 4 KiB past a 2 MiB boundary, inside the mapping, 3 pages long:
  // it holds exactly two whole pages.
  char* first = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(m.p) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  char* block = first + 4096;
  EXPECT_EQ(advise_huge_pages(block, 3 * kHugePageBytes), 2 * kHugePageBytes);
  EXPECT_FALSE(advised_huge(block)) << "the part before the first whole page was advised";
  EXPECT_TRUE(advised_huge(first + kHugePageBytes));
  EXPECT_TRUE(advised_huge(first + 3 * kHugePageBytes - 1));
  EXPECT_FALSE(advised_huge(first + 3 * kHugePageBytes)) << "the part after the last whole page was advised";
}

TEST(HugePages, BlocksWithoutAWholePageAreLeftAlone) {
  Mapping m(3 * kHugePageBytes);
  ASSERT_NE(m.p, MAP_FAILED);
  char* first = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(m.p) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  EXPECT_EQ(advise_huge_pages(first + 1, kHugePageBytes), 0u);  // straddles a boundary, holds no whole page
  EXPECT_EQ(advise_huge_pages(first, kHugePageBytes - 1), 0u);
  EXPECT_EQ(advise_huge_pages(nullptr, 4 * kHugePageBytes), 0u);
  EXPECT_FALSE(advised_huge(first));
}

TEST(HugePages, LargeAllocationsAreAdvisedAndCountTheSameBytes) {
  SKIP_WITHOUT_THP();
  if (!kLargeBlocksInThisBuild) GTEST_SKIP() << "a sanitizer build: large blocks come from malloc, unadvised";
  ASSERT_TRUE(huge_pages_wanted()) << "the tests run with DTRAIN_HUGE_PAGES unset (default on)";
  const size_t n = 8 * kHugePageBytes;
  const int64_t before = heap_stats().live;
  auto big = std::make_unique<std::vector<char>>(n);
  const int64_t counted = heap_stats().live - before;
  EXPECT_GE(counted, static_cast<int64_t>(n));
  EXPECT_LT(counted, static_cast<int64_t>(n + (64 << 10))) << "the advice must not round the block up";
  const uintptr_t a = reinterpret_cast<uintptr_t>(big->data());
  const char* whole = reinterpret_cast<const char*>((a + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  EXPECT_TRUE(advised_huge(whole));
  EXPECT_TRUE(advised_huge(big->data() + n - kHugePageBytes - 1));
}

TEST(HugePages, TheBenchmarksLineSaysWhereLargeBuffersLive) {
  const std::string line = large_blocks_description();
  if (!kLargeBlocksInThisBuild) {
    EXPECT_NE(line.find("malloc's (a sanitizer build)"), std::string::npos) << line;
    return;
  }
  const std::string mode = transparent_huge_pages_mode();
  EXPECT_NE(line.find("(the kernel's THP: " + mode + ")"), std::string::npos) << line;
  const bool huge = mode == "always" || mode == "madvise";
  EXPECT_EQ(line.find("in transparent huge pages") != std::string::npos, huge) << line;
}

}  // namespace
}  // namespace dtrain

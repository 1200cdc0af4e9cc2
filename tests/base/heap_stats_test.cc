// The heap counters: allocations through new (and so std::vector, tensors) move live and peak.
#include "base/heap_stats.h"

#include <gtest/gtest.h>

#include <memory>
#include <new>
#include <vector>

namespace dtrain {
namespace {

TEST(HeapStats, CountsAllocationsAndTheirRelease) {
  const int64_t n = 8 << 20;
  HeapStats before = heap_stats();
  auto v = std::make_unique<std::vector<char>>(static_cast<size_t>(n));
  HeapStats during = heap_stats();
  EXPECT_GE(during.live - before.live, n);
  EXPECT_LT(during.live - before.live, n + (1 << 16));
  v.reset();
  HeapStats after = heap_stats();
  EXPECT_LT(after.live, during.live - n + (1 << 16));
  EXPECT_GE(after.peak, during.live);
}

TEST(HeapStats, PeakIsAHighWaterMarkUntilReset) {
  heap_reset_peak();
  const int64_t base = heap_stats().live;
  {
    void* p = ::operator new(4 << 20, std::align_val_t{64});  // the form tensors use
    ::operator delete(p, std::align_val_t{64});
  }
  HeapStats s = heap_stats();
  EXPECT_GE(s.peak - base, 4 << 20);
  EXPECT_LT(s.live - base, 1 << 16);
  heap_reset_peak();
  EXPECT_EQ(heap_stats().peak, heap_stats().live);
}

}  // namespace
}  // namespace dtrain

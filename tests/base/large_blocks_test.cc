// The allocator's large blocks: on 2 MiB boundaries, advised, counted as their length, kept and
// handed back to a request of the same length, bounded, and never confused with malloc's.
#include "base/large_blocks.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <thread>
#include <vector>

#include "base/heap_stats.h"
#include "base/huge_pages.h"

namespace dtrain {
namespace {

#define SKIP_WITHOUT_LARGE_BLOCKS()                                                                 \
  do {                                                                                              \
    if (!kLargeBlocksInThisBuild) GTEST_SKIP() << "a sanitizer build: large blocks come from malloc"; \
  } while (0)

bool mapped(const void* p) {
  return ::msync(const_cast<void*>(p), 4096, MS_ASYNC) == 0 || errno != ENOMEM;
}

TEST(LargeBlocks, SmallRequestsAndWideAlignmentsAreLeftToMalloc) {
  EXPECT_EQ(large_block_allocate(kHugePageBytes - 1, 64), nullptr);
  EXPECT_EQ(large_block_allocate(4 * kHugePageBytes, 2 * kHugePageBytes), nullptr);
  void* m = std::malloc(4 * kHugePageBytes);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(large_block_release(m), 0u);  // malloc's: not taken, still malloc's to free
  std::free(m);
  EXPECT_EQ(large_block_release(nullptr), 0u);
}

TEST(LargeBlocks, BlocksStartOnHugePageBoundariesAndAreCountedAsTheirLength) {
  SKIP_WITHOUT_LARGE_BLOCKS();
  const size_t n = 3 * kHugePageBytes + 100;
  const int64_t before = heap_stats().live;
  char* p = static_cast<char*>(::operator new(n));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  const int64_t counted = heap_stats().live - before;  // gtest's own small allocations aside
  EXPECT_NEAR(static_cast<double>(counted), static_cast<double>(3 * kHugePageBytes + 4096), 16 << 10);
  std::memset(p, 7, n);  // every byte of it is writable
  EXPECT_EQ(p[n - 1], 7);
  const int64_t held = heap_stats().live;
  ::operator delete(p);
  EXPECT_EQ(held - heap_stats().live, static_cast<int64_t>(3 * kHugePageBytes + 4096));
}

TEST(LargeBlocks, AFreedBlockIsHandedBackToTheSameLengthOnly) {
  SKIP_WITHOUT_LARGE_BLOCKS();
  const size_t n = 2 * kHugePageBytes;
  void* a = large_block_allocate(n, 64);
  ASSERT_NE(a, nullptr);
  static_cast<char*>(a)[0] = 42;
  EXPECT_EQ(large_block_release(a), n);
  EXPECT_TRUE(mapped(a)) << "a freed block of this size is kept";
  void* other = large_block_allocate(n + 4096, 64);  // another length: a new block
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, a);
  void* again = large_block_allocate(n - 100, 64);  // the same length once rounded to 4 KiB
  EXPECT_EQ(again, a);
  EXPECT_EQ(static_cast<char*>(again)[0], 42) << "handed back as it was, not mapped afresh";
  EXPECT_EQ(large_block_release(again), n);
  EXPECT_EQ(large_block_release(again), 0u) << "a block is released once";
  EXPECT_EQ(large_block_release(other), n + 4096);
}

TEST(LargeBlocks, KeptBlocksAreBoundedOldestUnmappedFirst) {
  SKIP_WITHOUT_LARGE_BLOCKS();
  const size_t n = kHugePageBytes + 4096 * 3;  // a length no other test uses
  std::vector<void*> blocks;
  for (int i = 0; i < kMaxCachedBlocks + 2; ++i) {
    blocks.push_back(large_block_allocate(n, 64));
    ASSERT_NE(blocks.back(), nullptr);
  }
  for (void* b : blocks) EXPECT_EQ(large_block_release(b), n);
  EXPECT_FALSE(mapped(blocks[0])) << "the oldest freed was unmapped once more than the bound were kept";
  EXPECT_FALSE(mapped(blocks[1]));
  EXPECT_TRUE(mapped(blocks.back()));
  // A block longer than the bound on one kept block is unmapped as soon as it is freed.
  void* huge = large_block_allocate(kMaxKeptBlockBytes + kHugePageBytes, 64);
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(large_block_release(huge), kMaxKeptBlockBytes + kHugePageBytes);
  EXPECT_FALSE(mapped(huge));
  // Take the kept ones back so later tests start from a known cache.
  for (int i = 0; i < kMaxCachedBlocks; ++i) EXPECT_EQ(large_block_release(large_block_allocate(n, 64)), n);
}

// Threads allocating and freeing blocks of a few lengths at once: each block is its own (the
// pattern one thread writes is what it reads back) and every byte counted is given back.
TEST(LargeBlocks, ThreadsAtOnceGetBlocksOfTheirOwn) {
  SKIP_WITHOUT_LARGE_BLOCKS();
  const int64_t before = heap_stats().live;
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 40; ++i) {
        const size_t n = kHugePageBytes + static_cast<size_t>((t + i) % 3) * 4096;
        unsigned char* p = static_cast<unsigned char*>(::operator new(n));
        const unsigned char mark = static_cast<unsigned char>(16 * t + i % 16);
        std::memset(p, mark, n);
        std::this_thread::yield();
        for (size_t k = 0; k < n; k += 4096) wrong[t] += p[k] != mark;
        ::operator delete(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t << " found another's bytes in its block";
  EXPECT_NEAR(static_cast<double>(heap_stats().live - before), 0.0, 16 << 10);
}

// fork() while another thread allocates and frees large blocks: every child can still take
// and give back a block (a child that found the registry's lock held forever would be ended
// by its alarm and fail the check).
TEST(LargeBlocks, AForkWhileAnotherThreadAllocatesLeavesTheChildABlock) {
  SKIP_WITHOUT_LARGE_BLOCKS();
  // The first large block initialises the registry and reads the setting (static locals); a
  // fork() racing that first use could leave the child waiting on an initialisation no thread
  // of it will finish, so it happens here before the other thread starts (as a program's own
  // first large allocation normally precedes any fork that matters).
  ASSERT_EQ(large_block_release(large_block_allocate(kHugePageBytes, 64)), kHugePageBytes);
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    for (int i = 0; i < 200000 && !stop.load(); ++i) large_block_release(large_block_allocate(kHugePageBytes, 64));
  });
  int failed = 0;
  for (int k = 0; k < 20; ++k) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::alarm(20);
      void* b = large_block_allocate(2 * kHugePageBytes, 64);
      const bool ok = b != nullptr && large_block_release(b) == 2 * kHugePageBytes;
      ::_exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  stop = true;
  churn.join();
  EXPECT_EQ(failed, 0) << "children that could not take a large block after fork()";
}

// fork() while another thread makes the process's first decision (it reads the settings, the
// first use of a function-local static): no child waits forever. A child forked mid-decision
// has large blocks off (its request returns nullptr, and malloc takes it); one forked before
// the decision makes its own, one forked after inherits it, and both take and give back a
// block. Run alone (ctest runs each test in a process of its own), nothing here has decided
// before the thread's first request.
TEST(LargeBlocks, AForkDuringTheFirstDecisionNeverLeavesTheChildWaiting) {
  SKIP_WITHOUT_LARGE_BLOCKS();
  std::atomic<bool> stop{false};
  std::thread first([&] {
    for (int i = 0; i < 200000 && !stop.load(); ++i) large_block_release(large_block_allocate(kHugePageBytes, 64));
  });
  // Exit codes: 0 took and gave back a block, 2 large blocks off in this child, 1 wrong length.
  auto child_takes_a_block = [] {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::alarm(20);
      void* b = large_block_allocate(2 * kHugePageBytes, 64);
      ::_exit(b == nullptr ? 2 : large_block_release(b) == 2 * kHugePageBytes ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;  // -1: ended by its alarm
    return WEXITSTATUS(status);
  };
  int waited_or_wrong = 0;
  for (int k = 0; k < 20; ++k) {
    const int rc = child_takes_a_block();
    waited_or_wrong += rc != 0 && rc != 2;
  }
  stop = true;
  first.join();
  EXPECT_EQ(waited_or_wrong, 0) << "children that waited until their alarm or gave back a wrong length";
  EXPECT_EQ(child_takes_a_block(), 0) << "a child forked after the decision takes and gives back a block";
}

}  // namespace
}  // namespace dtrain

#include "base/large_blocks.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

#include "base/huge_pages.h"

#if defined(__linux__)
#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#endif

namespace dtrain {
namespace {

struct Block {
  uintptr_t addr = 0;
  size_t bytes = 0;  // the mapping's length, large_block_length of the request
};

// The live blocks (unordered) and the kept ones (oldest first). Fixed arrays: this runs inside
// operator new, so it may not allocate.
struct Registry {
  std::mutex mu;
  Block live[kMaxLiveBlocks];
  int live_count = 0;
  Block kept[kMaxCachedBlocks];
  int kept_count = 0;
  size_t kept_bytes = 0;
};

// Constant-initialised (no first-use guard a fork could catch half done), and never destroyed:
// blocks may be freed by other objects' destructors at exit.
union RegistryStorage {
  Registry r;
  constexpr RegistryStorage() : r() {}
  ~RegistryStorage() {}
};
constinit RegistryStorage g_registry;
Registry& registry() { return g_registry.r; }

// Whether this process takes large blocks (taken_here()): kUndecided, kDeciding (a thread is
// reading the settings for the first decision), kYes or kNo.
enum Taken : int { kUndecided, kDeciding, kYes, kNo };
constinit std::atomic<int> g_taken{kUndecided};

// A fork while another thread holds the mutex would leave the child's copy locked forever:
// the fork waits for it, as glibc's malloc does for its own locks. A fork while another thread
// is making the first decision (it reads the settings, whose first use initialises a
// function-local static that thread may be inside) leaves the child with large blocks off, so
// the child never waits on an initialisation none of its threads will finish; a child forked
// before any decision makes its own. Registered while the module loads.
bool register_fork_handlers() {
#if defined(__linux__)
  ::pthread_atfork([] { registry().mu.lock(); }, [] { registry().mu.unlock(); },
                   [] {
                     registry().mu.unlock();
                     int deciding = kDeciding;
                     g_taken.compare_exchange_strong(deciding, kNo);
                   });
#endif
  return true;
}
[[maybe_unused]] const bool g_fork_handlers = register_fork_handlers();

#if defined(__linux__)
// Maps `bytes` on a 2 MiB boundary: a mapping 2 MiB longer, less its head and tail.
void* map_block(size_t bytes) {
  const size_t over = bytes + kHugePageBytes;
  void* m = ::mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t start = (base + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (start > base) ::munmap(m, start - base);
  const uintptr_t end = start + bytes;
  if (base + over > end) ::munmap(reinterpret_cast<void*>(end), base + over - end);
  advise_huge_pages(reinterpret_cast<void*>(start), bytes);
  return reinterpret_cast<void*>(start);
}
void unmap_block(const Block& b) { ::munmap(reinterpret_cast<void*>(b.addr), b.bytes); }
#else
void* map_block(size_t) { return nullptr; }
void unmap_block(const Block&) {}
#endif

void drop_kept(Registry& r, int i) {
  r.kept_bytes -= r.kept[i].bytes;
  for (int j = i + 1; j < r.kept_count; ++j) r.kept[j - 1] = r.kept[j];
  --r.kept_count;
}

// Whether the operator new this file's module defines (base/heap_stats.cc) is the one the
// whole process calls. In a program (dtrain, the tests) it is. In a Python extension module,
// loaded with its symbols kept local, the process's is another library's: memory this file
// maps could then be freed by that library's operator delete, which hands it to free(). So
// large blocks are taken only where the answer is yes, and nowhere else.
bool serves_the_process() {
#if defined(__linux__)
  Dl_info global{}, here{};
  void* process_new = ::dlsym(RTLD_DEFAULT, "_Znwm");
  return process_new && ::dladdr(process_new, &global) &&
         ::dladdr(reinterpret_cast<void*>(&large_block_allocate), &here) && global.dli_fbase == here.dli_fbase;
#else
  return false;
#endif
}

// A malformed DTRAIN_HUGE_PAGES is an error where the dtrain command starts (cli/commands.cc
// reads it first); inside operator new it leaves large blocks off rather than throw from an
// allocation that may not.
bool decide_taken() {
  try {
    return kLargeBlocksInThisBuild && huge_pages_wanted() && serves_the_process();
  } catch (...) {
    return false;
  }
}

// Threads racing the first call each decide (alike); the first to finish stores the answer.
bool taken_here() {
  const int t = g_taken.load(std::memory_order_acquire);
  if (t == kYes || t == kNo) return t == kYes;
  int undecided = kUndecided;
  g_taken.compare_exchange_strong(undecided, kDeciding, std::memory_order_acq_rel);
  const bool yes = decide_taken();
  int deciding = kDeciding;
  g_taken.compare_exchange_strong(deciding, yes ? kYes : kNo, std::memory_order_acq_rel);
  return g_taken.load(std::memory_order_acquire) == kYes;
}

}  // namespace

void* large_block_allocate(size_t n, size_t align) {
  if (n < kHugePageBytes || align > kHugePageBytes || !taken_here()) return nullptr;
  const size_t bytes = large_block_length(n);
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.live_count == kMaxLiveBlocks) return nullptr;
    for (int i = r.kept_count - 1; i >= 0; --i) {  // the most recently freed of this length
      if (r.kept[i].bytes != bytes) continue;
      const Block b = r.kept[i];
      drop_kept(r, i);
      r.live[r.live_count++] = b;
      return reinterpret_cast<void*>(b.addr);
    }
  }
  void* p = map_block(bytes);
  if (!p) return nullptr;
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.live_count == kMaxLiveBlocks) {  // filled while this one was mapped
    unmap_block(Block{reinterpret_cast<uintptr_t>(p), bytes});
    return nullptr;
  }
  r.live[r.live_count++] = Block{reinterpret_cast<uintptr_t>(p), bytes};
  return p;
}

bool large_blocks_taken() { return taken_here(); }

std::string large_blocks_description() {
  if (!large_blocks_taken()) {
    const char* why = !kLargeBlocksInThisBuild   ? "a sanitizer build"
                      : !huge_pages_wanted()   ? "DTRAIN_HUGE_PAGES=0"
                                               : "this module's operator new is not the process's";
    return std::string("buffers of 2 MiB or more: malloc's (") + why + ")";
  }
  const std::string mode = transparent_huge_pages_mode();
  const bool huge = transparent_huge_pages_given(mode);
  return "buffers of 2 MiB or more: dtrain's large blocks on 2 MiB boundaries, " +
         std::string(huge ? "in transparent huge pages" : "in small pages") + " (the kernel's THP: " + mode + ")";
}

size_t large_block_release(void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (!kLargeBlocksInThisBuild || a == 0 || a % kHugePageBytes != 0) return 0;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  int i = 0;
  while (i < r.live_count && r.live[i].addr != a) ++i;
  if (i == r.live_count) return 0;
  const Block b = r.live[i];
  r.live[i] = r.live[--r.live_count];
  if (b.bytes > kMaxKeptBlockBytes) {
    unmap_block(b);
    return b.bytes;
  }
  while (r.kept_count == kMaxCachedBlocks || r.kept_bytes + b.bytes > kMaxCachedBytes) {
    unmap_block(r.kept[0]);
    drop_kept(r, 0);
  }
  r.kept[r.kept_count++] = b;
  r.kept_bytes += b.bytes;
  return b.bytes;
}

}  // namespace dtrain

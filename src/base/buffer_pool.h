// base/buffer_pool.h — byte buffers kept warm between uses.
//
// Why: the communication layers need multi-megabyte scratch for a moment at a time (a
// reduction's receive window, an early message). A fresh allocation each time paid its page
// faults — and, as a std::vector, a zero fill — on every call, as much as the copies it
// served. A pool hands back buffers whose pages are already mapped.
//
// Contract
// - take(n) returns a buffer of at least n bytes: the first cached one large enough, else a
//   new, uninitialised allocation. The contents are unspecified.
// - give(b) returns a buffer. It is cached while the pool's cached total stays within
//   max_bytes and it is at least 4 KiB (smaller ones cost nothing to allocate); otherwise it
//   is freed.
// - Lease takes a buffer on construction and gives it back on destruction.
// Thread-safety: take and give may be called from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace dtrain {

class BufferPool {
 public:
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t capacity = 0;
    char* get() const { return data.get(); }
  };

  explicit BufferPool(size_t max_bytes) : max_bytes_(max_bytes) {}

  Buffer take(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = cached_.begin(); it != cached_.end(); ++it) {
        if (it->capacity < n) continue;
        Buffer b = std::move(*it);
        cached_.erase(it);
        cached_bytes_ -= b.capacity;
        return b;
      }
    }
    Buffer b;
    b.data.reset(n ? new char[n] : nullptr);
    b.capacity = n;
    return b;
  }

  void give(Buffer b) {
    if (!b.data || b.capacity < 4096) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_bytes_ + b.capacity > max_bytes_) return;
    cached_bytes_ += b.capacity;
    cached_.push_back(std::move(b));
  }

  class Lease {
   public:
    Lease(BufferPool& pool, size_t n) : pool_(pool), buf_(pool.take(n)) {}
    ~Lease() { pool_.give(std::move(buf_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    char* data() const { return buf_.get(); }

   private:
    BufferPool& pool_;
    Buffer buf_;
  };

 private:
  const size_t max_bytes_;
  std::mutex mu_;
  std::vector<Buffer> cached_;
  size_t cached_bytes_ = 0;
};

}  // namespace dtrain

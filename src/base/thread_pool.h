// base/thread_pool.h — a small fixed pool for data-parallel loops.
//
// Contract
// - ThreadPool(n) starts n-1 workers; the calling thread is the n-th, so ThreadPool(1) runs
//   everything inline with no threads at all.
// - parallel_for(begin, end, grain, fn) calls fn(lo, hi) on disjoint ranges covering
//   [begin, end), each at least `grain` long (except the last), and returns when all are
//   done. The split depends only on (end-begin, grain, size()), never on timing, so a caller
//   that reduces per-range results in range order gets the same bits every run.
// - The first exception thrown by fn is re-thrown in the caller after all ranges finish.
// - Not re-entrant: fn must not call parallel_for on the same pool. One caller at a time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dtrain {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Ranges: at most size() chunks of near-equal length, none shorter than grain.
  void parallel_for(int64_t begin, int64_t end, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);
  void run_chunk(int chunk);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  // The current job.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0;
  int chunks_ = 0;
  int pending_ = 0;
  std::exception_ptr error_;
};

}  // namespace dtrain

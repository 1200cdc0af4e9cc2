// coll/work.h — asynchronous collectives: a Work handle and a per-communicator progress thread.
//
// Contract
// - ProgressQueue(comm) starts one thread that runs submitted collectives on `comm`, one at a
//   time, in submission order — so if every rank submits the same sequence, every rank runs
//   the same sequence, while the caller computes. Destruction finishes the queued work, then
//   joins. Do not issue blocking collectives on the same communicator while work is queued
//   (their order relative to the queue would differ between ranks).
// - submit(name, fn) returns a Work at once. Work::wait(timeout) blocks until the collective
//   finished and re-throws its error. Work submitted as `bounded` (a collective, which its
//   own timeout ends: the typed helpers below) may be run by its waiter ("steal on wait"):
//   a wait on it while it is next in line and the thread is idle runs it on the waiting
//   thread. The order is the same (it is the next item), and the waiter, blocked anyway,
//   saves the two thread hand-offs (the progress thread's wake-up, then the waiter's), which
//   cost tens of microseconds on a VM — more than a small collective. Only a wait that would
//   outlast the communicator's timeout steals (the default, kForever, or at least that long),
//   so a shorter wait still ends on time. Work nobody waits for runs on the progress thread,
//   while the caller computes. A wait that runs out throws Timeout naming the work
//   (the collective keeps running). The timeout defaults to twice the communicator's plus 2 s
//   (kDefaultTimeout, base/clock.h), so the collective's own timeout and diagnosis come first; pass kForever to wait without bound. done() never blocks; error() is the
//   stored exception (or null). A failed collective does not stop later ones from being attempted; they usually
//   fail fast with the same PeerFailure.
// - Typed helpers (allreduce_async, ...) capture pointers: buffers must stay valid and
//   untouched until the Work is done.
// Thread-safety: submit() and Work's methods may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "coll/communicator.h"
#include "coll/types.h"

namespace dtrain {

class Work {
 public:
  Work() = default;
  void wait(double timeout_s = kDefaultTimeout);
  bool done() const;
  std::exception_ptr error() const;
  bool valid() const { return state_ != nullptr; }

 private:
  friend class ProgressQueue;
  struct Core;
  struct State {
    std::string name;
    double default_timeout_s = kForever;  // the queue's communicator's timeout
    mutable std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr error;
    std::weak_ptr<Core> queue;  // for steal on wait; gone once the queue is
    bool bounded = false;       // submitted as bounded: its waiter may run it
  };
  using Item = std::pair<std::shared_ptr<State>, std::function<void(Communicator&)>>;
  // The queue's state, shared with its Works so a waiter can take its item.
  struct Core {
    explicit Core(Communicator& c) : comm(c) {}
    Communicator& comm;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Item> items;
    bool busy = false;  // an item is running (on the thread or on a stealing waiter)
    bool stop = false;
  };
  static void run(Core& core, Item& item);  // runs it, marks it done, frees the queue
  explicit Work(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

class ProgressQueue {
 public:
  explicit ProgressQueue(Communicator& comm);
  ~ProgressQueue();
  ProgressQueue(const ProgressQueue&) = delete;
  ProgressQueue& operator=(const ProgressQueue&) = delete;

  Communicator& comm() { return core_->comm; }
  // bounded: fn ends within the communicator's timeout (a collective), so a waiter may run it.
  Work submit(std::string name, std::function<void(Communicator&)> fn, bool bounded = false);

 private:
  void loop();
  std::shared_ptr<Work::Core> core_;
  std::thread thread_;
};

Work allreduce_async(ProgressQueue& q, void* buf, size_t count, DType t, ReduceOp op, const AllreduceOptions& opts = {});
Work broadcast_async(ProgressQueue& q, void* buf, size_t count, DType t, int root, const BroadcastOptions& opts = {});
Work allgather_async(ProgressQueue& q, const void* send, void* recv, size_t count, DType t,
                     const AllgatherOptions& opts = {});
Work reduce_scatter_async(ProgressQueue& q, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                          const ReduceScatterOptions& opts = {});

}  // namespace dtrain

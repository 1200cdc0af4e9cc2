#include "coll/work.h"

#include <chrono>

#include "base/error.h"
#include "coll/collectives.h"

namespace dtrain {

void Work::wait(double timeout_s) {
  DT_CHECK(state_, InvalidArgument, "wait on an empty Work");
  std::unique_lock<std::mutex> lock(state_->mu);
  auto ready = [&] { return state_->done; };
  // By default wait twice the communicator's timeout plus 2 s: the collective inside times out
  // first and its diagnosis (which rank never arrived, a lost network) is what the caller sees.
  const bool by_default = timeout_s == kDefaultTimeout;
  timeout_s = resolve_timeout(timeout_s, state_->default_timeout_s);
  if (by_default && timeout_s >= 0) timeout_s = 2 * timeout_s + 2;
  if (timeout_s < 0) {
    state_->cv.wait(lock, ready);
  } else if (!state_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), ready)) {
    DT_THROW(Timeout, "work '" << state_->name << "' did not finish within " << timeout_s << " s");
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::done() const {
  if (!state_) return false;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

std::exception_ptr Work::error() const {
  if (!state_) return nullptr;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

ProgressQueue::ProgressQueue(Communicator& comm) : comm_(comm), thread_([this] { loop(); }) {}

ProgressQueue::~ProgressQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Work ProgressQueue::submit(std::string name, std::function<void(Communicator&)> fn) {
  auto state = std::make_shared<Work::State>();
  state->name = std::move(name);
  state->default_timeout_s = comm_.timeout();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(state, std::move(fn));
  }
  cv_.notify_one();
  return Work(state);
}

void ProgressQueue::loop() {
  for (;;) {
    std::pair<std::shared_ptr<Work::State>, std::function<void(Communicator&)>> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      item.second(comm_);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(item.first->mu);
      item.first->done = true;
      item.first->error = error;
    }
    item.first->cv.notify_all();
  }
}

Work allreduce_async(ProgressQueue& q, void* buf, size_t count, DType t, ReduceOp op, const AllreduceOptions& opts) {
  return q.submit("allreduce", [=](Communicator& c) { allreduce(c, buf, count, t, op, opts); });
}
Work broadcast_async(ProgressQueue& q, void* buf, size_t count, DType t, int root, const BroadcastOptions& opts) {
  return q.submit("broadcast", [=](Communicator& c) { broadcast(c, buf, count, t, root, opts); });
}
Work allgather_async(ProgressQueue& q, const void* send, void* recv, size_t count, DType t,
                     const AllgatherOptions& opts) {
  return q.submit("allgather", [=](Communicator& c) { allgather(c, send, recv, count, t, opts); });
}
Work reduce_scatter_async(ProgressQueue& q, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                          const ReduceScatterOptions& opts) {
  return q.submit("reduce_scatter", [=](Communicator& c) { reduce_scatter(c, send, recv, count, t, op, opts); });
}

}  // namespace dtrain

#include "coll/work.h"

#include <chrono>

#include "base/error.h"
#include "coll/collectives.h"

namespace dtrain {

void Work::wait(double timeout_s) {
  DT_CHECK(state_, InvalidArgument, "wait on an empty Work");
  // Steal on wait (see the contract): the next item, with nothing running, runs here when it
  // is bounded and this wait would outlast the communicator's timeout anyway.
  const bool long_wait = timeout_s == kDefaultTimeout || timeout_s < 0 ||
                         (state_->default_timeout_s >= 0 && timeout_s >= state_->default_timeout_s);
  auto core = state_->bounded && long_wait ? state_->queue.lock() : nullptr;
  if (core) {
    std::unique_lock<std::mutex> lock(core->mu);
    if (!core->busy && !core->items.empty() && core->items.front().first == state_) {
      Item item = std::move(core->items.front());
      core->items.pop_front();
      core->busy = true;
      lock.unlock();
      run(*core, item);
    }
  }
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

void Work::run(Core& core, Item& item) {
  std::exception_ptr error;
  try {
    item.second(core.comm);
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(item.first->mu);
    item.first->done = true;
    item.first->error = error;
  }
  item.first->cv.notify_all();
  {
    std::lock_guard<std::mutex> lock(core.mu);
    core.busy = false;
  }
  core.cv.notify_one();  // the thread (the only one waiting on it) may take the next item or stop
}

ProgressQueue::ProgressQueue(Communicator& comm)
    : core_(std::make_shared<Work::Core>(comm)), thread_([this] { loop(); }) {}

ProgressQueue::~ProgressQueue() {
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->stop = true;
  }
  core_->cv.notify_all();
  thread_.join();
}

Work ProgressQueue::submit(std::string name, std::function<void(Communicator&)> fn, bool bounded) {
  auto state = std::make_shared<Work::State>();
  state->name = std::move(name);
  state->bounded = bounded;
  state->default_timeout_s = core_->comm.timeout();
  state->queue = core_;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->items.emplace_back(state, std::move(fn));
  }
  core_->cv.notify_one();
  return Work(state);
}

void ProgressQueue::loop() {
  Work::Core& core = *core_;
  for (;;) {
    Work::Item item;
    {
      std::unique_lock<std::mutex> lock(core.mu);
      // Drained and stopping: done. A waiter's stolen item still running: wait for it too,
      // so the destructor returns only when nothing runs.
      core.cv.wait(lock, [&] { return !core.busy && (core.stop || !core.items.empty()); });
      if (core.items.empty()) return;
      item = std::move(core.items.front());
      core.items.pop_front();
      core.busy = true;
    }
    Work::run(core, item);
  }
}

Work allreduce_async(ProgressQueue& q, void* buf, size_t count, DType t, ReduceOp op, const AllreduceOptions& opts) {
  return q.submit("allreduce", [=](Communicator& c) { allreduce(c, buf, count, t, op, opts); }, true);
}
Work broadcast_async(ProgressQueue& q, void* buf, size_t count, DType t, int root, const BroadcastOptions& opts) {
  return q.submit("broadcast", [=](Communicator& c) { broadcast(c, buf, count, t, root, opts); }, true);
}
Work allgather_async(ProgressQueue& q, const void* send, void* recv, size_t count, DType t,
                     const AllgatherOptions& opts) {
  return q.submit("allgather", [=](Communicator& c) { allgather(c, send, recv, count, t, opts); }, true);
}
Work reduce_scatter_async(ProgressQueue& q, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                          const ReduceScatterOptions& opts) {
  return q.submit("reduce_scatter", [=](Communicator& c) { reduce_scatter(c, send, recv, count, t, op, opts); }, true);
}

}  // namespace dtrain

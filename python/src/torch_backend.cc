// The process group's frame: rendezvous over torch's store, the two queues, Work and futures,
// point-to-point and barriers. The collectives are in torch_ops.cc.
#include "torch_backend.h"

#include <Python.h>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "base/clock.h"
#include "base/error.h"
#include "coll/collectives.h"
#include "coll/config.h"
#include "comm/heartbeat.h"
#include "comm/world.h"
#include "torch_tensor_util.h"

namespace dtrain::py {

namespace {

// dtrain's Store interface over a torch c10d::Store (the group's PrefixStore), so the
// communicator meets its peers wherever torch's rendezvous put them (env://, tcp://, file://,
// store=). Waits are bounded; a wait that runs out names the missing keys, like dtrain's stores.
class TorchStore : public Store {
 public:
  TorchStore(c10::intrusive_ptr<c10d::Store> s, double timeout_s) : Store(timeout_s), s_(std::move(s)) {}
  void set(const std::string& key, const std::string& value) override {
    s_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string get(const std::string& key, double t = kDefaultTimeout) override {
    wait({key}, t);
    auto v = s_->get(key);
    return std::string(v.begin(), v.end());
  }
  int64_t add(const std::string& key, int64_t delta) override { return s_->add(key, delta); }
  // Polls check() rather than calling torch's wait(keys, timeout): in torch 1.13 a TCPStore
  // wait that times out leaves its reply in flight on the client's socket, and the next
  // request reads it as its own answer (a check "ready" that is not, then a "Socket Timeout"
  // or a garbled value): the intermittent init_process_group failures under load. check() is
  // one request and one reply, never left half-done.
  void wait(const std::vector<std::string>& keys, double t = kDefaultTimeout) override {
    const double to = resolve(t);
    const Deadline deadline = Deadline::after(to < 0 ? -1 : std::max(to, 0.001));
    int64_t pause_us = 50;
    while (!s_->check(keys)) {
      if (deadline.expired()) {
        std::vector<std::string> missing;
        for (const auto& k : keys)
          if (!s_->check({k})) missing.push_back(k);
        if (missing.empty()) return;
        throw Timeout(missing_keys_message(missing, to));
      }
      // Back off from 50 us to 5 ms: setup waits are short, and a long one costs the store
      // one small request per 5 ms.
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
      pause_us = std::min<int64_t>(pause_us * 2, 5000);
    }
  }
  bool check(const std::vector<std::string>& keys) override { return s_->check(keys); }
  bool remove(const std::string& key) override { return s_->deleteKey(key); }

 private:
  c10::intrusive_ptr<c10d::Store> s_;
};

std::string random_token() {
  std::random_device rd;
  std::ostringstream os;
  for (int i = 0; i < 4; ++i) os << std::hex << rd();
  return os.str();
}

}  // namespace

void rethrow_with_prefix(const std::string& p) {
  try {
    throw;
  } catch (const PeerFailure& e) {
    throw PeerFailure(p + e.what(), e.peer());
  } catch (const Desync& e) {
    throw Desync(p + e.what());
  } catch (const Timeout& e) {
    throw Timeout(p + e.what());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(p + e.what());
  } catch (const Error& e) {
    throw Error(p + e.what());
  } catch (const c10::Error& e) {
    throw Error(p + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw Error(p + e.what());
  }
}

std::mutex& Completer::live_mu() {
  static std::mutex mu;
  return mu;
}

std::vector<std::weak_ptr<Completer::State>>& Completer::live() {
  static std::vector<std::weak_ptr<State>> states;
  return states;
}

Completer::Completer() : st_(std::make_shared<State>()) {
  std::lock_guard<std::mutex> lock(live_mu());
  auto& states = live();
  states.erase(std::remove_if(states.begin(), states.end(), [](const auto& w) { return w.expired(); }), states.end());
  states.push_back(st_);
}

Completer::~Completer() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->stop = true;
    workers.swap(st_->workers);  // post() cannot run any more: nobody else holds this object
  }
  st_->cv.notify_all();
  for (auto& t : workers) {
    if (t.get_id() == std::this_thread::get_id())
      t.detach();  // destroyed by one of its own jobs: that worker ends on its own
    else
      t.join();
  }
}

bool Completer::State::wait_idle(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu);
  return idle_cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return jobs.empty() && running == 0; });
}

int Completer::drain_all(double timeout_s) {
  // The states are taken out under the registry's lock and waited on without it: a job may
  // destroy a group, and so a Completer, meanwhile.
  std::vector<std::shared_ptr<State>> states;
  {
    std::lock_guard<std::mutex> lock(live_mu());
    for (const auto& w : live())
      if (auto st = w.lock()) states.push_back(std::move(st));
  }
  const Deadline deadline = Deadline::after(timeout_s);
  int busy = 0;
  for (const auto& st : states) busy += st->wait_idle(std::max(0.0, deadline.remaining_seconds())) ? 0 : 1;
  return busy;
}

void Completer::post(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->jobs.push_back(std::move(fn));
  if (st_->jobs.size() > static_cast<size_t>(st_->idle))
    st_->workers.emplace_back([st = st_] { loop(st); });
  else
    st_->cv.notify_one();
}

void Completer::loop(const std::shared_ptr<State>& st) {
  std::unique_lock<std::mutex> lock(st->mu);
  for (;;) {
    ++st->idle;
    st->cv.wait(lock, [&] { return st->stop || !st->jobs.empty(); });
    --st->idle;
    if (st->jobs.empty()) return;  // stopping, nothing left
    auto fn = std::move(st->jobs.front());
    st->jobs.pop_front();
    ++st->running;
    lock.unlock();
    fn();          // completing a future runs its callbacks, which may block
    fn = nullptr;  // what it captured goes now, inside the running count
    lock.lock();
    if (--st->running == 0 && st->jobs.empty()) st->idle_cv.notify_all();
  }
}

void LazyFuture::finish(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = error;
    fut = fut_;
  }
  if (!fut) return;
  // Callbacks run on the completer: a hook that waits on a later collective of this group
  // (PowerSGD does) must not block the thread that runs collectives.
  std::function<void()> complete;
  if (error)
    complete = [fut, error] { fut->setError(error); };
  else
    complete = [fut, outputs = outputs_] { fut->markCompleted(c10::IValue(outputs)); };
  if (auto completer = completer_.lock())
    completer->post(std::move(complete));
  else
    complete();
}

c10::intrusive_ptr<c10::ivalue::Future> LazyFuture::get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!fut_) {
    fut_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    if (done_) {  // nobody else holds it yet, so no callback runs here
      if (error_)
        fut_->setError(error_);
      else
        fut_->markCompleted(c10::IValue(outputs_));
    }
  }
  return fut_;
}

int WorkDtrain::sourceRank() const {
  // The Work is done only after the receive's request completed (its queue entry waited on
  // it), so the source is there once wait() returned.
  return recv_.valid() && work_.done() ? recv_.source() : -1;
}

bool WorkDtrain::wait(std::chrono::milliseconds timeout) {
  // No timeout given: every entry ahead in the queue and this one are bounded by the group's
  // timeout, so the wait ends.
  work_.wait(timeout.count() > 0 ? timeout.count() / 1000.0 : -1);
  return true;
}

ProcessGroupDtrain::ProcessGroupDtrain(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       double timeout_s, std::string group, std::vector<int64_t> global_ranks)
    : PGBase(rank, size), group_(std::move(group)), global_ranks_(std::move(global_ranks)), timeout_s_(timeout_s) {
  try {
    TransportOptions o = world_from_env().transport;  // DTRAIN_TRANSPORT, DTRAIN_BIND_ADDR, ...
    o.timeout_s = timeout_s;
    o.fabric.connect_timeout_s = timeout_s;
    auto s = std::make_shared<TorchStore>(store, timeout_s);
    if (o.fabric.token.empty()) {
      // No DTRAIN_TOKEN (torchrun, mpirun): the tcp transport's peers prove membership with a
      // secret handed out through torch's store, which only the job's ranks reach.
      if (rank == 0) s->set("dtrain/token", random_token());
      o.fabric.token = s->get("dtrain/token");
    }
    std::vector<int> wr(global_ranks_.begin(), global_ranks_.end());
    // The collectives' settings (DTRAIN_ALGO, DTRAIN_SHM_CONTEXT, ...) as for any dtrain job.
    comm_ = std::make_shared<Communicator>(s, rank, size, o, "torch/" + group_, wr,
                                           coll_config_from(Settings::process()));
    // Under dtrain run, the default group beats for the launcher, as Communicator::from_env
    // does: a rank frozen (SIGSTOP, starved) is then named within --heartbeat seconds.
    if (global_ranks_.empty())
      if (std::shared_ptr<Heartbeat> beat = heartbeat_from_env()) comm_->keep_alive(beat);
    completer_ = std::make_shared<Completer>();
    queue_ = std::make_unique<ProgressQueue>(*comm_);
    p2p_ = std::make_unique<ProgressQueue>(*comm_);
  } catch (...) {
    rethrow_with_prefix(prefix("init_process_group"));
  }
}

ProcessGroupDtrain::~ProcessGroupDtrain() {
  // Python drops the last reference with the GIL held; a completion still running may need
  // it (class Completer), so the threads are joined without it.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  p2p_.reset();  // finish queued work, join the threads, before the communicator goes
  queue_.reset();
  completer_.reset();
  if (saved) PyEval_RestoreThread(saved);
}

std::string ProcessGroupDtrain::prefix(const char* call) const {
  std::ostringstream os;
  os << "dtrain backend: rank " << getRank();
  if (!global_ranks_.empty() && getRank() < static_cast<int>(global_ranks_.size()))
    os << " (job rank " << global_ranks_[getRank()] << ")";
  os << " of group " << group_ << " (size " << getSize() << "), " << call << ": ";
  return os.str();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::submit(ProgressQueue& q, c10d::OpType type, const char* call,
                                                          std::vector<at::Tensor> outputs,
                                                          std::function<void(Communicator&)> body) {
  auto fut = std::make_shared<LazyFuture>(outputs, completer_);
  std::string pre = prefix(call);
  ++sequence_;
  dtrain::Work w = q.submit(call, [body = std::move(body), fut, pre](Communicator& c) {
    try {
      try {
        body(c);
      } catch (...) {
        rethrow_with_prefix(pre);
      }
    } catch (...) {
      fut->finish(std::current_exception());
      throw;
    }
    fut->finish(nullptr);
  }, /*bounded=*/true);  // every body ends within the group's timeout
  return c10::make_intrusive<WorkDtrain>(getRank(), type, std::move(w), fut, std::move(outputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::enqueue(c10d::OpType type, const char* call,
                                                           std::vector<at::Tensor> outputs,
                                                           std::function<void(Communicator&)> body) {
  return submit(*queue_, type, call, std::move(outputs), std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::enqueue_p2p(c10d::OpType type, const char* call,
                                                               std::vector<at::Tensor> outputs,
                                                               std::function<void(Communicator&)> body) {
  return submit(*p2p_, type, call, std::move(outputs), std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  Request r;
  Staged s;
  try {
    check_one(tensors, "send");
    DT_CHECK(tag >= 0, InvalidArgument, "send: tag must be >= 0 (got " << tag << ")");
    s = Staged(tensors[0]);  // a contiguous snapshot when strided
    r = comm_->isend(dst, s.ptr(), s.bytes(), static_cast<uint32_t>(tag));
  } catch (...) {
    rethrow_with_prefix(prefix("send"));
  }
  return enqueue_p2p(c10d::OpType::SEND, "send", tensors, [r, s](Communicator&) mutable { r.wait(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::post_recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  Request r;
  Staged s;
  try {
    check_one(tensors, "recv");
    DT_CHECK(tag >= 0, InvalidArgument, "recv: tag must be >= 0 (got " << tag << ")");
    s = Staged(tensors[0]);
    r = comm_->irecv(src, s.ptr(), s.bytes(), static_cast<uint32_t>(tag));
  } catch (...) {
    rethrow_with_prefix(prefix("recv"));
  }
  auto w = enqueue_p2p(c10d::OpType::RECV, src == kAnySource ? "recv from any source" : "recv", tensors,
                       [r, s](Communicator&) mutable {
                         r.wait();
                         s.finish();
                       });
  static_cast<WorkDtrain*>(w.get())->set_receive(r);
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return post_recv(tensors, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return post_recv(tensors, kAnySource, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::barrier(const c10d::BarrierOptions& opts) {
  const double to = timeout_of(opts.timeout, timeout_s_);
  return enqueue(c10d::OpType::BARRIER, "barrier", {}, [to](Communicator& c) {
    BarrierOptions o;
    o.timeout_s = to;
    dtrain::barrier(c, o);
  });
}

void ProcessGroupDtrain::monitoredBarrier(const c10d::BarrierOptions& opts, bool) {
  // dtrain's barrier already names the ranks that did not arrive within the timeout.
  auto w = enqueue(c10d::OpType::BARRIER, "monitored_barrier", {},
                   [to = timeout_of(opts.timeout, timeout_s_)](Communicator& c) {
                     BarrierOptions o;
                     o.timeout_s = to;
                     dtrain::barrier(c, o);
                   });
  w->wait(std::chrono::milliseconds(0));
}

}  // namespace dtrain::py

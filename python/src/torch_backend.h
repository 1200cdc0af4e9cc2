// python/src/torch_backend.h — the torch.distributed backend "dtrain": a c10d process group
// whose operations run on dtrain's communicator and progress machinery.
//
// Contract
// - ProcessGroupDtrain(store, rank, size, timeout_s, group, global_ranks) is collective over the
//   group's members: it builds one dtrain Communicator over torch's (prefix) store, so every
//   torch process group — the default one and each new_group — has its own transport and
//   sequence numbers, and concurrent groups never mix messages. global_ranks maps group ranks
//   to ranks in the job (errors name both); empty for the default group.
// - Collectives are queued on the group's ProgressQueue (coll/work.h) in call order and run on
//   its thread while the caller goes on (a wait() on the very next item while that thread is
//   idle runs it on the waiting thread instead: coll/work.h's steal on wait, which is what a
//   synchronous torch call does); every call returns at once with a WorkDtrain whose
//   wait() re-throws the collective's error and whose getFuture() completes with the output
//   tensors (callbacks run on the group's Completer threads, so a hook that waits on a later
//   collective — PowerSGD does — blocks neither the progress thread nor other completions).
// - Point-to-point: send/recv are posted on the caller's thread (so paired isend/irecv never
//   deadlock) and completed by a second queue's thread. recvAnysource (dist.recv / irecv
//   without src) posts a receive from any rank of the group (comm/transport.h kAnySource):
//   the Work's sourceRank() is the group rank that sent it once wait() returned (-1 before,
//   as gloo's), and so is recv's. A rank that fails while it waits fails it, naming the rank.
// - Tensors: CPU only; any layout (non-contiguous ones go through a contiguous copy); every
//   dtype of torch.distributed (float32/64, float16, bfloat16, int8/16/32/64, uint8, bool;
//   complex as real views). Reduce ops SUM, AVG, PRODUCT, MIN, MAX and, on integers and bool,
//   BAND, BOR, BXOR (python/src/extra_reduce.h). PREMUL_SUM is NCCL-only: an error.
// - Errors are dtrain's typed exceptions (PeerFailure, Desync, Timeout, InvalidArgument), their
//   message prefixed with "dtrain backend: rank R[ (job rank J)] of group G, <call>: ", so the
//   Python exception names this rank, the call and — from dtrain — the culprit.
// - Bounded: every collective and p2p wait is bounded by the group's timeout (init_process_group's
//   timeout=, or an operation's own timeout); Work::wait without a timeout waits for the queue,
//   each of whose entries is bounded.
// - Built against torch 1.13 (c10d::ProcessGroup); with torch >= 2 the same class derives from
//   c10d::Backend (TORCH_VERSION_MAJOR guard), which compiles but is untested here.
// Thread-safety: like torch's process groups: calls from any thread; collectives must be
// issued in the same order on every rank of the group.
#pragma once

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "coll/communicator.h"
#include "coll/work.h"

namespace dtrain::py {

#if TORCH_VERSION_MAJOR >= 2
using PGBase = c10d::Backend;
#else
using PGBase = c10d::ProcessGroup;
#endif

class Completer;

// The future of one WorkDtrain, made only when someone asks for it (getFuture: DDP's reducer,
// communication hooks, torch.futures). A synchronous call never asks, so its completion needs
// no hop to the Completer's thread (a wake-up that competes with the caller for its core).
// finish() and get() meet under the mutex: a future that exists when the work finishes is
// completed on the Completer; one made after is completed at once, before anyone else has it.
class LazyFuture {
 public:
  LazyFuture(std::vector<at::Tensor> outputs, std::shared_ptr<Completer> completer)
      : outputs_(std::move(outputs)), completer_(std::move(completer)) {}
  void finish(std::exception_ptr error);  // the work's end, on whichever thread ran it
  c10::intrusive_ptr<c10::ivalue::Future> get();

 private:
  std::mutex mu_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> fut_;  // null until asked for
  // Weak: a Work that Python keeps after its group is gone must not keep (and at its end join)
  // the Completer's threads. finish() runs before the group's destructor drops the Completer.
  std::weak_ptr<Completer> completer_;
};

class WorkDtrain : public c10d::Work {
 public:
  WorkDtrain(int rank, c10d::OpType type, dtrain::Work work, std::shared_ptr<LazyFuture> fut,
             std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), work_(std::move(work)), fut_(std::move(fut)), outputs_(std::move(outputs)) {}
  bool isCompleted() override { return work_.done(); }
  bool isSuccess() const override { return work_.done() && !work_.error(); }
  std::exception_ptr exception() const override { return work_.error(); }
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return fut_->get(); }
  // Receives: the sender's group rank once the receive completed, -1 before (as gloo).
  int sourceRank() const override;
  void set_receive(Request r) { recv_ = std::move(r); }

 private:
  dtrain::Work work_;
  Request recv_;  // receives only
  std::shared_ptr<LazyFuture> fut_;
  std::vector<at::Tensor> outputs_;
};

// Runs future completions (and so their callbacks) off the progress thread. A callback may
// block — PowerSGD's wait on a later collective of the same group — so when every worker is
// busy, post() starts another one: a completion never waits behind a blocked callback.
//
// A completion can need the GIL after the future it completes is already seen as done:
// markCompleted() destroys the callbacks it ran, and a Python callback's destructor takes the
// GIL. So nothing may wait for the workers while holding the GIL (the group's destructor
// releases it: pybind11 drops the last reference with it held, and joining then deadlocked),
// and the interpreter must not start finalizing while a completion runs (a thread that then
// asks for the GIL is ended by Python with a forced unwind, which aborts the process inside
// the noexcept destructor: "terminate called without an active exception"). drain_all(),
// which dtrain.torch registers with atexit, waits with the GIL released until every live
// Completer is idle. The live set is the module's only state (a registry of the Completers'
// states, weakly held).
class Completer {
 public:
  Completer();
  ~Completer();
  void post(std::function<void()> fn);
  // Waits, up to timeout_s in all, until no live Completer has a job queued or running; the
  // number still busy at the deadline.
  static int drain_all(double timeout_s);

 private:
  // The workers' state, shared with them: a job may drop the last reference to the group and
  // so destroy the Completer on one of its own workers. That worker is then detached, not
  // joined (joining itself threw "Resource deadlock avoided"), and finishes its loop on this
  // state, which it keeps alive.
  struct State {
    std::mutex mu;
    std::condition_variable cv, idle_cv;
    std::deque<std::function<void()>> jobs;
    std::vector<std::thread> workers;
    int idle = 0;
    int running = 0;
    bool stop = false;
    bool wait_idle(double timeout_s);  // until no job is queued or running; false at the timeout
  };
  static void loop(const std::shared_ptr<State>& st);
  // The live Completers' states (weakly held) and the lock over that list.
  static std::mutex& live_mu();
  static std::vector<std::weak_ptr<State>>& live();
  std::shared_ptr<State> st_;
};

class ProcessGroupDtrain : public PGBase {
 public:
  ProcessGroupDtrain(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s,
                     std::string group, std::vector<int64_t> global_ranks);
  ~ProcessGroupDtrain() override;

  const std::string getBackendName() const override { return "dtrain"; }
  Communicator& comm() { return *comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks = false) override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }

 private:
  // Queues `body` (which runs the collective on the progress thread) and returns its Work;
  // the future completes with `outputs` once body returned.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* call, std::vector<at::Tensor> outputs,
                                         std::function<void(Communicator&)> body);
  // Same, on the point-to-point queue: body waits for requests posted by the caller.
  c10::intrusive_ptr<c10d::Work> enqueue_p2p(c10d::OpType type, const char* call, std::vector<at::Tensor> outputs,
                                             std::function<void(Communicator&)> body);
  c10::intrusive_ptr<c10d::Work> post_recv(std::vector<at::Tensor>& tensors, int src, int tag);
  c10::intrusive_ptr<c10d::Work> submit(ProgressQueue& q, c10d::OpType type, const char* call,
                                        std::vector<at::Tensor> outputs, std::function<void(Communicator&)> body);
  std::string prefix(const char* call) const;

  std::string group_;
  std::vector<int64_t> global_ranks_;
  double timeout_s_;
  std::atomic<uint64_t> sequence_{0};  // calls issued (DDP issues from autograd threads)
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Completer> completer_;  // declared before the queues: outlives their work
  std::unique_ptr<ProgressQueue> queue_;  // collectives, in call order
  std::unique_ptr<ProgressQueue> p2p_;    // completion of posted sends and receives
};

// Re-throws the current exception with `prefix` prepended to its message, keeping dtrain's type.
[[noreturn]] void rethrow_with_prefix(const std::string& prefix);

}  // namespace dtrain::py

// python/src/core_comm.h — dtrain._core's objects: a Communicator for Python, buffer views
// and asynchronous handles.
//
// Contract
// - BufView exports a Python object's buffer (NumPy array, bytearray, memoryview, array.array,
//   torch tensor via numpy()) without a copy: C-contiguous required (a strided array is a
//   ValueError saying so), writable when the call writes it. The element type comes from the
//   buffer's format: float16/32/64, int8/16/32/64, uint8, bool. The view holds a reference to
//   the object; it is released (with the GIL) when the view is destroyed.
// - PyComm owns a dtrain Communicator. Blocking calls release the GIL. Asynchronous calls
//   (async_op=True) are queued on a ProgressQueue built on first use and run on its thread in
//   call order; once one exists, blocking collectives go through it too (so the order stays
//   the same on every rank). Point-to-point isend/irecv are posted at once on the transport;
//   recv/irecv with source=None receive from any rank (comm/transport.h kAnySource): recv
//   returns the sender's rank, Handle.source says it once wait() returned.
// - Handle is what an asynchronous call returns: wait(timeout) re-throws the call's error,
//   done() never blocks. It keeps the buffers exported until the call finished: dropping a
//   Handle waits for its call first (bounded by the communicator's timeout).
// Thread-safety: a PyComm is used under the GIL; its queue thread never touches Python.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "coll/communicator.h"
#include "coll/work.h"
#include "extra_reduce.h"

namespace dtrain::py {

namespace pyb = pybind11;

class BufView {
 public:
  BufView(pyb::handle obj, bool writable, const char* what);
  ~BufView();
  BufView(const BufView&) = delete;
  BufView& operator=(const BufView&) = delete;
  void* data() const { return view_.buf; }
  size_t bytes() const { return static_cast<size_t>(view_.len); }
  size_t count() const { return bytes() / elem_size(elem_); }
  Elem elem() const { return elem_; }

 private:
  Py_buffer view_{};
  Elem elem_ = Elem::kU8;
};
using BufPtr = std::shared_ptr<BufView>;

class Handle {
 public:
  Handle(std::string name, Work w, std::vector<BufPtr> keep, std::shared_ptr<void> fn, double bound_s)
      : name_(std::move(name)), work_(std::move(w)), keep_(std::move(keep)), fn_(std::move(fn)), bound_s_(bound_s) {}
  Handle(std::string name, Request r, std::vector<BufPtr> keep, double bound_s)
      : name_(std::move(name)), req_(std::move(r)), keep_(std::move(keep)), bound_s_(bound_s) {}
  ~Handle();
  void wait(double timeout_s);
  bool done();
  const std::string& name() const { return name_; }
  // A receive's sender once it completed; -1 before and for other calls.
  int source() const { return req_.valid() ? req_.source() : -1; }

 private:
  std::string name_;
  Work work_;
  Request req_;
  bool finished_ = false;
  std::vector<BufPtr> keep_;
  std::shared_ptr<void> fn_;  // the queued call's closure: destroyed here, under the GIL
  double bound_s_;
};

class PyComm {
 public:
  explicit PyComm(std::shared_ptr<Communicator> c) : comm_(std::move(c)) {}
  ~PyComm();
  Communicator& comm() { return *comm_; }
  std::shared_ptr<Communicator> shared() { return comm_; }
  // Runs fn now (no queue yet, async false), or queues it; returns a Handle when async.
  pyb::object run(const std::string& name, bool async, std::vector<BufPtr> keep,
                  std::function<void(Communicator&)> fn);
  void close();

 private:
  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<ProgressQueue> queue_;
};

// Registers Communicator's collective and point-to-point methods (core_collectives.cc).
void bind_collectives(pyb::class_<PyComm, std::shared_ptr<PyComm>>& cls);

}  // namespace dtrain::py

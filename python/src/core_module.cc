// dtrain._core — dtrain's communicator, collectives and cost model for Python (NumPy arrays or
// any buffer-protocol object, without copies). See python/src/core_comm.h for the contract.
#include <pybind11/stl.h>

#include "base/env.h"
#include "base/error.h"
#include "base/settings.h"
#include "coll/collectives.h"
#include "coll/config.h"
#include "comm/world.h"
#include "core_comm.h"
#include "plan/collective_plan.h"
#include "dtrain_build_info.h"

namespace dtrain::py {

namespace {

bool elem_from_format(const char* fmt, Py_ssize_t itemsize, Elem* out) {
  std::string f = fmt ? fmt : "B";
  while (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '!' || f[0] == '>')) f.erase(0, 1);
  if (f.size() != 1) return false;
  switch (f[0]) {
    case 'e': *out = Elem::kF16; return true;
    case 'f': *out = Elem::kF32; return true;
    case 'd': *out = Elem::kF64; return true;
    case '?': *out = Elem::kBool; return true;
    case 'B': case 'c': *out = Elem::kU8; return true;
    case 'b': case 'h': case 'i': case 'l': case 'q':
      switch (itemsize) {
        case 1: *out = Elem::kI8; return true;
        case 2: *out = Elem::kI16; return true;
        case 4: *out = Elem::kI32; return true;
        case 8: *out = Elem::kI64; return true;
      }
      return false;
    default: return false;
  }
}

}  // namespace

BufView::BufView(pyb::handle obj, bool writable, const char* what) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
    PyErr_Clear();
    DT_THROW(InvalidArgument, what << ": expected a C-contiguous" << (writable ? ", writable" : "")
                                   << " buffer (NumPy array, bytearray, memoryview); got "
                                   << pyb::str(pyb::type::of(obj)).cast<std::string>()
                                   << " (use numpy.ascontiguousarray for strided arrays)");
  }
  if (!elem_from_format(view_.format, view_.itemsize, &elem_)) {
    std::string f = view_.format ? view_.format : "?";
    PyBuffer_Release(&view_);
    DT_THROW(InvalidArgument, what << ": unsupported element format '" << f
                                   << "' (float16/32/64, int8/16/32/64, uint8, bool)");
  }
}

BufView::~BufView() {
  pyb::gil_scoped_acquire gil;
  PyBuffer_Release(&view_);
}

Handle::~Handle() {
  if (finished_) return;
  try {
    pyb::gil_scoped_release nogil;
    wait(bound_s_);  // the buffers must stay exported until the call is done
  } catch (...) {
  }
}

void Handle::wait(double timeout_s) {
  pyb::gil_scoped_release nogil;
  if (work_.valid()) work_.wait(timeout_s);
  else req_.wait(timeout_s);
  finished_ = true;
}

bool Handle::done() {
  if (finished_) return true;
  return work_.valid() ? work_.done() : req_.test();
}

PyComm::~PyComm() { close(); }

void PyComm::close() {
  pyb::gil_scoped_release nogil;
  queue_.reset();
}

pyb::object PyComm::run(const std::string& name, bool async, std::vector<BufPtr> keep,
                        std::function<void(Communicator&)> fn) {
  if (!async && !queue_) {
    pyb::gil_scoped_release nogil;
    fn(*comm_);
    return pyb::none();
  }
  if (!queue_) queue_ = std::make_unique<ProgressQueue>(*comm_);
  // The closure holds buffer views, whose release needs the GIL: the queue gets a forwarder,
  // and the closure itself dies with the Handle (or here), on a Python thread.
  auto closure = std::make_shared<std::function<void(Communicator&)>>(std::move(fn));
  Work w = queue_->submit(name, [raw = closure.get()](Communicator& cm) { (*raw)(cm); });
  if (!async) {
    pyb::gil_scoped_release nogil;
    w.wait(-1);  // bounded: each queued call is bounded by the communicator's timeout
    return pyb::none();
  }
  return pyb::cast(std::make_shared<Handle>(name, std::move(w), std::move(keep), closure, comm_->timeout()));
}

}  // namespace dtrain::py

using namespace dtrain;
using namespace dtrain::py;

PYBIND11_MODULE(_core, m) {
  m.doc() = "dtrain's communicator, collectives and cost model (use the `dtrain` package).";
  m.attr("__version__") = DTRAIN_BUILD_VERSION;    // the release, as `dtrain --version` prints it
  m.attr("__revision__") = DTRAIN_BUILD_REVISION;  // the git revision this module was built from
  auto error = pyb::register_exception<dtrain::Error>(m, "Error", PyExc_RuntimeError);
  pyb::register_exception<dtrain::PeerFailure>(m, "PeerFailure", error.ptr());
  pyb::register_exception<dtrain::Desync>(m, "Desync", error.ptr());
  pyb::register_exception<dtrain::Timeout>(m, "Timeout", error.ptr());
  pyb::register_exception<dtrain::InvalidArgument>(m, "InvalidArgument", error.ptr());

  pyb::class_<Handle, std::shared_ptr<Handle>>(m, "Handle", "An asynchronous call in flight.")
      .def("wait", &Handle::wait, pyb::arg("timeout") = -2.0,
           R"(Block until the call finished; re-raise its error.

Parameters
----------
timeout : float, optional
    Seconds to wait (default: the communicator's timeout; negative waits until done).

Raises
------
dtrain.Timeout
    When the call is still running after `timeout` (it keeps running).
dtrain.PeerFailure, dtrain.Desync
    When the call failed; the message names the rank and the call.
)")
      .def("done", &Handle::done, "True when the call finished (never blocks).")
      .def_property_readonly("name", &Handle::name, "The call's name.")
      .def_property_readonly(
          "source",
          [](Handle& h) -> pyb::object {
            int s = h.source();
            return s < 0 ? pyb::none() : pyb::cast(s);
          },
          "For a receive, the rank the message came from once wait() returned; else None.");

  pyb::class_<PyComm, std::shared_ptr<PyComm>> cls(m, "Communicator", R"(A group of ranks that talk.

Create the job's world with ``Communicator.from_env()`` (under ``dtrain run``, ``torchrun`` with
``DTRAIN_TOKEN``, ``mpirun`` or ``srun``; see ``world_info``). Every rank must call the
collectives in the same order with matching sizes, types, ops and roots; a mismatch raises
``dtrain.Desync`` naming both calls, a dead rank ``dtrain.PeerFailure`` naming it, and every
call is bounded by ``timeout`` seconds.
)");
  cls.def_static(
         "from_env", [] { return std::make_shared<PyComm>(Communicator::from_env()); },
         pyb::call_guard<pyb::gil_scoped_release>(),
         "Join the job's world described by the environment (collective over all ranks).")
      .def_property_readonly("rank", [](PyComm& c) { return c.comm().rank(); }, "This process's rank in the group.")
      .def_property_readonly("size", [](PyComm& c) { return c.comm().size(); }, "Number of ranks in the group.")
      .def_property_readonly("timeout", [](PyComm& c) { return c.comm().timeout(); }, "Bound on every call, seconds.")
      .def_property_readonly("name", [](PyComm& c) { return c.comm().name(); }, "The group's name.")
      .def_property_readonly(
          "transport", [](PyComm& c) { return std::string(c.comm().transport().kind()); }, "'shm' or 'tcp'.")
      .def("world_rank", [](PyComm& c, int r) { return c.comm().world_rank(r); }, pyb::arg("rank"),
           "The job rank of group rank `rank`.")
      .def(
          "split",
          [](PyComm& c, int color, int key) -> std::shared_ptr<PyComm> {
            std::shared_ptr<Communicator> sub;
            {
              pyb::gil_scoped_release nogil;
              sub = c.comm().split(color, key);
            }
            return sub ? std::make_shared<PyComm>(sub) : nullptr;
          },
          pyb::arg("color"), pyb::arg("key") = 0,
          R"(Split into sub-groups of the ranks with equal `color`, ordered by (`key`, rank).

Collective over every rank of this group. Returns the new Communicator, or None for a
negative color.
)")
      .def("close", &PyComm::close, "Finish queued calls and stop the progress thread.");
  bind_collectives(cls);

  m.def(
      "world_info",
      [] {
        WorldInfo w = world_from_env();
        pyb::dict d;
        d["rank"] = w.rank;
        d["size"] = w.size;
        d["local_rank"] = w.local_rank;
        d["local_size"] = w.local_size;
        d["launched_by"] = w.launched_by;
        d["store"] = w.store_url;
        d["transport"] = transport_kind_name(w.transport.kind);
        d["timeout"] = w.transport.timeout_s;
        return d;
      },
      R"(The launcher's rank information, read from the environment.

Returns
-------
dict
    ``rank``, ``size``, ``local_rank``, ``local_size``, ``launched_by`` ("dtrain",
    "torchrun-env", "mpirun", "srun" or "single"), ``store`` (DTRAIN_STORE), ``transport``
    (DTRAIN_TRANSPORT) and ``timeout`` (DTRAIN_TIMEOUT, seconds).
)");

  m.def(
      "plan_collective",
      [](const std::string& op, int ranks, pyb::object size, const std::string& transport, size_t segment_bytes) {
        size_t bytes = pyb::isinstance<pyb::str>(size) ? static_cast<size_t>(parse_size(size.cast<std::string>(), "size"))
                                                        : size.cast<size_t>();
        const CostParams& cp = cost_params_for(transport, coll_config_from(Settings::process()).calibration_path);
        auto rows = plan_collective(parse_coll_op(op), ranks, bytes, cp, segment_bytes, transport == "shm");
        pyb::list out;
        for (const auto& r : rows) {
          pyb::dict d;
          d["algorithm"] = algorithm_name(r.algorithm);
          d["seconds"] = r.seconds;
          d["algbw_gbps"] = r.algbw_gbps;
          d["busbw_gbps"] = r.busbw_gbps;
          d["chosen"] = r.chosen;
          out.append(d);
        }
        return out;
      },
      pyb::arg("op"), pyb::arg("ranks"), pyb::arg("size"), pyb::arg("transport") = "shm",
      pyb::arg("segment_bytes") = 0,
      R"(Predicted time of every algorithm for one collective, from dtrain's cost model.

Parameters
----------
op : str
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "gather", "scatter",
    "alltoall" or "barrier".
ranks : int
    Group size.
size : int or str
    Bytes of the buffer (all-reduce/broadcast/reduce) or of the whole output/input, e.g.
    67108864 or "64M".
transport : {"shm", "tcp"}
    Which calibration to use.
segment_bytes : int
    Pipelining unit (0: the default).

Returns
-------
list of dict
    One row per algorithm: ``algorithm``, ``seconds``, ``algbw_gbps``, ``busbw_gbps``,
    ``chosen`` (the one ``auto`` picks at run time with the same parameters).

Examples
--------
>>> [r["algorithm"] for r in dtrain.plan_collective("allreduce", 8, "64M") if r["chosen"]]
)");
}

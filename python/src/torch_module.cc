// dtrain._torch — the Python face of the torch.distributed backend (python/src/torch_backend.h).
//
// Contract
// - create_process_group(store, rank, size, timeout_s, group, global_ranks) builds a
//   ProcessGroupDtrain (collective over the group; the GIL is released meanwhile). The Python
//   side (dtrain/torch.py) registers it with torch.distributed.Backend.register_backend.
// - dtrain's typed errors thrown through this module (by a Work's wait, a future, or a call)
//   become the Python exceptions of dtrain._core: PeerFailure, Desync, Timeout (all subclasses
//   of dtrain.Error, itself a RuntimeError), InvalidArgument as ValueError's subclass.
// - The exception classes are looked up once at import (the only module state: pybind11's
//   exception translators are plain function pointers).
#include <torch/python.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "base/error.h"
#include "torch_backend.h"

namespace py = pybind11;
using dtrain::py::PGBase;
using dtrain::py::ProcessGroupDtrain;

namespace {

PyObject* g_error = nullptr;
PyObject* g_peer_failure = nullptr;
PyObject* g_desync = nullptr;
PyObject* g_timeout = nullptr;
PyObject* g_invalid = nullptr;

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const dtrain::PeerFailure& e) {
    PyErr_SetString(g_peer_failure, e.what());
  } catch (const dtrain::Desync& e) {
    PyErr_SetString(g_desync, e.what());
  } catch (const dtrain::Timeout& e) {
    PyErr_SetString(g_timeout, e.what());
  } catch (const dtrain::InvalidArgument& e) {
    PyErr_SetString(g_invalid, e.what());
  } catch (const dtrain::Error& e) {
    PyErr_SetString(g_error, e.what());
  }
}

}  // namespace

PYBIND11_MODULE(_torch, m) {
  m.doc() = "dtrain's torch.distributed backend (use `import dtrain.torch`).";
  py::module_::import("torch.distributed");
  py::module_ core = py::module_::import("dtrain._core");
  auto keep = [&](const char* name) {
    py::object t = core.attr(name);
    t.inc_ref();  // lives as long as the interpreter, like the translator that uses it
    return t.ptr();
  };
  g_error = keep("Error");
  g_peer_failure = keep("PeerFailure");
  g_desync = keep("Desync");
  g_timeout = keep("Timeout");
  g_invalid = keep("InvalidArgument");
  py::register_exception_translator(&translate);

  py::class_<ProcessGroupDtrain, PGBase, c10::intrusive_ptr<ProcessGroupDtrain>>(
      m, "ProcessGroupDtrain",
      "A c10d process group running on a dtrain Communicator (see dtrain.torch).")
      .def_property_readonly(
          "transport", [](ProcessGroupDtrain& pg) { return std::string(pg.comm().transport().kind()); },
          "The transport the group's communicator uses: 'shm' or 'tcp'.");

  m.def(
      "drain_completions", [](double timeout_s) { return dtrain::py::Completer::drain_all(timeout_s); },
      py::arg("timeout_s") = 10.0, py::call_guard<py::gil_scoped_release>(),
      R"(Wait, with the GIL released, until no future completion of any dtrain group is running.

dtrain.torch registers this with atexit: a completion still running when the interpreter
finalizes would need the GIL to destroy a Python callback, and Python ends such a thread in a
way that aborts the process. Returns the number of groups still busy after timeout_s.)");

  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s, std::string group,
         std::vector<int64_t> global_ranks) {
        return c10::make_intrusive<ProcessGroupDtrain>(store, rank, size, timeout_s, std::move(group),
                                                       std::move(global_ranks));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("group") = "0",
      py::arg("global_ranks") = std::vector<int64_t>{}, py::call_guard<py::gil_scoped_release>(),
      R"(Create a dtrain process group (collective over the group's ranks).

Parameters
----------
store : torch.distributed.Store
    The group's rendezvous store (torch passes a PrefixStore per group).
rank, size : int
    This process's rank in the group and the group's size.
timeout_s : float
    Bound on every operation and on the rendezvous, in seconds.
group : str
    The group's name (used in error messages).
global_ranks : list of int
    The job ranks of the group's members, in group-rank order (empty for the default group).

Returns
-------
ProcessGroupDtrain
)");
}

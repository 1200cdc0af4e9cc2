"""dtrain: parallel and distributed training, from Python.

Two ways in:

* ``import dtrain.torch`` registers the ``"dtrain"`` backend of ``torch.distributed``; then
  ``torch.distributed.init_process_group("dtrain")`` runs every collective of your own DDP,
  FSDP-style or hand-written code on dtrain's collectives (CPU tensors).
* ``dtrain.Communicator.from_env()`` gives the collectives directly on NumPy arrays (or any
  C-contiguous buffer), without copies::

      import numpy, dtrain
      comm = dtrain.Communicator.from_env()        # under `dtrain run -n 4 -- python3 prog.py`
      x = numpy.ones(1 << 20, dtype=numpy.float32)
      comm.allreduce(x)                            # x == comm.size everywhere
      h = comm.allreduce(x, op="max", async_op=True)
      h.wait()
      src = comm.recv(buf)                         # from any rank; returns the sender

``python3 -m dtrain.torchrun`` is torchrun with the Python 3.11 fix Debian's torch 1.13 lacks
(see dtrain/torchrun.py).

Errors are ``dtrain.Error`` (a ``RuntimeError``) and its subclasses ``PeerFailure`` (a rank
died: the message names it), ``Desync`` (ranks called different collectives: the message
names both calls), ``Timeout`` and ``InvalidArgument``.
"""
from ._core import (  # noqa: F401
    __revision__,
    __version__,
    Communicator,
    Desync,
    Error,
    Handle,
    InvalidArgument,
    PeerFailure,
    Timeout,
    plan_collective,
    world_info,
)

__all__ = [
    "Communicator", "Handle", "Error", "PeerFailure", "Desync", "Timeout", "InvalidArgument",
    "plan_collective", "world_info",
]

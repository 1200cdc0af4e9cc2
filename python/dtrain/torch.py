"""The ``"dtrain"`` backend of ``torch.distributed``.

Importing this module registers the backend; then::

    import torch.distributed as dist
    import dtrain.torch  # noqa: F401
    dist.init_process_group("dtrain")          # env://, tcp://, file:// or store=
    dist.all_reduce(tensor)                    # runs on dtrain's collectives

Each process group (the default one and every ``new_group``) gets its own dtrain communicator
over torch's rendezvous store, with its own progress thread. ``timeout=`` of
``init_process_group`` bounds every operation. Supported: CPU tensors of every dtype
torch.distributed offers, every collective, send/recv/isend/irecv (``dist.recv(t)`` without
``src`` receives from any rank and returns it), barrier and monitored_barrier, ``async_op=True`` with ``Work.get_future()`` (DDP and
its communication hooks). Errors are ``dtrain.Error`` subclasses naming the rank and the call.
Built and tested against torch 1.13; the C++ side also compiles for torch 2.x's
``c10d::Backend`` (untested).
"""
import atexit as _atexit

import torch.distributed as _dist

from . import _core  # noqa: F401  (exception types the backend raises)
from ._torch import ProcessGroupDtrain, create_process_group, drain_completions  # noqa: F401

# Before the interpreter finalizes, let every future completion finish (it may still need the
# GIL to free a Python callback of a future already seen as done; see drain_completions).
_atexit.register(drain_completions)

BACKEND = "dtrain"


def _create(opts, pg_options=None):
    """Creator with torch's extended backend API: rank, size, store, timeout, group ranks."""
    return create_process_group(
        opts.store,
        opts.group_rank,
        opts.group_size,
        opts.timeout.total_seconds(),
        str(opts.group_id),
        list(opts.global_ranks_in_group),
    )


def _create_basic(store, rank, size, timeout):
    return create_process_group(store, rank, size, timeout.total_seconds(), "", [])


def _register():
    if BACKEND.upper() in getattr(_dist.Backend, "_plugins", {}):
        return
    try:
        _dist.Backend.register_backend(BACKEND, _create, extended_api=True)
    except TypeError:  # a torch without the extended API: no global ranks for subgroups
        _dist.Backend.register_backend(BACKEND, _create_basic)


_register()

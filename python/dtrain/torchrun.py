"""``python3 -m dtrain.torchrun``: PyTorch's ``torchrun`` for a torch whose launcher breaks on
Python 3.11.

Debian's ``torchrun`` (torch 1.13 on Python 3.11) fails before starting any worker with
``AttributeError: 'NoneType' object has no attribute 'get'`` in
``torch/distributed/elastic/multiprocessing/api.py:to_map``: ``Std.from_str("0")`` (the default
of ``--redirects`` and ``--tee``) looks the value up by iterating over the ``IntFlag`` ``Std``,
and from Python 3.11 on that iteration yields only the single-bit members (OUT, ERR), not NONE
(0) or ALL (3), so it returns None. ``python3 -m torch.distributed.run`` runs the same code and
fails the same way; it works with ``--redirects 1 --tee 1`` (or 2), which avoid the values it
cannot find (stdout then also goes to log files).

This module repairs ``Std.from_str`` when (and only when) it is broken that way, then runs
``torch.distributed.run`` with the command line unchanged::

    python3 -m dtrain.torchrun --nproc_per_node 2 train.py   # train.py: init_process_group("dtrain")

Every option of torchrun works; the workers get its usual environment (MASTER_ADDR/PORT, RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_*) and meet through ``env://``.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api as _api


def _from_str(vm):
    """Std.from_str without iterating over the flag type: "0".."3" or "rank:value,..."."""
    def to_std(v):
        return _api.Std(int(v))

    if re.fullmatch(r"[0-3]", vm):
        return to_std(vm)
    if re.fullmatch(r"(\d:[0-3],)*\d:[0-3]", vm):
        return {int(k): to_std(v) for k, v in (kv.split(":") for kv in vm.split(","))}
    raise ValueError(f"{vm} does not match: <0,1,2,3> or <local_rank:(0|1|2|3)> pairs")


def repair():
    """Replaces Std.from_str when it cannot parse its own default ("0"); returns whether it did."""
    if _api.Std.from_str("0") is not None:
        return False
    _api.Std.from_str = staticmethod(_from_str)
    return True


def main(argv=None):
    repair()
    from torch.distributed import run

    if argv is not None:
        sys.argv = [sys.argv[0]] + list(argv)
    run.main()


if __name__ == "__main__":
    main()

"""What the torch workers share: joining the job, deterministic inputs, closed-form references.

Every rank can compute every rank's input (``inp(r, ...)`` depends only on the rank and a
salt), so each check compares dtrain's result with gloo's on the same inputs *and* with a
reference computed locally from all ranks' inputs.
"""
import datetime
import faulthandler
import functools
import json
import os
import signal
import sys

# The harness (launch.py) sends SIGUSR1 to a rank that outlives its time: every thread's
# Python stack goes to stderr, so a hang is reported with where each rank waited.
faulthandler.register(signal.SIGUSR1, all_threads=True)

import torch
import torch.distributed as dist

import dtrain.torch  # noqa: F401  (registers the "dtrain" backend)

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool]
FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
REDOPS = [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]


def op_name(op):
    names = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
    return next(n for n in names if op == getattr(R, n))


def init(timeout_s=60):
    dist.init_process_group("dtrain", init_method=os.environ["DTRAIN_TEST_INIT"],
                            rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                            timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def report(**fields):
    fields.setdefault("rank", dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", -1)))
    print("RESULT " + json.dumps(fields), flush=True)


def inp(r, dt, shape, salt):
    """Rank r's input: small integers (sums and products stay exact in every type)."""
    g = torch.Generator().manual_seed(salt * 7919 + r)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    lo = 0 if dt == torch.uint8 else -3
    return torch.randint(lo, 4, shape, generator=g).to(dt)


def valid(dt, op):
    if op in (R.BAND, R.BOR, R.BXOR):
        return dt not in FLOATS
    return not (dt == torch.bool and op == R.AVG)


def ref_reduce(ts, op):
    dt, p = ts[0].dtype, len(ts)
    if op in (R.BAND, R.BOR, R.BXOR):
        f = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op]
        return functools.reduce(f, ts)
    if dt == torch.bool:
        s = torch.stack(ts).to(torch.uint8)
        return (s.amax(0) if op in (R.SUM, R.MAX) else s.amin(0)).bool()
    s = torch.stack(ts)
    if op == R.MIN:
        return s.amin(0)
    if op == R.MAX:
        return s.amax(0)
    if op == R.PRODUCT:
        w = s.to(torch.int64) if dt not in FLOATS else s.double()
        return w.prod(0).to(dt)
    w = s.to(torch.int64) if dt not in FLOATS else s.double()
    total = w.sum(0)
    if op == R.SUM:
        return total.to(dt)
    if dt in FLOATS:
        return (total / p).to(dt)
    return torch.div(total, p, rounding_mode="trunc").to(dt)


def same(a, b, op=None):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if op is not None and op == R.AVG and a.dtype in (torch.float16, torch.bfloat16):
        return torch.allclose(a.float(), b.float(), rtol=1e-2, atol=1e-2)
    return torch.equal(a, b)


def place(t, strided):
    """t itself, or a strided view into a larger zeroed buffer (returned to check the gaps)."""
    if not strided:
        return t, None
    base = torch.zeros((2 * t.numel(),), dtype=t.dtype)
    v = base[::2].view(t.shape)
    v.copy_(t)
    return v, base


def gaps_ok(base):
    return base is None or not base[1::2].to(torch.int64).any().item()


def main(scenarios):
    name = sys.argv[1]
    scenarios[name](*sys.argv[2:])
    if dist.is_initialized():  # tear the groups down while Python is whole (threads joined)
        dist.barrier()
        dist.destroy_process_group()

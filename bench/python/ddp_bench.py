"""PyTorch DDP training the MLP 784-1024-1024-1024-10 at global batch 256: the dtrain backend vs
the gloo backend on the same ranks, and one process with the whole batch, in one sitting.

    source scripts/env.sh
    dtrain run -n 2 -- $DTRAIN_PY bench/python/ddp_bench.py [--steps 30] [--rounds 2]

Every rank trains its share of the batch (256 / n) with SGD on synthetic data (fixed seed),
one compute thread per rank (torch.set_num_threads(1) and OpenBLAS at 1 thread; dtrain's and
gloo's communication threads come on top). Rank 0 also times a single-process run with the
whole batch and n threads (the cores the n ranks use), and with 1 thread, while the others
wait at a barrier; for that run rank 0 leaves the core `dtrain run` bound it to and takes
every CPU (sched_setaffinity), and "one process" is the faster of the two thread counts
(on a 2-vCPU VM OpenBLAS at 2 threads ran these shapes slower than at 1). Debian's torch does its matrix products in OpenBLAS (BLAS_INFO=generic,
libblas.so.3 = openblas-pthread), whose thread count torch.set_num_threads does not change
and which `dtrain run` starts at OPENBLAS_NUM_THREADS=1 (cores / ranks): the thread counts are
set in both, OpenBLAS's through openblas_set_num_threads (ctypes), and printed.
A last row trains the same per-rank shares on every rank at once with no communication at
all (no DDP): the ceiling any backend can reach on these cores; and a row with DDP whose
communication hook returns the bucket untouched (no communication, DDP's own bucketing and
copies kept): the ceiling of DDP itself, whatever the backend. The configurations alternate
for --rounds rounds; each figure is the best round's examples/s (warm-up steps excluded).
Prints a table and the ratios.
"""
import argparse
import ctypes
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import dtrain.torch  # noqa: F401

BATCH = 256


def _openblas():
    for name in ("libblas.so.3", "libopenblas.so.0"):
        try:
            lib = ctypes.CDLL(name)  # the copy torch already loaded
            lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
            lib.openblas_get_num_threads.restype = ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    return None


OPENBLAS = _openblas()


def set_threads(n):
    """Compute threads: torch's intra-op pool and OpenBLAS's (which torch does not set)."""
    torch.set_num_threads(n)
    if OPENBLAS is not None:
        OPENBLAS.openblas_set_num_threads(n)
    blas = OPENBLAS.openblas_get_num_threads() if OPENBLAS is not None else "n/a"
    return f"torch {torch.get_num_threads()}, OpenBLAS {blas}"


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def train(model, batch, steps, warmup=3):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 784, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for i in range(warmup + steps):
        if i == warmup:
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return time.perf_counter() - start


def no_communication(state, bucket):
    """A DDP communication hook that leaves the bucket as it is (the no-op ceiling row)."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    dist.init_process_group("dtrain")
    gloo = dist.new_group(backend="gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    threads = {}
    best = {"dtrain": 0.0, "gloo": 0.0, "single": 0.0, "single1": 0.0, "nocomm": 0.0, "noop": 0.0}
    for _ in range(args.rounds):
        for name, group in (("dtrain", None), ("gloo", gloo), ("nocomm", None), ("noop", None)):
            threads["ranks"] = set_threads(1)
            model = mlp() if name == "nocomm" else DDP(mlp(), process_group=group)
            if name == "noop":
                model.register_comm_hook(None, no_communication)
            dist.barrier(group=gloo)
            sec = torch.tensor([train(model, BATCH // n, args.steps)], dtype=torch.float64)
            dist.all_reduce(sec, op=dist.ReduceOp.MAX, group=gloo)
            best[name] = max(best[name], BATCH * args.steps / sec.item())
            del model
        dist.barrier(group=gloo)
        if rank == 0:  # one process, the whole batch, all the cores the ranks share
            bound = os.sched_getaffinity(0)
            os.sched_setaffinity(0, range(os.cpu_count()))
            for key, count in (("single", n), ("single1", 1)):
                threads[key] = set_threads(count)
                best[key] = max(best[key], BATCH * args.steps / train(mlp(), BATCH, args.steps))
            os.sched_setaffinity(0, bound)
        dist.barrier(group=gloo)
    one = max(best["single"], best["single1"])
    if rank == 0:
        print(f"# DDP MLP 784-1024-1024-1024-10, global batch {BATCH}, {n} ranks x {BATCH // n}, "
              f"{args.steps} steps x best of {args.rounds}, torch {torch.__version__}")
        print(f"# threads: each rank {threads['ranks']}; one process {threads['single']} / {threads['single1']}")
        labels = {"dtrain": "DDP, dtrain backend", "gloo": "DDP, gloo backend", "single": f"one process, {n} threads",
                  "single1": "one process, 1 thread", "nocomm": f"{n} ranks, no communication",
                  "noop": "DDP, no-op hook"}
        for k in ("dtrain", "gloo", "single", "single1", "nocomm", "noop"):
            label = labels[k]
            print(f"{label:>26}: {best[k]:8.0f} examples/s")
        print(f"dtrain / gloo = {best['dtrain'] / best['gloo']:.2f}x, dtrain / one process = "
              f"{best['dtrain'] / one:.2f}x, gloo / one process = {best['gloo'] / one:.2f}x; "
              f"ceiling (no communication) / one process = {best['nocomm'] / one:.2f}x, "
              f"DDP no-op hook / one process = {best['noop'] / one:.2f}x, "
              f"dtrain / ceiling = {best['dtrain'] / best['nocomm']:.2f}; against one process at 1 thread: "
              f"dtrain {best['dtrain'] / best['single1']:.2f}x, gloo {best['gloo'] / best['single1']:.2f}x, "
              f"no-op hook {best['noop'] / best['single1']:.2f}x", flush=True)
    dist.barrier(group=gloo)
    os._exit(0)


main()

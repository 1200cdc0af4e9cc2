"""torch.distributed all-reduce: the dtrain backend vs the gloo backend, same ranks, same sitting.

Run under the launcher (one line per size on rank 0, nccl-tests columns):

    source scripts/env.sh
    dtrain run -n 2 -- $DTRAIN_PY bench/python/allreduce_bench.py [--sizes 8,64K,1M,16M,64M,256M] [--budget 1.0]

The default group is dtrain's; a gloo group spans the same ranks. For each size both backends
run alternately (warm-up, then as many iterations as fit `--budget` seconds, at least 3), on
float32 tensors, in place, SUM. time = the slowest rank's mean per call; busbw = algbw x 2(n-1)/n.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

import dtrain.torch  # noqa: F401


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def slowest(seconds, gloo):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.item()


def timed(group, t, budget, gloo):
    """Mean seconds per call; every rank runs the same number of calls (agreed through gloo)."""
    dist.all_reduce(t, group=group)  # warm-up (connections, buffers)
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(3):
        dist.all_reduce(t, group=group)
    probe = slowest((time.perf_counter() - start) / 3, gloo)
    iters = int(min(10000, max(3, budget / max(probe, 1e-9))))
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    return slowest((time.perf_counter() - start) / iters, gloo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,1K,64K,1M,16M,64M,256M")
    ap.add_argument("--budget", type=float, default=1.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("dtrain")
    gloo = dist.new_group(backend="gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"# torch.distributed all_reduce, float32 sum in place, {n} ranks, "
              f"dtrain transport {dist.distributed_c10d._get_default_group().transport}, torch {torch.__version__}")
        print(f"{'size':>10} {'dtrain us':>12} {'gloo us':>12} {'dtrain busbw':>13} {'gloo busbw':>11} {'speedup':>8}")
    for s in args.sizes.split(","):
        size = parse_size(s)
        t = torch.ones(max(1, size // 4), dtype=torch.float32)
        res = {}
        for name, group in (("dtrain", None), ("gloo", gloo), ("dtrain", None), ("gloo", gloo)):
            sec = timed(group, t, args.budget / 2, gloo)
            res[name] = min(res.get(name, sec), sec)  # the better of two alternating rounds
        if rank == 0:
            bus = lambda sec: t.numel() * 4 / sec * 2 * (n - 1) / n / 1e9  # noqa: E731
            print(f"{s:>10} {res['dtrain'] * 1e6:12.1f} {res['gloo'] * 1e6:12.1f} {bus(res['dtrain']):10.2f} GB/s"
                  f" {bus(res['gloo']):8.2f} GB/s {res['gloo'] / res['dtrain']:7.2f}x", flush=True)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    os._exit(0)


main()

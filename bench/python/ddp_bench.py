"""PyTorch DDP training the MLP 784-1024-1024-1024-10 at global batch 256: the dtrain backend vs
the gloo backend on the same ranks, and one process with the whole batch, in one sitting.

    source scripts/env.sh
    dtrain run -n 2 -- $DTRAIN_PY bench/python/ddp_bench.py [--steps 30] [--rounds 2]

Every rank trains its share of the batch (256 / n) with SGD on synthetic data (fixed seed);
rank 0 also times a single-process run (n threads: the cores the ranks share) while the
others wait at a barrier. The backends alternate for --rounds rounds; each figure is the best
round's examples/s (warm-up steps excluded). Prints a table and the ratios.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import dtrain.torch  # noqa: F401

BATCH = 256


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    dist.init_process_group("dtrain")
    gloo = dist.new_group(backend="gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    best = {"dtrain": 0.0, "gloo": 0.0, "single": 0.0}
    for _ in range(args.rounds):
        for name, group in (("dtrain", None), ("gloo", gloo)):
            torch.set_num_threads(1)
            model = DDP(mlp(), process_group=group)
            dist.barrier(group=gloo)
            sec = torch.tensor([train(model, BATCH // n, args.steps)], dtype=torch.float64)
            dist.all_reduce(sec, op=dist.ReduceOp.MAX, group=gloo)
            best[name] = max(best[name], BATCH * args.steps / sec.item())
            del model
        dist.barrier(group=gloo)
        if rank == 0:  # one process, the whole batch, all the cores the ranks share
            torch.set_num_threads(n)
            best["single"] = max(best["single"], BATCH * args.steps / train(mlp(), BATCH, args.steps))
        dist.barrier(group=gloo)
    if rank == 0:
        print(f"# DDP MLP 784-1024-1024-1024-10, global batch {BATCH}, {n} ranks x {BATCH // n}, "
              f"{args.steps} steps x best of {args.rounds}, torch {torch.__version__}")
        for k in ("dtrain", "gloo", "single"):
            label = {"dtrain": "DDP, dtrain backend", "gloo": "DDP, gloo backend", "single": f"one process, {n} threads"}[k]
            print(f"{label:>26}: {best[k]:8.0f} examples/s")
        print(f"dtrain / gloo = {best['dtrain'] / best['gloo']:.2f}x, dtrain / one process = "
              f"{best['dtrain'] / best['single']:.2f}x, gloo / one process = {best['gloo'] / best['single']:.2f}x", flush=True)
    dist.barrier(group=gloo)
    os._exit(0)


main()

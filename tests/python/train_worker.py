"""DDP, subgroups, FSDP-style sharding and failures on the dtrain backend.

Scenarios (argv[1]):
  ddp HOOK      DDP on every rank vs a single-process reference trained on the whole batch;
                HOOK: none | allreduce | fp16 | powersgd. Reports the largest parameter
                difference to the reference and between ranks.
  groups        two overlapping dtrain subgroups used concurrently (async), plus a gloo one.
  anysource     dist.recv / irecv without src on dtrain and on gloo (world and a subgroup).
  torchrun      started by torchrun (env:// from its variables): an all_reduce and a DDP step.
  store         init_process_group(store=FileStore) without an init method.
  fsdp          all_gather_into_tensor + reduce_scatter_tensor as FSDP uses them (async, futures).
  killed        the last rank exits after one all-reduce; the others report their exception.
  desync        rank 0 calls all_reduce while the others call broadcast.
"""
import copy
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from worker_common import init, main, report


def ddp(hook):
    rank, p = init()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    ref = copy.deepcopy(model)
    net = DDP(model)
    if hook == "allreduce":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        net.register_comm_hook(None, default_hooks.allreduce_hook)
    elif hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        net.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2,
                                   use_error_feedback=True, warm_start=True)
        net.register_comm_hook(state, psgd.powerSGD_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    per_rank, steps = 8, 6
    for _ in range(steps):
        x = torch.randn(p * per_rank, 16, generator=g)
        y = torch.randn(p * per_rank, 4, generator=g)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        opt.zero_grad()
        nn.functional.mse_loss(net(x[mine]), y[mine]).backward()
        opt.step()
        ref_opt.zero_grad()
        nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
    flat = torch.cat([q.detach().reshape(-1) for q in net.module.parameters()])
    ref_flat = torch.cat([q.detach().reshape(-1) for q in ref.parameters()])
    everyone = [torch.zeros_like(flat) for _ in range(p)]
    dist.all_gather(everyone, flat)
    report(vs_reference=(flat - ref_flat).abs().max().item(),
           across_ranks=max((e - flat).abs().max().item() for e in everyone),
           finite=bool(torch.isfinite(flat).all()))


def groups():
    rank, p = init()
    a = dist.new_group([0, 2])
    b = dist.new_group([1, 2])
    c = dist.new_group(list(range(p)), backend="gloo")
    works, bufs = [], {}
    if rank in (0, 2):
        bufs["a"] = torch.full((1000,), float(rank + 1))
        works.append(dist.all_reduce(bufs["a"], group=a, async_op=True))
    if rank in (1, 2):
        bufs["b"] = torch.full((1000,), float(10 * (rank + 1)))
        works.append(dist.all_reduce(bufs["b"], group=b, async_op=True))
    world = torch.full((3,), float(rank))
    works.append(dist.all_reduce(world, async_op=True))
    for w in works:
        w.wait()
    gl = torch.full((3,), float(rank))
    dist.all_reduce(gl, group=c)
    # torch 1.13's dist.monitored_barrier() accepts only gloo; the process group's own method
    # reaches the backend.
    dist.distributed_c10d._get_default_group().monitored_barrier(datetime.timedelta(seconds=30))
    out = {"world": world.tolist(), "gloo": gl.tolist(),
           "group_rank_a": dist.get_rank(a) if rank in (0, 2) else -1}
    for k, v in bufs.items():
        out[k] = sorted(set(v.tolist()))
    report(**out)


def anysource():
    """dist.recv / dist.irecv without src, on the dtrain backend and on gloo, in the world and in
    a subgroup: what rank 0 received, from whom torch says it came, and a timeout's message."""
    rank, p = init()
    out = {}
    sub_ranks = [0, p - 1]
    for name, backend in (("dtrain", None), ("gloo", "gloo")):
        world = None if backend is None else dist.new_group(list(range(p)), backend=backend)
        sub = dist.new_group(sub_ranks, backend=backend)
        got = []
        if rank == 0:
            for k in range(2 * (p - 1)):
                t = torch.zeros(2, dtype=torch.int64)
                if k % 2 == 0:
                    src = dist.recv(t, group=world, tag=5)     # returns the sender's global rank
                else:
                    w = dist.irecv(t, group=world, tag=5)      # the Work's _source_rank(): group rank
                    w.wait()
                    src = w._source_rank()
                got.append([src] + t.tolist())
            t = torch.zeros(2, dtype=torch.int64)
            got.append([dist.recv(t, group=sub, tag=6)] + t.tolist())
        else:
            for i in range(2):
                dist.send(torch.tensor([rank, i]), 0, group=world, tag=5)
            if rank == p - 1:
                dist.send(torch.tensor([rank, 9]), 0, group=sub, tag=6)
        out[name] = got
        dist.barrier()
    # Nobody sends: a group with a 2 s timeout raises, naming the wait.
    short = dist.new_group(list(range(p)), timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        start = time.monotonic()
        try:
            dist.recv(torch.zeros(1), group=short, tag=7)
            out["timeout"] = "no error"
        except RuntimeError as e:
            out["timeout"] = str(e)
        out["timeout_s"] = time.monotonic() - start
    dist.barrier()
    report(**out)


def torchrun():
    """Started by torchrun: init_process_group("dtrain") from torchrun's env:// alone, then an
    all_reduce and a DDP step."""
    dist.init_process_group("dtrain", timeout=datetime.timedelta(seconds=60))
    rank, p = dist.get_rank(), dist.get_world_size()
    x = torch.full((4,), float(rank + 1))
    dist.all_reduce(x)
    torch.manual_seed(0)
    net = DDP(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    nn.functional.mse_loss(net(torch.randn(4, 8, generator=g)), torch.randn(4, 2, generator=g)).backward()
    opt.step()
    flat = torch.cat([q.detach().reshape(-1) for q in net.module.parameters()])
    everyone = [torch.zeros_like(flat) for _ in range(p)]
    dist.all_gather(everyone, flat)
    report(size=p, sum=x.tolist(), across_ranks=max((e - flat).abs().max().item() for e in everyone),
           grad_nonzero=bool(net.module[0].weight.grad.abs().sum() > 0),
           elastic=bool(os.environ.get("TORCHELASTIC_RUN_ID")))
    dist.destroy_process_group()


def fsdp():
    rank, p = init()
    n = 1000
    full_ref = torch.arange(p * n, dtype=torch.float32)
    shard = full_ref[rank * n:(rank + 1) * n].clone()
    full = torch.empty(p * n)
    fut = dist.all_gather_into_tensor(full, shard, async_op=True).get_future()
    gathered = fut.wait()[0]
    grad = gathered * (rank + 1)  # each rank's "gradient" of the full parameter
    grad_shard = torch.empty(n)
    dist.reduce_scatter_tensor(grad_shard, grad, op=dist.ReduceOp.AVG, async_op=True).wait()
    expect = full_ref[rank * n:(rank + 1) * n] * sum(r + 1 for r in range(p)) / p
    report(gather_ok=bool(torch.equal(gathered, full_ref)), same_object=gathered.data_ptr() == full.data_ptr(),
           scatter_err=(grad_shard - expect).abs().max().item())


def store():
    # init_process_group(store=...): a FileStore the test names, no init_method.
    rank, p = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    st = dist.FileStore(os.environ["DTRAIN_TEST_STORE"], p)
    dist.init_process_group("dtrain", store=st, rank=rank, world_size=p)
    x = torch.tensor([float(rank)])
    dist.all_reduce(x)
    report(sum=x.item())


def failure(kind):
    timeout = 20
    rank, p = init(timeout_s=timeout)
    x = torch.ones(1 << 10)
    dist.all_reduce(x)
    start = time.monotonic()
    try:
        if kind == "killed":
            if rank == p - 1:
                os._exit(3)
            dist.all_reduce(x)
        else:
            if rank == 0:
                dist.all_reduce(x)
            else:
                dist.broadcast(torch.ones(7), src=0)
        report(error=None)
    except Exception as e:  # what a user sees: the type and message of the Python exception
        report(error=str(e), type=type(e).__name__, module=type(e).__module__,
               seconds=time.monotonic() - start, timeout=timeout)
    os._exit(0)  # the group cannot be torn down cleanly with a dead peer


main({"ddp": ddp, "groups": groups, "anysource": anysource, "torchrun": torchrun, "fsdp": fsdp, "store": store,
      "killed": lambda: failure("killed"), "desync": lambda: failure("desync")})

"""The dtrain Python module (no torch) on NumPy arrays, under `dtrain run`: every collective,
async handles, point-to-point (receive from any source included), split, and the errors.
Reports {"failures": [...]} per rank.
"""
import sys

import numpy as np

import dtrain

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def main():
    comm = dtrain.Communicator.from_env()
    r, p = comm.rank, comm.size
    info = dtrain.world_info()
    expect(info["rank"] == r and info["size"] == p and info["launched_by"] == "dtrain", f"world_info {info}")

    for dt in (np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8):
        x = np.full(5, r + 1, dtype=dt)
        comm.allreduce(x)
        expect((x == p * (p + 1) // 2).all(), f"allreduce sum {dt}: {x}")
        y = np.full(5, r + 1, dtype=dt)
        out = np.zeros_like(y)
        comm.allreduce(y, op="max", out=out)
        expect((out == p).all() and (y == r + 1).all(), f"allreduce max out= {dt}")
    b = np.array([r % 2 == 0, True, False])
    comm.allreduce(b, op="band")
    expect(b.tolist() == [p == 1, True, False], f"allreduce band bool {b}")
    bits = np.array([1 << r], dtype=np.int32)
    comm.allreduce(bits, op="bor")
    expect(bits[0] == (1 << p) - 1, f"allreduce bor {bits}")

    x = np.arange(4, dtype=np.float32) * (r + 1)
    h = comm.allreduce(x, op="sum", async_op=True)
    h.wait()
    expect(h.done() and np.allclose(x, np.arange(4) * p * (p + 1) / 2), f"async allreduce {x}")

    bc = np.full(3, r, dtype=np.int64)
    comm.broadcast(bc, root=p - 1)
    expect((bc == p - 1).all(), f"broadcast {bc}")

    red = np.full(3, r + 1.0)
    comm.reduce(red, root=0, op="prod")
    expect(r != 0 or (red == np.prod(np.arange(1, p + 1))).all(), f"reduce prod {red}")

    ag = np.zeros((p, 2), dtype=np.float32)
    comm.allgather(np.full(2, r, dtype=np.float32), ag)
    expect((ag == np.arange(p)[:, None]).all(), f"allgather {ag}")

    rs = np.zeros(2, dtype=np.int32)
    comm.reduce_scatter(np.arange(2 * p, dtype=np.int32), rs)
    expect((rs == p * np.arange(2 * r, 2 * r + 2)).all(), f"reduce_scatter {rs}")

    g = np.zeros(p, dtype=np.float64) if r == 0 else None
    comm.gather(np.array([r * 1.5]), g, root=0)
    expect(r != 0 or np.allclose(g, np.arange(p) * 1.5), f"gather {g}")

    sc = np.zeros(1, dtype=np.int16)
    comm.scatter(np.arange(p, dtype=np.int16) * 3 if r == 0 else None, sc, root=0)
    expect(sc[0] == 3 * r, f"scatter {sc}")

    a2a = np.zeros(p, dtype=np.int64)
    comm.alltoall(np.arange(p, dtype=np.int64) + 100 * r, a2a)
    expect((a2a == 100 * np.arange(p) + r).all(), f"alltoall {a2a}")

    right, left = (r + 1) % p, (r - 1) % p
    got = bytearray(4)
    hs = [comm.isend(np.array([r], dtype=np.int32), right, tag=7), comm.irecv(got, left, tag=7)]
    for q in hs:
        q.wait()
    expect(np.frombuffer(got, dtype=np.int32)[0] == left, f"isend/irecv {bytes(got)}")

    # Receive from any source: every other rank sends rank 0 two messages; rank 0 takes them
    # with recv(source=None) and irecv(source=None) and checks each came once, from whom it says.
    if r == 0:
        seen = []
        for k in range(2 * (p - 1)):
            m = np.zeros(2, dtype=np.int32)
            if k % 2 == 0:
                src = comm.recv(m, tag=9)
            else:
                h = comm.irecv(m, tag=9)
                expect(h.source is None or h.done(), "irecv source before completion")
                h.wait()
                src = h.source
            expect(src == m[0], f"recv any source: said {src}, message from {m[0]}")
            seen.append((int(m[0]), int(m[1])))
        expect(sorted(seen) == [(q, i) for q in range(1, p) for i in range(2)], f"recv any source: {seen}")
        expect(comm.probe(tag=9) is None, "probe after every message was received")
    else:
        for i in range(2):
            comm.send(np.array([r, i], dtype=np.int32), 0, tag=9)

    sub = comm.split(r % 2, r)
    s = np.array([1.0])
    sub.allreduce(s)
    expect(s[0] == len(range(r % 2, p, 2)), f"split allreduce {s} size {sub.size}")
    expect(comm.split(-1, 0) is None, "split(-1) is not None")

    try:
        comm.allreduce(np.zeros((4, 4), dtype=np.float32)[:, 1])
        failures.append("strided buffer accepted")
    except dtrain.InvalidArgument as e:
        expect("C-contiguous" in str(e), f"strided error: {e}")

    comm.barrier()
    print("RESULT " + __import__("json").dumps({"rank": r, "failures": failures}), flush=True)
    sys.exit(0)


main()

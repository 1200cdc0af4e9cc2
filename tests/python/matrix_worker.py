"""Every torch.distributed operation x dtype x reduce op on the dtrain backend, compared with the
gloo backend (a gloo subgroup of the same ranks, same inputs) where gloo supports the case, and
always with the closed-form reference. Contiguous and strided tensors; in place and out of place.
Reports {"checks": ..., "vs_gloo": ..., "failures": [...]} per rank.
"""
import torch
import torch.distributed as dist

from worker_common import DTYPES, REDOPS, R, op_name, gaps_ok, init, inp, main, place, ref_reduce, report, same, valid


class Matrix:
    def __init__(self):
        self.rank, self.p = init()
        self.gloo = dist.new_group(backend="gloo")
        self.checks = self.vs_gloo = self.gloo_unsupported = 0
        self.failures = []

    def check(self, case, run, expected, op=None):
        """run(group) -> (result tensor or None, gap buffer); compared with gloo and expected."""
        got, base = run(None)
        self.checks += 1
        if got is not None and not same(got, expected, op):
            self.failures.append(f"{case}: dtrain {got.tolist()} != expected {expected.tolist()}")
        if not gaps_ok(base):
            self.failures.append(f"{case}: wrote outside the strided view")
        try:
            g, _ = run(self.gloo)
        except Exception:  # gloo lacks this dtype/op (e.g. AVG, int16, bool): reference only
            self.gloo_unsupported += 1
            return
        self.vs_gloo += 1
        if got is not None and g is not None and not same(got, g, op):
            self.failures.append(f"{case}: dtrain {got.tolist()} != gloo {g.tolist()} (on contiguous inputs)")

    def reductions(self, dt, op, strided, salt):
        rank, p, n = self.rank, self.p, 5
        ins = [inp(r, dt, (n,), salt) for r in range(p)]
        exp = ref_reduce(ins, op)
        tag = f"{dt} {op_name(op)} strided={strided}"

        def all_reduce(group):
            x, base = place(ins[rank].clone(), strided and group is None)
            dist.all_reduce(x, op=op, group=group)
            return x.clone(), base
        self.check(f"all_reduce {tag}", all_reduce, exp, op)

        root = salt % p

        def reduce(group):
            x, base = place(ins[rank].clone(), strided and group is None)
            dist.reduce(x, dst=root, op=op, group=group)
            return (x.clone() if rank == root else None), (base if rank == root else None)
        self.check(f"reduce root={root} {tag}", reduce, exp, op)

        blocks = [[inp(r, dt, (n,), salt * 31 + j) for j in range(p)] for r in range(p)]
        exp_rs = ref_reduce([blocks[r][rank] for r in range(p)], op)

        def reduce_scatter(group):
            out, base = place(torch.zeros(n, dtype=dt), strided and group is None)
            dist.reduce_scatter(out, [b.clone() for b in blocks[rank]], op=op, group=group)
            return out.clone(), base
        self.check(f"reduce_scatter {tag}", reduce_scatter, exp_rs, op)

        def reduce_scatter_tensor(group):
            out, base = place(torch.zeros(n, dtype=dt), strided and group is None)
            dist.reduce_scatter_tensor(out, torch.cat(blocks[rank]), op=op, group=group)
            return out.clone(), base
        self.check(f"reduce_scatter_tensor {tag}", reduce_scatter_tensor, exp_rs, op)

    def movement(self, dt, strided, salt):
        rank, p, n = self.rank, self.p, 6
        ins = [inp(r, dt, (n,), salt) for r in range(p)]
        tag = f"{dt} strided={strided}"
        root = salt % p

        def broadcast(group):
            x, base = place(ins[rank].clone(), strided and group is None)
            dist.broadcast(x, src=root, group=group)
            return x.clone(), base
        self.check(f"broadcast root={root} {tag}", broadcast, ins[root])

        def all_gather(group):
            outs = [place(torch.zeros(n, dtype=dt), strided and group is None)[0] for _ in range(p)]
            dist.all_gather(outs, place(ins[rank].clone(), strided and group is None)[0], group=group)
            return torch.cat(outs), None
        self.check(f"all_gather {tag}", all_gather, torch.cat(ins))

        def all_gather_into_tensor(group):
            out, base = place(torch.zeros(p * n, dtype=dt), strided and group is None)
            dist.all_gather_into_tensor(out, ins[rank].clone(), group=group)
            return out.clone(), base
        self.check(f"all_gather_into_tensor {tag}", all_gather_into_tensor, torch.cat(ins))

        def all_gather_in_place(group):  # FSDP's way: the input is this rank's chunk of the output
            out = torch.zeros(p * n, dtype=dt)
            chunk = out.narrow(0, rank * n, n)
            chunk.copy_(ins[rank])
            dist.all_gather_into_tensor(out, chunk, group=group)
            return out, None
        self.check(f"all_gather_into_tensor in-place {dt}", all_gather_in_place, torch.cat(ins))

        def gather(group):
            outs = [torch.zeros(n, dtype=dt) for _ in range(p)] if rank == root else None
            x, _ = place(ins[rank].clone(), strided and group is None)
            dist.gather(x, outs, dst=root, group=group)
            return (torch.cat(outs) if rank == root else None), None
        self.check(f"gather root={root} {tag}", gather, torch.cat(ins))

        src = [[inp(r, dt, (n,), salt * 17 + j) for j in range(p)] for r in range(p)]

        def scatter(group):
            out, base = place(torch.zeros(n, dtype=dt), strided and group is None)
            dist.scatter(out, [t.clone() for t in src[root]] if rank == root else None, src=root, group=group)
            return out.clone(), base
        self.check(f"scatter root={root} {tag}", scatter, src[root][rank])

        def all_to_all_single(group):
            out, base = place(torch.zeros(p * n, dtype=dt), strided and group is None)
            dist.all_to_all_single(out, torch.cat(src[rank]), group=group)
            return out.clone(), base
        self.check(f"all_to_all_single {tag}", all_to_all_single, torch.cat([src[q][rank] for q in range(p)]))

        # Uneven splits: rank r sends q+1+r rows to rank q.
        rows = lambda r, q: q + 1 + r  # noqa: E731
        uneven = [[inp(r, dt, (rows(r, q), 2), salt * 13 + q) for q in range(p)] for r in range(p)]

        def all_to_all_splits(group):
            out = torch.zeros(sum(rows(q, rank) for q in range(p)), 2, dtype=dt)
            dist.all_to_all_single(out, torch.cat(uneven[rank]), output_split_sizes=[rows(q, rank) for q in range(p)],
                                   input_split_sizes=[rows(rank, q) for q in range(p)], group=group)
            return out, None
        self.check(f"all_to_all_single splits {dt}", all_to_all_splits, torch.cat([uneven[q][rank] for q in range(p)]))

        def all_to_all(group):
            outs = [torch.zeros(rows(q, rank), 2, dtype=dt) for q in range(p)]
            dist.all_to_all(outs, [t.clone() for t in uneven[rank]], group=group)
            return torch.cat(outs), None
        self.check(f"all_to_all {dt}", all_to_all, torch.cat([uneven[q][rank] for q in range(p)]))

        def ring(group):  # send to the right, receive from the left, blocking and async
            right, left = (rank + 1) % p, (rank - 1) % p
            out = torch.zeros(n, dtype=dt)  # (the gloo group spans every rank: same numbering)
            reqs = [dist.isend(ins[rank].clone(), right, group=group), dist.irecv(out, left, group=group)]
            for q in reqs:
                q.wait()
            return out, None
        self.check(f"isend/irecv {dt}", ring, ins[(rank - 1) % p])

    def coalesced(self, salt):
        rank, p = self.rank, self.p
        shapes = [(3,), (2, 2), (5,)]
        ins = [[inp(r, torch.float32, s, salt + i) for i, s in enumerate(shapes)] for r in range(p)]
        exp = torch.cat([ref_reduce([ins[r][i] for r in range(p)], R.SUM).reshape(-1) for i in range(len(shapes))])

        def all_reduce_coalesced(group):
            ts = [t.clone() for t in ins[rank]]
            dist.all_reduce_coalesced(ts, group=group)
            return torch.cat([t.reshape(-1) for t in ts]), None
        self.check("all_reduce_coalesced", all_reduce_coalesced, exp)

        def all_gather_coalesced(group):
            outs = [[torch.zeros(s) for s in shapes] for _ in range(p)]
            dist.all_gather_coalesced(outs, [t.clone() for t in ins[rank]], group=group)
            return torch.cat([t.reshape(-1) for lst in outs for t in lst]), None
        self.check("all_gather_coalesced", all_gather_coalesced,
                   torch.cat([t.reshape(-1) for r in range(p) for t in ins[r]]))

    def complex_and_errors(self):
        rank, p = self.rank, self.p
        ins = [torch.complex(inp(r, torch.float32, (4,), 5), inp(r, torch.float32, (4,), 6)) for r in range(p)]

        def all_reduce_complex(group):
            x = ins[rank].clone()
            dist.all_reduce(x, group=group)
            return x, None
        self.check("all_reduce complex64", all_reduce_complex, sum(ins[1:], ins[0]))
        # A bitwise op on floats is an error naming the call, raised on every rank alike.
        try:
            dist.all_reduce(torch.ones(2), op=R.BAND)
            self.failures.append("all_reduce BAND float32: no error")
        except RuntimeError as e:
            if "all_reduce" not in str(e) or "band" not in str(e):
                self.failures.append(f"all_reduce BAND float32: unhelpful error: {e}")

    def run(self):
        salt = 1
        for dt in DTYPES:
            for strided in (False, True):
                for op in REDOPS:
                    if valid(dt, op):
                        salt += 1
                        self.reductions(dt, op, strided, salt)
                salt += 1
                self.movement(dt, strided, salt)
        self.coalesced(salt + 1)
        self.complex_and_errors()
        dist.barrier()
        report(checks=self.checks, vs_gloo=self.vs_gloo, gloo_unsupported=self.gloo_unsupported,
               failures=self.failures[:20], nfailures=len(self.failures))


main({"matrix": lambda: Matrix().run()})

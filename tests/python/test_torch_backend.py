"""The torch.distributed backend "dtrain", in real processes (ctest labels: python, multiprocess).

Each test starts its ranks (tests/python/launch.py) and asserts on what every rank reported.
Skipped where torch or the built extension is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("dtrain._torch")

from launch import HERE, assert_all_ok, free_port, run_ranks  # noqa: E402


@pytest.mark.parametrize("n,how", [(2, "dtrain"), (3, "file")])
def test_every_op_dtype_and_reduce_op_matches_gloo_and_reference(n, how):
    # 2 ranks start under `dtrain run` with torch's env:// rendezvous on the launcher's
    # MASTER_PORT (it used to be the dtrain store's port: "Address already in use").
    ranks = run_ranks(n, "matrix_worker.py", ["matrix"], how=how, timeout=240)
    assert_all_ok(ranks)
    for r in ranks:
        res = r.result()
        assert res["nfailures"] == 0, f"rank {r.rank}: {res['failures']}"
        assert res["checks"] >= 700
        assert res["vs_gloo"] >= 250  # the cases gloo supports were compared with it too


@pytest.mark.parametrize("hook", ["none", "allreduce"])
def test_ddp_two_ranks_equals_one_process(hook):
    ranks = run_ranks(2, "train_worker.py", ["ddp", hook], how="tcp", timeout=120)
    assert_all_ok(ranks)
    for r in ranks:
        res = r.result()
        assert res["across_ranks"] == 0.0
        assert res["vs_reference"] <= 1e-6


@pytest.mark.parametrize("hook", ["fp16", "powersgd"])
def test_ddp_compressing_hooks_run_and_agree_across_ranks(hook):
    # Lossy hooks: identical parameters on every rank, close to the reference. PowerSGD waits on
    # a later all-reduce inside a future callback: this deadlocks if callbacks ran on the
    # thread that runs the collectives.
    ranks = run_ranks(2, "train_worker.py", ["ddp", hook], how="file", timeout=120)
    assert_all_ok(ranks)
    for r in ranks:
        res = r.result()
        assert res["finite"] and res["across_ranks"] == 0.0
        assert res["vs_reference"] < 0.05


def test_subgroups_run_concurrently_without_mixing_messages():
    ranks = run_ranks(3, "train_worker.py", ["groups"], how="file", timeout=120)
    assert_all_ok(ranks)
    res = [r.result() for r in ranks]
    for x in res:
        assert x["world"] == [3.0, 3.0, 3.0] and x["gloo"] == [3.0, 3.0, 3.0]
    assert res[0]["a"] == [4.0] and res[2]["a"] == [4.0]      # ranks 0 and 2: 1 + 3
    assert res[1]["b"] == [50.0] and res[2]["b"] == [50.0]    # ranks 1 and 2: 20 + 30
    assert [x["group_rank_a"] for x in res] == [0, -1, 1]


def test_receive_from_any_source_matches_gloo():
    ranks = run_ranks(3, "train_worker.py", ["anysource"], how="file", timeout=120)
    assert_all_ok(ranks)
    res = ranks[0].result()
    for backend in ("dtrain", "gloo"):
        got = res[backend]
        world, sub = got[:-1], got[-1]
        for src, sender, _ in world:
            assert src == sender, f"{backend}: torch says {src}, the message is from {sender}"
        assert sorted((s, i) for _, s, i in world) == [(1, 0), (1, 1), (2, 0), (2, 1)], f"{backend}: {world}"
        assert sub == [2, 2, 9], f"{backend} subgroup: {sub}"  # dist.recv gives the global rank
    # Per sender, dtrain keeps the order the messages were sent in.
    assert [i for _, s, i in res["dtrain"][:-1] if s == 1] == [0, 1]
    assert "recv from any source" in res["timeout"] and "timed out" in res["timeout"], res["timeout"]
    assert "no rank sent a message with this tag" in res["timeout"], res["timeout"]
    assert res["timeout_s"] < 30


# Debian's /usr/bin/torchrun (torch 1.13, Python 3.11) fails in its own code before starting a
# worker (Std.from_str, see python/dtrain/torchrun.py). `python3 -m torch.distributed.run` works
# with --redirects/--tee set to a value it can parse; `python3 -m dtrain.torchrun` repairs the
# parsing and takes torchrun's command line unchanged (--tee 3 here: a value torch's own parser
# cannot read on 3.11; it prefixes each rank's lines).
@pytest.mark.parametrize("launcher", [["-m", "torch.distributed.run", "--redirects", "1", "--tee", "1"],
                                      ["-m", "dtrain.torchrun", "--tee", "3"]], ids=["torch.distributed.run", "dtrain.torchrun"])
def test_torchrun_two_ranks_all_reduce_and_ddp(launcher):
    cmd = [sys.executable, *launcher, "--nnodes", "1", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), os.path.join(HERE, "train_worker.py"), "torchrun"]
    with tempfile.TemporaryDirectory(prefix="dtrain-torchrun-") as tmp:
        # TMPDIR: torchrun's agent makes its log directory (torchelastic_*) there and never
        # removes it; here it goes with tmp.
        env = dict(os.environ, OMP_NUM_THREADS="1", TORCHELASTIC_ERROR_FILE=os.path.join(tmp, "error.json"),
                   TMPDIR=tmp)
        env.pop("DTRAIN_STORE", None)
        p = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{cmd} exited with {p.returncode}:\n{p.stderr[-4000:]}"
    # With --tee each line is prefixed "[default<local rank>]:".
    lines = [l.split("]:", 1)[1] if l.startswith("[default") else l for l in p.stdout.splitlines()]
    res = {r["rank"]: r for r in (json.loads(l[len("RESULT "):]) for l in lines if l.startswith("RESULT "))}
    assert sorted(res) == [0, 1], p.stdout[-3000:]
    for r in res.values():
        assert r["size"] == 2 and r["sum"] == [3.0] * 4
        assert r["across_ranks"] == 0.0 and r["grad_nonzero"] and r["elastic"]


def test_fsdp_style_all_gather_and_reduce_scatter():
    ranks = run_ranks(2, "train_worker.py", ["fsdp"], how="env", timeout=60)  # torchrun's env://
    assert_all_ok(ranks)
    for r in ranks:
        res = r.result()
        assert res["gather_ok"] and res["same_object"]
        assert res["scatter_err"] == 0.0


def test_init_with_store_argument():
    with tempfile.TemporaryDirectory() as tmp:
        ranks = run_ranks(2, "train_worker.py", ["store"], how="file", timeout=60,
                          env={"DTRAIN_TEST_STORE": os.path.join(tmp, "store")})
    assert_all_ok(ranks)
    assert [r.result()["sum"] for r in ranks] == [1.0, 1.0]


def test_killed_rank_is_named_on_every_survivor_within_the_timeout():
    ranks = run_ranks(3, "train_worker.py", ["killed"], how="file", timeout=90)
    assert ranks[2].code == 3
    for r in ranks[:2]:
        assert r.code == 0, r.err[-3000:]
        res = r.result()
        assert res["type"] == "PeerFailure" and res["module"] == "dtrain._core"
        assert f"rank {r.rank}" in res["error"] and "all_reduce" in res["error"]
        assert "rank 2" in res["error"] and "exited" in res["error"]
        assert res["seconds"] < res["timeout"]


def test_desync_names_both_calls_within_the_timeout():
    ranks = run_ranks(3, "train_worker.py", ["desync"], how="file", timeout=90)
    assert_all_ok(ranks)
    res = [r.result() for r in ranks]
    for r, x in zip(ranks, res):
        assert x["error"], f"rank {r.rank} raised nothing"
        assert f"rank {r.rank}" in x["error"] and x["seconds"] < x["timeout"]
        assert x["module"] == "dtrain._core"
    # Rank 0 (the culprit, all_reduce) and rank 1 learn both calls; rank 2, whose broadcast
    # meets rank 0's all-reduce message, learns that rank 0 sent something else.
    for x in res[:2]:
        assert x["type"] == "Desync" and "allreduce" in x["error"] and "broadcast" in x["error"]
    assert "rank 0" in res[2]["error"]

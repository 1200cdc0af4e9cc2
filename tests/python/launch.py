"""Starting the ranks of a multi-process test, and reading what each one reported.

``run_ranks(n, script, args, ...)`` starts ``n`` copies of ``script`` (a worker in this folder)
either through ``dtrain run -n N`` (torch's ``env://`` rendezvous, with the launcher's
``MASTER_ADDR``/``MASTER_PORT``) or as plain processes that meet through a ``file://`` or
``tcp://`` init method given in ``DTRAIN_TEST_INIT``, or through ``env://`` with the variables
torchrun exports (Debian's torchrun 1.13 itself fails on Python 3.11, in its own code). Every wait is bounded by ``timeout``;
a rank still running then is killed and the test fails naming it. Returns one ``Rank`` per
process with its exit code and output; a worker reports results as JSON lines starting with
``RESULT `` on stdout.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


class Rank:
    def __init__(self, rank, code, out, err):
        self.rank, self.code, self.out, self.err = rank, code, out, err
        self.results = [json.loads(l[len("RESULT "):]) for l in out.splitlines() if l.startswith("RESULT ")]

    def result(self):
        assert self.results, f"rank {self.rank} reported nothing; stderr:\n{self.err[-3000:]}"
        return self.results[-1]


def dtrain_bin():
    b = os.environ.get("DTRAIN_BIN")
    if b and os.path.exists(b):
        return b
    root = os.path.dirname(os.path.dirname(HERE))
    return os.path.join(root, "build", "bin", "dtrain")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(n, script, args=(), how="file", timeout=120, env=None):
    """Runs n ranks of tests/python/<script>; how: 'dtrain' (dtrain run, env://), 'file', 'tcp',
    or 'env' (torchrun's variables: MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK, env://)."""
    path = os.path.join(HERE, script)
    base_env = dict(os.environ)
    base_env.update(env or {})
    base_env.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="dtrain-pytest-") as tmp:
        if how == "dtrain":
            base_env["DTRAIN_TEST_INIT"] = "env://"
            cmd = [dtrain_bin(), "run", "-n", str(n), "--", PY, path, *args]
            p = subprocess.Popen(cmd, env=base_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                raise AssertionError(f"dtrain run -n {n} {script} still running after {timeout} s:\n{err[-3000:]}")
            # dtrain run merges the ranks' stdout; each RESULT line carries its rank.
            ranks = []
            lines = [l.split("] ", 1)[1] if l.startswith("[rank ") and "] " in l else l for l in out.splitlines()]
            for r in range(n):
                mine = "\n".join(l for l in lines if l.startswith("RESULT ") and json.loads(l[7:]).get("rank") == r)
                ranks.append(Rank(r, p.returncode, mine, err))
            return ranks
        init = {"file": f"file://{tmp}/rendezvous", "tcp": f"tcp://127.0.0.1:{free_port()}", "env": "env://"}[how]
        torchrun_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())} if how == "env" else {}
        procs = []
        for r in range(n):
            e = dict(base_env, DTRAIN_TEST_INIT=init, RANK=str(r), WORLD_SIZE=str(n), **torchrun_env)
            if how == "env":  # what torchrun exports
                e.update(LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(n))
            procs.append(subprocess.Popen([PY, path, *args], env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        deadline = time.monotonic() + timeout
        ranks = []
        for r, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # Ask every rank still running for its threads' stacks (worker_common.py
                # registers SIGUSR1 with faulthandler), then end them all.
                for q in procs:
                    if q.poll() is None:
                        q.send_signal(signal.SIGUSR1)
                stacks = []
                for k, q in enumerate(procs[r:], start=r):
                    try:
                        _, e = q.communicate(timeout=5)
                    except subprocess.TimeoutExpired:
                        q.kill()
                        _, e = q.communicate()
                    stacks.append(f"--- rank {k} stderr:\n{e[-3000:]}")
                for q in procs:
                    if q.poll() is None:
                        q.kill()
                raise AssertionError(f"rank {r} of {script} still running after {timeout} s:\n" + "\n".join(stacks))
            ranks.append(Rank(r, p.returncode, out, err))
        return ranks


def assert_all_ok(ranks):
    for r in ranks:
        assert r.code == 0, f"rank {r.rank} exited with {r.code}; stderr:\n{r.err[-4000:]}"

"""The dtrain Python module without torch (ctest labels: python, multiprocess).

In-process checks of the cost model and rank information, and a 3-rank run under
`dtrain run` of every collective on NumPy arrays (tests/python/core_worker.py).
"""
import pytest

np = pytest.importorskip("numpy")
dtrain = pytest.importorskip("dtrain")

from launch import assert_all_ok, run_ranks  # noqa: E402


def test_plan_collective_matches_the_cli_choice_rules():
    rows = dtrain.plan_collective("allreduce", 8, "64M")
    assert sum(r["chosen"] for r in rows) == 1
    assert {r["algorithm"] for r in rows} >= {"ring", "tree"}
    for r in rows:
        assert r["seconds"] > 0 and r["busbw_gbps"] > 0
    assert rows == dtrain.plan_collective("allreduce", 8, 64 << 20)
    with pytest.raises(dtrain.InvalidArgument):
        dtrain.plan_collective("allreduce", 8, "64 parsecs")


def test_version_is_the_builds():
    assert dtrain.__version__.count(".") == 2
    assert dtrain.__revision__  # the git revision, as `dtrain --version` prints it


def test_single_process_world_and_errors():
    info = dtrain.world_info()
    assert info["size"] >= 1 and 0 <= info["rank"] < info["size"]
    if info["size"] != 1:
        pytest.skip("runs in a single-process environment only")
    comm = dtrain.Communicator.from_env()
    x = np.arange(6, dtype=np.float32)
    comm.allreduce(x, op="avg")
    assert x.tolist() == list(range(6))
    with pytest.raises(dtrain.InvalidArgument, match="C-contiguous"):
        comm.allreduce(np.zeros((3, 3))[:, 0])
    with pytest.raises(dtrain.InvalidArgument, match="band"):
        comm.allreduce(np.zeros(3, dtype=np.float32), op="band")
    with pytest.raises(dtrain.InvalidArgument, match="unknown reduce op"):
        comm.allreduce(x, op="median")
    assert issubclass(dtrain.PeerFailure, dtrain.Error) and issubclass(dtrain.Error, RuntimeError)


def test_numpy_collectives_under_dtrain_run():
    ranks = run_ranks(3, "core_worker.py", how="dtrain", timeout=120)
    assert_all_ok(ranks)
    for r in ranks:
        assert r.result()["failures"] == []

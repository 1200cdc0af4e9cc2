#!/usr/bin/env python3
"""Test of scripts/repredict_validation.py on a validation made up here.

Usage: repredict_validation_test.py BUILD_DIR   (the directory holding bin/dtrain)

Two recorded runs: a sync ps run with its flags beside it (validate_planner.sh's .args) and
a ddp run without (the script's own flags for the row). Each recorded prediction is made by
`dtrain plan run` first, so the script must reprice both to the same step; then a recorded
step is changed and the script must report the recorded and new errors apart. A run whose
flags contradict its report is named and left out, not priced.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CALIBRATION = {"version": 3, "shm": {"alpha_us": 2, "beta_gbps": 3, "gamma_gbps": 4},
               "tcp": {"alpha_us": 10, "beta_gbps": 1, "gamma_gbps": 4}}


def report(strategy, ranks):
    return {"strategy": strategy, "world_size": ranks, "model": "mlp:784-256-128-10", "batch": 64,
            "examples_per_second": 40000.0, "train_heap_mb": 4.2}


def main():
    build = sys.argv[1]
    binary = os.path.join(build, "bin", "dtrain")
    with tempfile.TemporaryDirectory() as out:
        cal = os.path.join(out, "calibration.json")
        json.dump(CALIBRATION, open(cal, "w"))
        env = dict(os.environ, DTRAIN_CALIBRATION=cal)
        runs = {"ps-n4-r1": (report("ps", 4), ["-n", "4", "--strategy", "ps", "--servers", "1", "--sync", "--model",
                                               "mlp:784-256-128-10", "--epochs", "1"], True),
                "ddp-n2-r1": (report("ddp", 2), ["-n", "2", "--strategy", "ddp", "--model", "mlp:784-256-128-10",
                                                 "--epochs", "1"], False)}
        for name, (run, flags, with_args) in runs.items():
            path = os.path.join(out, name + ".json")
            json.dump(run, open(path, "w"))
            got = subprocess.run([binary, "plan", "run", path] + flags, env=env, capture_output=True, text=True,
                                 check=True)
            run["prediction"] = json.loads(got.stdout)
            json.dump(run, open(path, "w"))
            if with_args:
                open(os.path.join(out, name + ".args"), "w").write("\n".join(flags) + "\n")

        def reprice(*extra):
            r = subprocess.run([sys.executable, os.path.join(HERE, "repredict_validation.py"), out, "--build", build,
                                "--runs"] + list(extra), env=env, capture_output=True, text=True, check=True)
            return r.stdout

        text = reprice()
        rows = {line.split()[0]: line for line in text.splitlines() if line and not line.startswith(" ")}
        assert "ps" in rows and "ddp" in rows, text
        for name in ("ps", "ddp"):
            # Same model, same measurements: the new price is the recorded one.
            parts = rows[name].split()
            assert parts[parts.index("recorded") + 1] == parts[parts.index("new") + 1], rows[name]
        assert "recorded: step median" in text and "new: step median" in text, text

        # A recorded prediction from another model: the script tells the two apart.
        path = os.path.join(out, "ps-n4-r1.json")
        run = json.load(open(path))
        new_ms = run["prediction"]["step_ms"]
        run["prediction"]["step_ms"] = 2 * run["prediction"]["measured_step_ms"]
        json.dump(run, open(path, "w"))
        text = reprice("--only", "^ps$")
        line = [x for x in text.splitlines() if x.startswith("ps ")][0]
        assert "+100.0% ->" in line, line
        assert f"new {new_ms:9.3f}" in line, (line, new_ms)
        assert "ddp" not in [x.split()[0] for x in text.splitlines() if x and not x.startswith(" ")], text

        # Flags that contradict the report: named, not priced.
        open(os.path.join(out, "ps-n4-r1.args"), "w").write("-n\n8\n--strategy\nps\n--sync\n")
        text = reprice("--only", "^ps$")
        assert "ps-n4-r1.json: dtrain plan run failed" in text and "--ranks" in text, text
        assert not [x for x in text.splitlines() if x.startswith("ps ")], text
    print("repredict_validation_test: ok")


if __name__ == "__main__":
    main()

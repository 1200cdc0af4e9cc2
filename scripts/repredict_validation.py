#!/usr/bin/env python3
"""Re-predict a validation table (scripts/validate_planner.sh's $OUT) with another build.

For every row of OUT/table.tsv it asks `dtrain plan train` (same model, ranks, strategy and
batch as the recorded run, and OUT's calibration unless --calibration says otherwise) for
every layout, takes the one the run recorded (its prediction's "layout"), and prints the
recorded prediction, the new one and the measured step with both errors, and the same for
the predicted memory against the measured training heap. This separates a
model change from the machine's moods: same measurements, two predictions.
Rows the layout string does not pin down keep their recorded prediction and are marked so:
ps (--sync, --servers) and fedavg (its rounds and clients), and any layout the plan does not
enumerate.

Usage: scripts/repredict_validation.py OUT [--build build] [--calibration FILE] [--mixed]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess


def cores_of(run):
    """The cores' verdict a run was priced with: its 2-rank context's, else the probe after its
    last step, else the launcher's (a run whose two probes differ was priced half with each;
    here, with the later one)."""
    return run.get("shm_cores") or run.get("cores_probed_end") or run.get("cores_probed", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--build", default="build")
    ap.add_argument("--calibration")
    ap.add_argument("--mixed", action="store_true", help="ignore the runs' core verdicts")
    a = ap.parse_args()
    env = dict(os.environ, DTRAIN_CALIBRATION=a.calibration or os.path.join(a.out, "calibration.json"))
    binary = os.path.join(a.build, "bin", "dtrain")
    plans, errs, mem_errs = {}, [], []
    for line in open(os.path.join(a.out, "table.tsv")):
        f = line.rstrip("\n").split("\t")
        name, n, pred, meas = f[0], f[1], float(f[2]), float(f[3])
        runs = sorted(glob.glob(os.path.join(a.out, f"{name}-n{n}.json")) +
                      glob.glob(os.path.join(a.out, f"{name}-n{n}-r*.json")))
        if not runs or meas <= 0:
            continue
        run = json.load(open(runs[0]))
        layout = run["prediction"]["layout"]
        # A 2-rank run records its context's probe verdict, any run the launcher's probe of the
        # cores; price the row with the verdict most of its runs had (dtrain plan train
        # --cores), as each run's own prediction did. --mixed: the calibration's mixed figures.
        verdicts = ["" if a.mixed else cores_of(json.load(open(x))) for x in runs]
        cores = max(set(verdicts), key=verdicts.count) if verdicts else ""
        key = (run["model"], n, layout.split()[0], run["batch"], cores)
        if key not in plans:
            r = subprocess.run([binary, "plan", "train", "--model", key[0], "--ranks", n, "--strategy", key[2],
                                "--batch", str(key[3]), "--json", "--top", "1000000"] +
                               (["--cores", cores] if cores in ("close", "far") else []),
                               capture_output=True, text=True, env=env, check=True)
            plans[key] = {x["layout"]: (x["step_ms"], x["memory_mb"]) for x in json.loads(r.stdout)["layouts"]}
        got = plans[key].get(layout) if key[2] not in ("ps", "fedavg") else None
        mark = ""
        pmb, mmb = float(f[5]), float(f[6])
        if got is None:
            new, new_mb, mark = pred, pmb, "  (recorded prediction kept: the layout does not pin it down)"
        else:
            new, new_mb = got
        errs.append(abs(new / meas - 1) * 100)
        if mmb > 0:
            mem_errs.append(new_mb / mmb - 1)
        print(f"{name:20s} {n:>2s} {layout:36s} recorded {pred:9.3f} new {new:9.3f} measured {meas:9.3f} ms"
              f"  {100 * (pred / meas - 1):+6.1f}% -> {100 * (new / meas - 1):+6.1f}%;"
              f" memory {pmb:7.2f} -> {new_mb:7.2f} MB against {mmb:7.2f}"
              f" ({100 * (pmb / mmb - 1) if mmb > 0 else 0:+5.1f}% -> {100 * (new_mb / mmb - 1) if mmb > 0 else 0:+5.1f}%){mark}")
    if errs:
        print(f"new: median {statistics.median(errs):.1f}%, {sum(e <= 10 for e in errs)} of {len(errs)} within 10%, "
              f"worst {max(errs):.1f}%")
    if mem_errs:
        print(f"new memory: {sum(abs(e) <= 0.10 for e in mem_errs)} of {len(mem_errs)} within 10%, "
              f"{sum(e < -0.05 for e in mem_errs)} under by more than 5%")


if __name__ == "__main__":
    main()

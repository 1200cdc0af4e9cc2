#!/usr/bin/env python3
"""Re-rank a plan-quality sweep (scripts/plan_quality.py's --out folder) with another build.

plan_quality.py leaves one `dtrain train --json` file per run in its folder (n{N}-{i}-r{rep}.json,
each with its layout and measured step). This script takes each layout's median measured step,
asks `dtrain plan train` of the given build for every layout at the same ranks and batch, with
the calibration the sweep used, and prints what the build would have chosen among the measured
layouts: its measured step against the best measured one, where the best measured one ranks,
the rank correlation between predicted and measured, and the median error. The measurements
stay the same; only the model changes. So a change to the model can be judged on sweeps
already run instead of a new sweep on a machine whose speed moves between runs.

The build may choose a layout the sweep did not measure; the choice here is among the
measured ones.

Usage: scripts/repredict_plan_quality.py OUT --calibration FILE [--build build] [--model gpt:...]
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

GPT = "gpt:layers=6,heads=8,width=128,context=64"  # plan_quality.py's model


def ranks_of(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0] * len(values)
    for k, i in enumerate(order):
        r[i] = k
    return r


def spearman(a, b):
    n = len(a)
    if n < 3:
        return float("nan")
    ra, rb = ranks_of(a), ranks_of(b)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--calibration", required=True, help="the calibration file the sweep was predicted with")
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default=GPT)
    a = ap.parse_args()
    runs = {}  # (ranks, batch) -> layout -> [measured step ms]
    for f in sorted(glob.glob(os.path.join(a.out, "n*-*-r*.json"))):
        if not re.match(r"n\d+-\d+-r\d+\.json$", os.path.basename(f)):
            continue
        try:
            j = json.load(open(f))
            p = j["prediction"]
            key = (int(j["world_size"]), int(j["batch"]))
            runs.setdefault(key, {}).setdefault(p["layout"], []).append(float(p["measured_step_ms"]))
        except (OSError, ValueError, KeyError) as e:
            print(f"skipping {f}: {e}", file=sys.stderr)
    if not runs:
        sys.exit(f"{a.out}: no plan_quality.py runs (n*-*-r*.json) found")
    env = dict(os.environ, DTRAIN_CALIBRATION=a.calibration)
    binary = os.path.join(a.build, "bin", "dtrain")
    for (n, batch), layouts in sorted(runs.items()):
        plan = json.loads(subprocess.run([binary, "plan", "train", "--model", a.model, "--ranks", str(n), "--batch",
                                          str(batch), "--top", "100000", "--json"], env=env, check=True,
                                         capture_output=True, text=True).stdout)
        pred = {l["layout"]: l["step_ms"] for l in plan["layouts"]}
        rows = [(name, pred[name], statistics.median(ms)) for name, ms in layouts.items() if name in pred]
        missing = len(layouts) - len(rows)
        if not rows:
            print(f"{n} ranks, batch {batch}: none of the {len(layouts)} measured layouts is among the plan's")
            continue
        rows.sort(key=lambda r: r[1])
        best = min(r[2] for r in rows)
        chosen = rows[0]
        at = [r[2] for r in rows].index(best) + 1
        err = statistics.median(abs(p / m - 1) * 100 for _, p, m in rows)
        rho = spearman([r[1] for r in rows], [r[2] for r in rows])
        print(f"== {n} ranks, batch {batch}: {len(rows)} measured layouts"
              + (f" ({missing} the plan does not enumerate)" if missing else ""))
        print(f"{'#':>3}  {'layout':<52} {'pred ms':>9} {'meas ms':>9} {'error':>8}")
        for k, (name, p, m) in enumerate(rows, 1):
            print(f"{k:>3}  {name:<52} {p:9.2f} {m:9.2f} {(p / m - 1) * 100:+7.1f}%")
        print(f"chosen among them: {chosen[0]}, measured {chosen[2]:.2f} ms, {(chosen[2] / best - 1) * 100:+.1f}% from "
              f"the best measured; the best measured ranks #{at}; rank correlation {rho:.2f}; median |error| {err:.1f}%")


if __name__ == "__main__":
    main()

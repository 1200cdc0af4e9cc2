#!/usr/bin/env python3
"""Re-predict a validation table (scripts/validate_planner.sh's $OUT) with another build.

Every recorded run (OUT/NAME-nN-rR.json) is priced again with `dtrain plan run`: the same
prediction object the run recorded, from its own measurements (the cores' samples while it
ran, the steady step, the heap), made by this build against OUT's calibration (or
--calibration). The run's flags come from OUT/NAME-nN-rR.args, which validate_planner.sh
writes beside each run; validations recorded before that are given the flags
validate_planner.sh passes for NAME (FLAGS below, kept in step with it by hand).
Each row's error is the median of its runs' errors, as validate_planner.sh computes it, and
the table ends with the same two lines against the targets, recorded and new. This separates
a model change from the machine's moods: same measurements, two predictions.

Usage: scripts/repredict_validation.py OUT [--build build] [--calibration FILE] [--only REGEX]
       [--runs]   (one line per run, not only per row)
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess

MLP = ["--model", "mlp:784-256-128-10", "--epochs", "1"]
GPT = ["--model", "gpt:layers=6,heads=8,width=128,context=64", "--steps", "8", "--eval-batches", "1"]


def flags_for(name, n):
    """validate_planner.sh's flags for row NAME at N ranks (for OUTs without .args files)."""
    mlp = {"ddp": ["--strategy", "ddp"], "ddp-zero2": ["--strategy", "ddp", "--zero", "2"],
           "localsgd": ["--strategy", "localsgd"], "gossip": ["--strategy", "gossip"],
           "ps": ["--strategy", "ps", "--servers", "1", "--sync"]}
    if name in mlp:
        return mlp[name] + MLP
    if name == "fedavg":
        return ["--strategy", "fedavg"] + MLP[:2] + ["--epochs", "4"]
    gpt = {"gpt-zero1": ["--strategy", "zero", "--zero", "1", "--batch", str(12 * n)],
           "gpt-zero3": ["--strategy", "zero", "--zero", "3", "--batch", str(12 * n)],
           "gpt-tp": ["--strategy", "tp", "--batch", "12"],
           "gpt-pp-1f1b": ["--strategy", "pp", "--microbatches", str(2 * n), "--schedule", "1f1b", "--batch", str(4 * n)],
           "gpt-pp-gpipe": ["--strategy", "pp", "--microbatches", str(2 * n), "--schedule", "gpipe",
                            "--batch", str(4 * n)],
           "gpt-pp-interleaved": ["--strategy", "pp", "--microbatches", str(2 * n), "--schedule", "interleaved",
                                  "--virtual-stages", "2", "--batch", str(4 * n)],
           "gpt-hybrid": ["--strategy", "hybrid", "--dp", "2", "--tp", "1", "--pp", str(n // 2), "--microbatches", "4",
                          "--batch", "16"],
           "gpt-hybrid-tp": ["--strategy", "hybrid", "--dp", str(n // 4), "--tp", "2", "--pp", "2", "--microbatches",
                             "4", "--batch", "16"]}
    if name in gpt:
        return gpt[name] + GPT
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--build", default="build")
    ap.add_argument("--calibration")
    ap.add_argument("--only", help="rows whose name matches this regular expression")
    ap.add_argument("--runs", action="store_true", help="print every run, not only each row's median")
    a = ap.parse_args()
    env = dict(os.environ, DTRAIN_CALIBRATION=a.calibration or os.path.join(a.out, "calibration.json"))
    binary = os.path.join(a.build, "bin", "dtrain")
    rows = {}  # (name, n) -> [(recorded, new, measured, recorded MB, new MB, measured MB)]
    pattern = re.compile(r"^(.*)-n(\d+)-r(\d+)\.json$")
    for path in sorted(glob.glob(os.path.join(a.out, "*-n*-r*.json"))):
        m = pattern.match(os.path.basename(path))
        if not m or (a.only and not re.search(a.only, m.group(1))):
            continue
        name, n = m.group(1), int(m.group(2))
        run = json.load(open(path))
        old = run.get("prediction", {})
        if old.get("measured_step_ms", 0) <= 0:
            continue
        args_path = path[:-len(".json")] + ".args"
        if os.path.exists(args_path):
            flags = [x for x in open(args_path).read().split("\n") if x]
        else:
            flags = flags_for(name, n)
            if flags is None:
                print(f"{os.path.basename(path)}: no .args beside it and no known flags for '{name}'; left out")
                continue
            flags = ["-n", str(n)] + flags
        r = subprocess.run([binary, "plan", "run", path] + flags, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(f"{os.path.basename(path)}: dtrain plan run failed: {r.stderr.strip()}")
            continue
        new = json.loads(r.stdout)
        if "error" in new:
            print(f"{os.path.basename(path)}: {new['error']}")
            continue
        meas = old["measured_step_ms"]
        row = (old["step_ms"], new["step_ms"], meas, old.get("memory_mb", 0), new.get("memory_mb", 0),
               old.get("measured_train_heap_mb", 0))
        rows.setdefault((name, n), []).append(row)
        if a.runs:
            share = new.get("cores_far_share", "-")
            print(f"  {os.path.basename(path):28s} far {share if isinstance(share, str) else f'{share:.2f}':>4s}"
                  f"  recorded {row[0]:9.3f} new {row[1]:9.3f} measured {meas:9.3f} ms"
                  f"  {100 * (row[0] / meas - 1):+6.1f}% -> {100 * (row[1] / meas - 1):+6.1f}%")
    old_errs, new_errs, old_mem, new_mem = [], [], [], []
    for (name, n), runs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        e_old = statistics.median((x[0] / x[2] - 1) * 100 for x in runs)
        e_new = statistics.median((x[1] / x[2] - 1) * 100 for x in runs)
        heaps = [x for x in runs if x[5] > 0]
        m_old = statistics.median((x[3] / x[5] - 1) * 100 for x in heaps) if heaps else 0
        m_new = statistics.median((x[4] / x[5] - 1) * 100 for x in heaps) if heaps else 0
        old_errs.append(abs(e_old))
        new_errs.append(abs(e_new))
        if heaps:
            old_mem.append(m_old)
            new_mem.append(m_new)
        print(f"{name:20s} {n:2d}  recorded {statistics.median(x[0] for x in runs):9.3f} new "
              f"{statistics.median(x[1] for x in runs):9.3f} measured {statistics.median(x[2] for x in runs):9.3f} ms"
              f"  {e_old:+6.1f}% -> {e_new:+6.1f}%;  memory {m_old:+5.1f}% -> {m_new:+5.1f}%  ({len(runs)} runs)")

    def summary(label, errs, mem):
        if not errs:
            return
        print(f"{label}: step median {statistics.median(errs):.1f}%, {sum(e <= 10 for e in errs)} of {len(errs)} "
              f"within 10%, {sum(e > 25 for e in errs)} beyond 25%, worst {max(errs):.1f}%; memory "
              f"{sum(abs(e) <= 10 for e in mem)} of {len(mem)} within 10%, most under {min(mem, default=0):+.1f}%")
    summary("recorded", old_errs, old_mem)
    summary("new", new_errs, new_mem)


if __name__ == "__main__":
    main()

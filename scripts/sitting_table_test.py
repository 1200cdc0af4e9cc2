#!/usr/bin/python3
"""Tests of scripts/sitting_table.py on sittings made up here: what it reads and how it decides.

The 2-rank ddp rows are paired within each round (bench_sitting.sh runs ddp, its ceiling and
PyTorch DDP twice a round in mirrored order, files NAME-rN and NAMEb-rN; 4-rank ddp too, since
2026-12-01, against 2-rank ddp): their ratio is the
median of the rounds' own ratios, not the ratio of the medians. The sittings below are built so
that the two disagree on the verdict, so the test fails if the table falls back to dividing
medians. Older sittings (one run a round, or one file in all) must still read, and a sitting
without the files must say "not measured", never guess.

Usage: sitting_table_test.py [-v]   (unittest; run by ctest as sitting_table_test)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sitting_table.py")
CEILING = "ddp 2 ranks vs the same job in 2 independent processes at batch 128"
TORCH = "ddp 2 ranks vs PyTorch DDP 2 ranks"
FOUR = "ddp 4 ranks on 2 cores vs 2 ranks"


def write_json(d, name, examples_per_second):
    with open(os.path.join(d, name), "w") as f:
        json.dump({"examples_per_second": examples_per_second}, f)


def write_round(d, stem, r, first, second):
    """Round r's two runs of a row run twice a round in mirrored order: STEM-rR and STEMb-rR."""
    write_json(d, f"{stem}-r{r}.json", first)
    write_json(d, f"{stem}b-r{r}.json", second)


def write_torch(d, name, samples_per_second):
    with open(os.path.join(d, name), "w") as f:
        f.write(f"TRAIN,ddp,1,2,256,128,60,40.0,{samples_per_second}\n")


def table(d):
    """{case prefix: (dtrain, peer, ratio, met)} of the rows the table printed for sitting d."""
    out = subprocess.run([sys.executable, TABLE, d], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6:
            for case in (CEILING, TORCH, FOUR):
                if cells[0].startswith(case):
                    rows[case] = (cells[1], cells[2], cells[3], cells[5])
    return rows


class PairedRounds(unittest.TestCase):
    def test_ratio_is_the_median_of_the_rounds_ratios(self):
        # Round means: ddp 9,100 / 7,000 / 8,900; ceiling 9,400 / 7,200 / 9,700; PyTorch
        # 5,000 / 4,000 / 5,000. Rounds' ratios to the ceiling 0.968, 0.972, 0.918 (median
        # 0.968: met), where the medians' ratio 8,900 / 9,400 = 0.947 would miss; to PyTorch
        # 1.82, 1.75, 1.78 (median 1.78: met), the medians' 8,900 / 5,000 = 1.78 alike.
        with tempfile.TemporaryDirectory() as d:
            for r, (a, b, ca, cb, ta, tb) in enumerate(((9000, 9200, 9300, 9500, 4900, 5100),
                                                        (6000, 8000, 7100, 7300, 4000, 4000),
                                                        (8800, 9000, 9700, 9700, 5000, 5000)), 1):
                write_round(d, "train-ddp-n2", r, a, b)
                write_round(d, "train-ceiling-ddp", r, ca, cb)
                write_torch(d, f"torch-ddp2-r{r}.csv", ta)
                write_torch(d, f"torch-ddp2b-r{r}.csv", tb)
            rows = table(d)
            self.assertEqual(rows[CEILING][0], "8,900 ex/s")
            self.assertTrue(rows[CEILING][1].startswith("9,400 ex/s"), rows[CEILING])
            self.assertEqual(rows[CEILING][2], "0.97x")
            self.assertEqual(rows[CEILING][3], "yes")
            self.assertEqual(rows[TORCH][2], "1.78x")
            self.assertEqual(rows[TORCH][3], "yes")
            self.assertTrue(os.path.exists(os.path.join(d, "table.md")))

    def test_four_ranks_are_paired_with_the_rounds_two_rank_runs(self):
        # 2-rank round means 10,000 / 8,000 / 10,000; 4-rank 9,200 / 7,600 / 8,600 (two runs
        # each). Rounds' ratios 0.92, 0.95, 0.86: median 0.92, met; the medians' ratio
        # 8,600 / 10,000 = 0.86 would miss.
        with tempfile.TemporaryDirectory() as d:
            for r, (a, b, fa, fb) in enumerate(((10000, 10000, 9000, 9400), (8000, 8000, 7600, 7600),
                                                 (10000, 10000, 8600, 8600)), 1):
                write_round(d, "train-ddp-n2", r, a, b)
                write_round(d, "train-ddp-n4", r, fa, fb)
            rows = table(d)
            self.assertEqual(rows[FOUR][0], "8,600 ex/s")
            self.assertEqual(rows[FOUR][2], "0.92x")
            self.assertEqual(rows[FOUR][3], "yes")

    def test_a_round_missing_on_one_side_is_left_out(self):
        # Round 3 has no ceiling: the rounds both sides have are 1 and 2 (ratios 0.90, 0.80).
        with tempfile.TemporaryDirectory() as d:
            for r, ddp in ((1, 9000), (2, 8000), (3, 1000)):
                write_json(d, f"train-ddp-n2-r{r}.json", ddp)
            for r in (1, 2):
                write_json(d, f"train-ceiling-ddp-r{r}.json", 10000)
            rows = table(d)
            self.assertEqual(rows[CEILING][2], "0.85x")
            self.assertEqual(rows[CEILING][3], "**no**")


class OlderSittings(unittest.TestCase):
    def test_one_run_a_round(self):
        with tempfile.TemporaryDirectory() as d:
            for r, (ddp, ceiling) in enumerate(((9600, 10000), (9000, 10000), (9900, 10000)), 1):
                write_json(d, f"train-ddp-n2-r{r}.json", ddp)
                write_json(d, f"train-ceiling-ddp-r{r}.json", ceiling)
            rows = table(d)
            self.assertEqual(rows[CEILING][2], "0.96x")
            self.assertEqual(rows[CEILING][3], "yes")

    def test_one_file_for_the_whole_sitting(self):
        with tempfile.TemporaryDirectory() as d:
            write_json(d, "train-ddp-n2.json", 9000)
            write_json(d, "train-ceiling-ddp.json", 10000)
            write_torch(d, "torch-ddp2.csv", 6000)
            rows = table(d)
            self.assertEqual(rows[CEILING][2], "0.90x")
            self.assertEqual(rows[CEILING][3], "**no**")
            self.assertEqual(rows[TORCH][2], "1.50x")

    def test_nothing_measured_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            rows = table(d)
            self.assertEqual(rows[CEILING][3], "not measured")
            self.assertEqual(rows[TORCH][3], "not measured")


if __name__ == "__main__":
    unittest.main()

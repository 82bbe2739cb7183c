"""The expected verdicts of the offline configs (paper.md section 4c, revision 4) and the check that compares a
run with them: it passes on the committed verdicts and fails, naming the cell, on a copy with one changed."""

import csv
import re
import subprocess
import sys

import pytest

from ..conftest import REPO

CHECK = REPO / "tests" / "determinism" / "compare_verdicts.py"
WORDS = {"reproduced", "not reproduced", "inconclusive", "underpowered", "not judged", "-"}
SEEDS = re.compile(r"passes in \d+ of \d+ seeds?")  # a matched control's column (revision 6: several seeds)


def _table_from(expected, path, change=None):
    """A table_claim_verdicts.csv as the claims step writes it, rebuilt from an expected-verdicts file (each
    word with a reason after it, as the real cells have), optionally with one cell's word changed."""
    rows, cols = {}, []
    with open(expected, newline="") as f:
        for r in csv.DictReader(f):
            cols.append(r["column"]) if r["column"] not in cols else None
            w = r["verdict"]
            if change and (r["claim"], r["column"]) == change[0]:
                w = change[1]
            shown = (w if w in ("reproduced", "-") else f"{w} (seed 0: reproduced)" if SEEDS.fullmatch(w)
                     else f"{w}: because")
            rows.setdefault(r["claim"], {})[r["column"]] = shown
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["claim", "statement", *cols, "not judged in this run"])
        for c, cells in rows.items():
            w.writerow([c, "text", *[cells[k] for k in cols], "-"])


@pytest.mark.parametrize("name", ["offline", "offline+decoders"])
def test_expected_verdicts_are_committed_and_hold_only_verdict_words(name):
    path = REPO / "tests" / "expected_verdicts" / f"{name}.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert {f"C{i}" for i in range(1, 11)} <= {r["claim"] for r in rows}
    assert all(r["verdict"] in WORDS or (SEEDS.fullmatch(r["verdict"]) and "matched control" in r["column"])
               for r in rows)


def test_the_check_passes_on_the_expected_verdicts_and_fails_naming_a_changed_cell(tmp_path):
    expected = REPO / "tests" / "expected_verdicts" / "offline.csv"
    same = tmp_path / "same.csv"
    _table_from(expected, same)
    ok = subprocess.run([sys.executable, str(CHECK), str(same), str(expected)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    with open(expected, newline="") as f:
        first = next(r for r in csv.DictReader(f) if r["verdict"] != "-")
    flipped = "reproduced" if first["verdict"] != "reproduced" else "not reproduced"
    bad = tmp_path / "bad.csv"
    _table_from(expected, bad, change=((first["claim"], first["column"]), flipped))
    got = subprocess.run([sys.executable, str(CHECK), str(bad), str(expected)], capture_output=True, text=True)
    assert got.returncode == 1
    assert f"{first['claim']} / {first['column']}: expected {first['verdict']!r}, got {flipped!r}" in got.stdout
    assert "1 verdicts differ" in got.stdout

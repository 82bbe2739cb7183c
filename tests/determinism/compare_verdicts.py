#!/usr/bin/env python
"""Compare a run's table_claim_verdicts.csv with the expected verdicts committed under tests/expected_verdicts/
(paper.md section 4c, revision 4: the offline configs' verdicts are part of the regression tests, on any
machine). Only the verdict word of each (claim, column) cell is compared: "reproduced", "not reproduced",
"inconclusive", "underpowered", "not judged", "-" (the claim does not concern the column), or in a matched
control's column "passes in k of n seeds" (revision 6). Exits 1 naming every cell that differs.

Usage: compare_verdicts.py RUN/table_claim_verdicts.csv tests/expected_verdicts/<config>.csv
       compare_verdicts.py --write RUN/table_claim_verdicts.csv tests/expected_verdicts/<config>.csv
"""

import csv
import re
import sys

WORDS = ("not reproduced", "reproduced", "inconclusive", "underpowered", "not judged")
SKIP = ("claim", "statement", "not judged in this run")


def word(cell: str) -> str:
    cell = (cell or "").strip()
    seeds = re.match(r"passes in \d+ of \d+ seeds?", cell)
    if seeds:
        return seeds.group(0)
    for w in WORDS:
        if cell.startswith(w):
            return w
    return "-" if cell in ("", "-") else f"unknown: {cell[:40]}"


def words(path: str) -> dict[tuple[str, str], str]:
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["claim"], col): word(v) for r in csv.DictReader(f) for col, v in r.items() if col not in SKIP}


def main(argv: list[str]) -> int:
    write = argv[:1] == ["--write"]
    got_path, want_path = argv[1:3] if write else argv[:2]
    got = words(got_path)
    if write:
        with open(want_path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["claim", "column", "verdict"])
            w.writerows([c, col, v] for (c, col), v in got.items())
        print(f"[verdicts] wrote {len(got)} expected cells to {want_path}")
        return 0
    with open(want_path, newline="", encoding="utf-8") as f:
        want = {(r["claim"], r["column"]): r["verdict"] for r in csv.DictReader(f)}
    bad = [f"{c} / {col}: expected {want.get((c, col), 'no such cell')!r}, got {got.get((c, col), 'no such cell')!r}"
           for c, col in sorted(set(want) | set(got)) if want.get((c, col)) != got.get((c, col))]
    if bad:
        print(f"[verdicts] FAILED: {len(bad)} verdicts differ from {want_path}:\n  " + "\n  ".join(bad)
              + "\n  A change that moves a verdict updates the expected file in the same commit and says why in the "
              "commit message (README, 'Expected verdicts').")
        return 1
    print(f"[verdicts] PASSED: {len(want)} verdict cells equal {want_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

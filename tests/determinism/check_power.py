#!/usr/bin/env python
"""Power first (paper.md section 4d, revision 5), checked on a finished run: every verdict cell of table_claims
reads the smallest p its rule could reach ("attainable p"); a cell that says "reproduced" or "not reproduced"
must have every attainable p below the run's alpha (its test could pass), and a cell whose attainable p is not
below alpha must read "underpowered". The alpha is the run's own (provenance.json's config). Exits 1 naming
every cell that breaks the rule.

Usage: check_power.py RUN_FOLDER RUN      (RUN_FOLDER holds paper_tables/RUN and results/RUN)
"""

import csv
import json
import re
import sys
from pathlib import Path

NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:e[-+]?\d+)?)")


def numbers(cell: str) -> list[float]:
    """The p values in an attainable-p cell ("4.24e-04", "all-MiniLM-L6-v2: 0.000795; ...", "(a) 0.00159");
    a model label's digits are not p values, so only what follows a colon or starts the cell counts."""
    parts = [c.split(":")[-1] for c in cell.split(";")]
    return [float(m) for part in parts for m in NUMBER.findall(part.replace("(a) ", ""))]


def main(argv: list[str]) -> int:
    root, run = Path(argv[0]), argv[1]
    alpha = float(json.loads((root / "results" / run / "provenance.json").read_text())["config"]["dynamics"]["alpha"])
    bad, checked = [], 0
    with open(root / "paper_tables" / run / "table_claims.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            cell = r.get("attainable p", "-")
            if cell in ("", "-"):
                continue
            ps = numbers(cell)
            if not ps:
                bad.append(f"{r['claim']} / {r['family']}: attainable p {cell!r} holds no number")
                continue
            checked += 1
            word = r["verdict"]
            if word in ("reproduced", "not reproduced") and max(ps) >= alpha:
                bad.append(f"{r['claim']} / {r['family']}: '{word}' from a test whose attainable p {max(ps):.3g} "
                           f">= {alpha}")
            if max(ps) >= alpha and word != "underpowered":
                bad.append(f"{r['claim']} / {r['family']}: attainable p {max(ps):.3g} >= {alpha} reads {word!r}, "
                           "not 'underpowered'")
    if bad:
        print(f"[power] FAILED: {len(bad)} cells:\n  " + "\n  ".join(bad))
        return 1
    print(f"[power] PASSED: {checked} verdict cells of table_claims with an attainable p, each consistent with "
          f"its verdict word at alpha {alpha}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

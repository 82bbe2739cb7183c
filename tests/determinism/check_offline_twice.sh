#!/usr/bin/env bash
# Determinism: two runs of the offline config from scratch (separate directories) must produce
# byte-identical tables and identical numeric arrays. Seeds come from the config and are recorded.
# Usage: bash tests/determinism/check_offline_twice.sh   (.ci/run calls it; about 20 minutes on 2 cores)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$REPO/.venv/bin/python}
WORK=$(mktemp -d /tmp/powerlens-determinism.XXXXXX)
for run in a b; do
  echo "[determinism] offline run $run from scratch in $WORK/$run"
  timeout 2400 "$PY" -m snakemake -s "$REPO/Snakefile" --configfile "$REPO/config/offline.yaml" \
    --directory "$WORK/$run" --cores 2 > "$WORK/$run.log" 2>&1 || { tail -40 "$WORK/$run.log"; exit 1; }
done
"$PY" - "$WORK/a" "$WORK/b" <<'PY'
import sys
from pathlib import Path

import numpy as np

a, b = Path(sys.argv[1]), Path(sys.argv[2])
tables = sorted((a / "paper_tables/offline").iterdir())
assert tables, "no tables"
for t in tables:
    assert t.read_bytes() == (b / t.relative_to(a)).read_bytes(), f"table differs: {t.name}"
arrays = sorted((a / "results/offline").rglob("*.npz"))
for f in arrays:
    with np.load(f) as x, np.load(b / f.relative_to(a)) as y:
        assert x.files == y.files, f
        for k in x.files:
            assert np.array_equal(x[k], y[k], equal_nan=True), (f, k)
csvs = sorted((a / "results/offline").rglob("*.csv"))
for f in csvs:
    assert f.read_bytes() == (b / f.relative_to(a)).read_bytes(), f"per-model table differs: {f}"
print(f"[determinism] PASSED: {len(tables)} table files, {len(csvs)} per-model tables and {len(arrays)} array "
      "files identical across two runs from scratch")
PY
rm -rf "$WORK"

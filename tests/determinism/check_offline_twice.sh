#!/usr/bin/env bash
# Determinism of the offline config, at about half the cost of two full runs:
#   run A: the whole offline config from scratch (every figure and table; also proves the offline run builds),
#          whose table_claim_verdicts must equal tests/expected_verdicts/offline.csv, verdict word by word;
#   run B: from scratch in another folder, with the same --cores 2 (another job order; the same threads per
#          job: each rule fixes its thread count, and on some CPUs a float32 forward pass moves by rounding
#          with the number of BLAS threads, measured on 2026-12-03 with MiniLM's model-mode sums at 1 vs 2
#          threads, the pre-#38 code included: ~1e-8 relative, no verdict moved), the chain of
#          the trained model (fetch, extract, check, spectra, both dynamics modes, steering) and the theory
#          checks: every output B makes must equal A's (tables byte for byte, arrays exactly).
# The random-weight twins' chains are not run twice here: the same code paths are run twice from scratch on
# the tiny twins by the SLURM test (SLURM vs local run, tables and arrays compared), and twins are never
# evidence for a claim.
#   BASE_REV=<commit>  run A at that commit instead (a git worktree, its own library), B at the working tree
#                      with A's --cores 2: the check that a change leaves the outputs byte-identical.
#   FULL=1             run B over the whole config as well (both runs complete; about twice the time).
#   KEEP=1             keep the two runs' folders (printed) instead of removing them.
#   A_DIR=<folder>     take run A from that folder (one kept by KEEP=1, e.g. at BASE_REV) instead of running it:
#                      its verdicts are checked again and run B is compared with it.
#   DECODERS=1         both offline configs (config/offline-decoders.yaml added: SmolLM2, Gemma 3), as `make
#                      offline` runs them; with FULL=1 the figures (PNG and PDF) are compared byte for byte too.
# Usage: bash tests/determinism/check_offline_twice.sh   (.ci/run calls it through `make test`)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$REPO/.venv/bin/python}
WORK=$(mktemp -d /tmp/powerlens-determinism.XXXXXX)
TRAINED=minilm-l6
RUN=offline
SRC_A=$REPO
PYPATH_A=${PYTHONPATH:-}
CORES_B=2
if [ -n "${A_DIR:-}" ] && [ -n "${BASE_REV:-}" ]; then echo "[determinism] give A_DIR or BASE_REV, not both"; exit 1; fi
if [ -n "${BASE_REV:-}" ]; then
  git -C "$REPO" worktree add --detach "$WORK/base" "$BASE_REV" >/dev/null
  SRC_A=$WORK/base
  # run A imports the base commit's library, not the editable install's (PYTHONPATH comes first on sys.path)
  PYPATH_A=$SRC_A/src${PYTHONPATH:+:$PYTHONPATH}
  got=$(PYTHONPATH=$PYPATH_A "$PY" -c "import powerlens; print(powerlens.__file__)")
  [ "$got" = "$SRC_A/src/powerlens/__init__.py" ] || { echo "[determinism] run A would import $got"; exit 1; }
  echo "[determinism] run A: $BASE_REV ($(git -C "$SRC_A" log -1 --format=%h)), library $SRC_A/src"
  # the check is of the code, so run B uses A's cores: the eigen-solve of a single shared layer (the ALBERT
  # twin's, FULL=1) runs on all of a job's BLAS threads, and its round-off depends on their number
  CORES_B=2
fi
targets_b=()
if [ -z "${FULL:-}" ]; then
  for f in extraction_check.json spectra.npz spectra.csv dynamics-model.npz dynamics-model.csv \
           dynamics-attention-only.npz dynamics-attention-only.csv steering.csv quantization.csv; do
    targets_b+=("results/$RUN/$TRAINED/$f")
  done
  for c in real complex bipartite; do targets_b+=("results/$RUN/theory/$c.json" "results/$RUN/theory/$c.npz"); done
fi
# each run's time limit: 40 minutes for the offline config, 100 with the decoders (SmolLM2's dynamics alone took
# 29 minutes on the shared 2-core machine); RUN_TIMEOUT=<seconds> sets another
RUN_TIMEOUT=${RUN_TIMEOUT:-$([ -n "${DECODERS:-}" ] && echo 6000 || echo 2400)}
cfg_a=("$SRC_A/config/$RUN.yaml"); cfg_b=("$REPO/config/$RUN.yaml")
if [ -n "${DECODERS:-}" ]; then cfg_a+=("$SRC_A/config/$RUN-decoders.yaml"); cfg_b+=("$REPO/config/$RUN-decoders.yaml"); fi
start=$(date +%s)
A=$WORK/a
if [ -n "${A_DIR:-}" ]; then
  A=$(cd "$A_DIR" && pwd)
  [ -d "$A/paper_tables/$RUN" ] || { echo "[determinism] A_DIR=$A_DIR holds no finished $RUN run"; exit 1; }
  echo "[determinism] run A taken from $A (not run again)"
else
  echo "[determinism] run A (whole offline config, from scratch) in $A"
  PYTHONPATH=$PYPATH_A timeout "$RUN_TIMEOUT" "$PY" -m snakemake -s "$SRC_A/Snakefile" --configfile "${cfg_a[@]}" \
    --directory "$A" --cores 2 > "$WORK/a.log" 2>&1 || { tail -40 "$WORK/a.log"; exit 1; }
fi
mid=$(date +%s)
# the expected verdicts (tests/expected_verdicts/, paper.md section 4c): a run whose verdicts differ fails
"$PY" "$REPO/tests/determinism/compare_verdicts.py" "$A/paper_tables/$RUN/table_claim_verdicts.csv" \
  "$REPO/tests/expected_verdicts/$RUN${DECODERS:++decoders}.csv"
# power first (paper.md section 4d): no "reproduced" or "not reproduced" from a test that could not pass
"$PY" "$REPO/tests/determinism/check_power.py" "$A" "$RUN"
# the article's first screen as a reader sees it (issue #67): Chromium at 1280x800
"$PY" "$REPO/tests/determinism/check_article.py" "$A" "$RUN"
what_b="$TRAINED chain + theory"
if [ -n "${FULL:-}" ]; then what_b="whole config"; fi
echo "[determinism] run A took $((mid - start)) s; run B ($what_b, --cores $CORES_B) in $WORK/b"
timeout "$RUN_TIMEOUT" "$PY" -m snakemake -s "$REPO/Snakefile" --configfile "${cfg_b[@]}" \
  --directory "$WORK/b" --cores "$CORES_B" "${targets_b[@]}" > "$WORK/b.log" 2>&1 || { tail -40 "$WORK/b.log"; exit 1; }
echo "[determinism] run B took $(( $(date +%s) - mid )) s"
"$PY" - "$A" "$WORK/b" "$RUN" "${FULL:-}" <<'PY'
import sys
from pathlib import Path

import numpy as np

a, b, run, full = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
n_tab = n_arr = n_csv = n_fig = 0
for f in sorted((b / "figures" / run).glob("*")) if full else []:
    assert f.read_bytes() == (a / f.relative_to(b)).read_bytes(), f"figure differs: {f.name}"
    n_fig += 1
for t in sorted((b / "paper_tables" / run).glob("*")) if (b / "paper_tables" / run).exists() else []:
    if t.name.startswith("table_speed."):  # wall times and the measured peak: the machine's, by design
        continue
    assert t.read_bytes() == (a / t.relative_to(b)).read_bytes(), f"table differs: {t.name}"
    n_tab += 1
arrays = sorted((b / "results" / run).rglob("*.npz"))
assert arrays, "run B made no array file"
for f in arrays:
    with np.load(f) as y, np.load(a / f.relative_to(b)) as x:
        assert x.files == y.files, f
        for k in x.files:
            assert np.array_equal(x[k], y[k], equal_nan=True), (f, k)
    n_arr += 1
for f in sorted((b / "results" / run).rglob("*.csv")):
    assert f.read_bytes() == (a / f.relative_to(b)).read_bytes(), f"per-model table differs: {f}"
    n_csv += 1
import json

for f in sorted((b / "results" / run / "theory").glob("*.json")):
    x, y = json.loads((a / f.relative_to(b)).read_text()), json.loads(f.read_text())
    assert x["results"] == y["results"], f"theory results differ: {f.name}"
assert (a / "paper_tables" / run / "table_claims.csv").is_file(), "run A did not build table_claims"
print(f"[determinism] PASSED: {n_tab} paper tables, {n_csv} per-model tables, {n_arr} array files and {n_fig} "
      "figure files of run B identical to run A's")
PY
if [ -n "${BASE_REV:-}" ]; then git -C "$REPO" worktree remove --force "$WORK/base"; fi
if [ -n "${KEEP:-}" ]; then echo "[determinism] runs kept in $WORK"; else rm -rf "$WORK"; fi

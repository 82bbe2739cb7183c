"""Check a SLURM run against a local run: every non-local job was submitted with sbatch, and the numbers
(tables and arrays) are identical.

Usage: compare_runs.py SLURM_RUN LOCAL_RUN SLURM_LOG [DIFFERING]. Exit 0: identical; 1: a table, the job count
or the files differ; 3: only arrays differ, and their files (relative to the run folder) are written to
DIFFERING, one per line, for run_slurm_test.sh to rerun those jobs on both sides once."""

import re
import sys
from pathlib import Path

import numpy as np

slurm, local, log = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
listing = Path(sys.argv[4]) if len(sys.argv) > 4 else None
LOCAL_RULES = {"fetch_model", "write_lock", "provenance", "all"}
text = log.read_text()
submitted = re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", text)
stats = text[text.index("Job stats"):]
planned = 0
for ln in stats.splitlines()[3:]:
    parts = ln.split()
    if len(parts) == 2 and parts[0] != "total" and parts[1].isdigit() and parts[0] not in LOCAL_RULES:
        planned += int(parts[1])
    if parts and parts[0] == "total":
        break
logs = list((slurm / ".snakemake/slurm_logs").rglob("*.log"))
print(f"[slurm-test] non-local jobs planned: {planned}; submitted via sbatch: {len(submitted)}; "
      f"slurm job logs: {len(logs)}")
assert planned > 0 and len(submitted) == planned, (planned, len(submitted))
assert len(logs) >= planned, (len(logs), planned)

run = "test"
tables = sorted((local / "paper_tables" / run).glob("*.csv"))
assert tables
for t in tables:
    if t.name == "table_models.csv":
        continue  # holds nothing run-specific but is compared too below
    if t.name == "table_speed.csv":  # wall times and the measured peak are the machine's: the work must agree
        import pandas as pd

        keys = ["model", "step", "tokens", "arithmetic (GFLOP)", "weights"]
        x, y = pd.read_csv(t)[keys], pd.read_csv(slurm / "paper_tables" / run / t.name)[keys]
        assert len(x) and x.equals(y), f"{t.name}: the jobs or their arithmetic differ between SLURM and local"
        continue
    a, b = t.read_bytes(), (slurm / "paper_tables" / run / t.name).read_bytes()
    assert a == b, f"{t.name} differs between the SLURM and the local run"
models_csv = f"paper_tables/{run}/table_models.csv"
assert (local / models_csv).read_bytes() == (slurm / models_csv).read_bytes()
n, differ, files = 0, [], []
for f in sorted((local / "results" / run).rglob("*.npz")):
    g = slurm / f.relative_to(local)
    with np.load(f) as x, np.load(g) as y:
        assert x.files == y.files, (f, x.files, y.files)
        for k in x.files:
            if not np.array_equal(x[k], y[k], equal_nan=True):  # every difference is listed before failing
                a, b = x[k], y[k]
                gap = (float(np.nanmax(np.abs(a.astype(float) - b.astype(float)))) if a.shape == b.shape
                       and a.dtype.kind in "fiub" else None)
                differ.append(f"{f.relative_to(local)}:{k} shape {a.shape} vs {b.shape}, largest gap {gap}")
                if str(f.relative_to(local)) not in files:
                    files.append(str(f.relative_to(local)))
    n += 1
if differ:
    print(f"[slurm-test] {len(differ)} arrays differ between the local and the SLURM run:", *differ, sep="\n  ")
    if listing is not None:
        listing.write_text("".join(f + "\n" for f in files))
    sys.exit(3 if listing is not None else 1)
print(f"[slurm-test] {len(tables)} tables and {n} array files identical to the local run")

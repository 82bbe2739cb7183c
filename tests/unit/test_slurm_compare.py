"""tests/slurm/compare_runs.py's exit codes, on two small run folders: 0 when identical, 3 (with the differing
files listed) when only arrays differ and a listing was asked for, 1 when a table differs or without a listing.
run_slurm_test.sh reruns the listed jobs on rc 3 and fails on anything else."""

import subprocess
import sys
from pathlib import Path

import numpy as np

COMPARE = Path(__file__).resolve().parents[1] / "slurm" / "compare_runs.py"


def _run_folder(root: Path, value: float, table: str = "a,b\n1,2\n") -> None:
    (root / "paper_tables" / "test").mkdir(parents=True)
    (root / "paper_tables" / "test" / "table_x.csv").write_text(table)
    (root / "paper_tables" / "test" / "table_models.csv").write_text("model\ntiny\n")
    (root / "results" / "test" / "tiny").mkdir(parents=True)
    np.savez(root / "results" / "test" / "tiny" / "dynamics-model.npz", s=np.array([value, 2.0]), n=np.arange(3))
    np.savez(root / "results" / "test" / "tiny" / "spectra.npz", e=np.array([0.5]))


def _compare(tmp_path: Path, slurm_value: float, listing: bool, table: str = "a,b\n1,2\n"):
    slurm, local = tmp_path / "slurm", tmp_path / "local"
    _run_folder(slurm, slurm_value, table)
    _run_folder(local, 1.0)
    (slurm / ".snakemake" / "slurm_logs" / "rule_dynamics").mkdir(parents=True)
    (slurm / ".snakemake" / "slurm_logs" / "rule_dynamics" / "1.log").write_text("done\n")
    log = tmp_path / "slurm.log"
    log.write_text("Job 0 has been submitted with SLURM jobid 7 (log: x).\nJob stats:\njob count\n-------- -----\n"
                   "dynamics 1\nall 1\ntotal 2\n")
    out = tmp_path / "differing.txt"
    args = [sys.executable, str(COMPARE), str(slurm), str(local), str(log)] + ([str(out)] if listing else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return r, out


def test_identical_runs_pass(tmp_path):
    r, out = _compare(tmp_path, 1.0, listing=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "identical to the local run" in r.stdout and not out.exists()


def test_an_array_one_ulp_apart_is_listed_for_a_rerun(tmp_path):
    r, out = _compare(tmp_path, float(np.nextafter(1.0, 2.0)), listing=True)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "dynamics-model.npz:s" in r.stdout
    assert out.read_text().splitlines() == ["results/test/tiny/dynamics-model.npz"]


def test_without_a_listing_a_differing_array_fails(tmp_path):
    r, _ = _compare(tmp_path, 1.5, listing=False)
    assert r.returncode == 1, r.stdout + r.stderr


def test_a_differing_table_fails_even_with_a_listing(tmp_path):
    r, out = _compare(tmp_path, 1.0, listing=True, table="a,b\n1,3\n")
    assert r.returncode == 1 and not out.exists(), r.stdout + r.stderr

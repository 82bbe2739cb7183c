"""An interrupted run leaves nothing that looks complete, and the rerun gives the uninterrupted result.

The test kills a Snakemake job with SIGKILL while its output is written (the temporary file exists and the
rename has not happened: POWERLENS_PAUSE_BEFORE_RENAME holds the job there), then checks that the final
output is absent, unlocks, reruns and compares with a run that was never interrupted.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from ..conftest import REPO

pytestmark = pytest.mark.integration
TARGET = "results/test/tiny-bert/spectra.csv"


def smk(args, cwd, env=None, **kw):
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--configfile",
           str(REPO / "config/test.yaml"), "--directory", str(cwd), "--cores", "1", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})},
                          **kw)


def test_killed_job_is_redone_identically(tmp_path):
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for d in (clean, killed):
        d.mkdir()
    r = smk([TARGET, "results/test/tiny-bert/spectra.npz"], clean)
    assert r.returncode == 0, r.stderr[-2000:]
    r = smk(["results/test/tiny-bert/weights.json"], killed)
    assert r.returncode == 0, r.stderr[-2000:]
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--configfile",
           str(REPO / "config/test.yaml"), "--directory", str(killed), "--cores", "1", TARGET]
    proc = subprocess.Popen(cmd, cwd=killed, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "POWERLENS_PAUSE_BEFORE_RENAME": "60"}, start_new_session=True)
    out_dir = killed / "results/test/tiny-bert"
    deadline = time.time() + 120
    while time.time() < deadline and not list(out_dir.glob(".spectra.*.tmp-*")):
        time.sleep(0.2)
    tmp_files = list(out_dir.glob(".spectra.*.tmp-*"))
    os.killpg(proc.pid, signal.SIGKILL)  # the machine dies mid-write
    proc.wait(timeout=30)
    assert tmp_files, "the job never reached its write"
    assert not (out_dir / "spectra.csv").exists() and not (out_dir / "spectra.npz").exists()
    r = smk(["--unlock"], killed)
    assert r.returncode == 0, r.stderr[-2000:]
    r = smk([TARGET, "--rerun-incomplete"], killed)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("spectra.csv", "spectra.npz"):
        assert (out_dir / name).read_bytes() == (clean / "results/test/tiny-bert" / name).read_bytes(), name

import re

import pytest

from powerlens.core.io import atomic_path, write_json

from ..conftest import REPO


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    write_json(target, {"b": 1, "a": 2})
    assert target.read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'


def _pins(text):
    return sorted(re.findall(r"^\s*-?\s*([A-Za-z0-9_.\-]+==[^\s]+)\s*$", text, re.M))


def test_env_files_mirror_the_lock():
    """The conda files pin exactly the lock's versions, less the weight packages (data: installed with
    --no-deps, which the rules' environment does in its post-deploy script, at the lock's versions)."""
    from .test_lock import model_packages

    lock = _pins((REPO / "requirements.lock").read_text())
    assert any(p.startswith("torch==2.13.0") for p in lock)
    data = set(model_packages())
    weights = sorted(p for p in lock if p.split("==")[0] in data)
    assert len(weights) == len(data) == 7
    for env in ("environment.yml", "workflow/envs/powerlens.yaml"):
        assert _pins((REPO / env).read_text()) == sorted(set(lock) - set(weights)), env
    deploy = (REPO / "workflow/envs/powerlens.post-deploy.sh").read_text()
    assert "--no-deps" in deploy and sorted(re.findall(r"(\S+==\S+)", deploy)) == weights


def test_allocator_threshold_is_fixed_on_glibc():
    import platform

    from powerlens.core.runtime import fixed_mmap_threshold

    if not (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"):
        pytest.skip("mallopt is glibc's")
    assert fixed_mmap_threshold() is True  # mallopt accepted M_MMAP_THRESHOLD


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_outputs_get_the_mode_a_plain_write_would(tmp_path, umask, mode):
    """Atomic writes respect the umask like open(path, 'w'): group/world readable under 022 (mkstemp alone
    gives 0600, which collaborators on a shared cluster cannot read)."""
    import os

    old = os.umask(umask)
    try:
        write_json(tmp_path / "sub" / "out.json", {"a": 1})
        with open(tmp_path / "plain.txt", "w") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert (tmp_path / "sub" / "out.json").stat().st_mode & 0o777 == mode
    assert (tmp_path / "plain.txt").stat().st_mode & 0o777 == mode


_MATMUL = "import torch; a = torch.ones(64, 64); a @ a"


def _mkl_modes(code: str, **env) -> set[str]:
    """The CNR modes MKL reports (MKL_VERBOSE) for the products a fresh interpreter runs."""
    import os
    import subprocess
    import sys

    e = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"} | {"MKL_VERBOSE": "1"} | env
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"CNR:(\S+)", out))


def test_every_step_runs_mkl_in_its_reproducible_mode():
    """set_threads (each step's first call) puts MKL in CNR mode AUTO before any product; the control
    without it runs with CNR off, and a branch the user exported is kept."""
    torch = pytest.importorskip("torch")
    if not torch.backends.mkl.is_available():
        pytest.skip("torch is not built with MKL here")
    step = "from powerlens.core.runtime import set_threads; set_threads(1); " + _MATMUL
    assert _mkl_modes(step) == {"AUTO"}
    assert _mkl_modes(_MATMUL) == {"OFF"}  # control: MKL's default
    assert _mkl_modes(step, MKL_CBWR="COMPATIBLE") == {"COMPATIBLE"}

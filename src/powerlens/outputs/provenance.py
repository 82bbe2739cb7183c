"""Provenance: what produced an output (versions, BLAS, threads, seed, host, time)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import html
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from powerlens.core.runtime import mkl_branch_in_force

PACKAGES = ("powerlens", "torch", "transformers", "huggingface_hub", "safetensors", "tokenizers", "numpy",
            "scipy", "pandas", "matplotlib", "seaborn", "snakemake")


def versions() -> dict[str, str | None]:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = None
    out["python"] = platform.python_version()
    return out


#: The project's root when the package runs from its checkout (src/powerlens/outputs/provenance.py).
PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)


def code_revision(root: Path | None = None) -> dict[str, Any]:
    """The commit of the code that ran and whether its checkout differs from it (modified, staged or untracked
    files; ignored files do not count). Read from the project's own repository only: where git's toplevel is
    not the project root (an installed package, or a project copied inside another repository, whose commit
    says nothing about this code), ``{"commit": None, "git": "not a git checkout"}`` (the version is in
    :func:`versions`)."""
    root = Path(root or PROJECT_ROOT).resolve()
    none = {"commit": None, "git": "not a git checkout"}
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root:
            return none
        commit = _git(root, "rev-parse", "HEAD")
        status = _git(root, "status", "--porcelain", "--untracked-files=all")
        if commit.returncode != 0 or status.returncode != 0:
            return none
    except (OSError, subprocess.SubprocessError):
        return none
    lines = [ln for ln in status.stdout.splitlines() if ln.strip()]
    untracked = sum(ln.startswith("??") for ln in lines)
    lock = root / "requirements.lock"
    return {"commit": commit.stdout.strip(), "uncommitted_changes": bool(lines),
            "modified_files": len(lines) - untracked, "untracked_files": untracked,
            "requirements_lock_sha256": sha256_file(lock) if lock.is_file() else None}


def corpus_record(path) -> dict[str, Any]:
    """The prompt corpus a run read: its path and sha256 (a file replaced under an old mtime still shows)."""
    return {"path": str(path), "sha256": sha256_file(path)}


def sha256_file(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def machine() -> dict[str, Any]:
    """The CPU the run's steps ran on (model name, logical CPUs) and the platform."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "platform": platform.platform()}


def _library(filepath: str | None) -> str | None:
    """A loaded library's file named by its folder and name (``numpy.libs/libscipy_openblas64_-....so``: whose copy
    it is), not by this machine's path."""
    if not filepath:
        return None
    p = Path(filepath)
    return f"{p.parent.name}/{p.name}"


def blas() -> list[dict[str, Any]]:
    """The thread pools loaded (threadpoolctl), each with its library's name (``prefix``: numpy's and scipy's
    OpenBLAS are two), in a fixed order: threadpoolctl lists them in load order, which differs between runs."""
    try:
        from threadpoolctl import threadpool_info

        pools = [{**{k: i.get(k) for k in ("internal_api", "prefix", "version", "num_threads", "architecture")},
                  "library": _library(i.get("filepath"))} for i in threadpool_info()]
        return sorted(pools, key=lambda p: (str(p["internal_api"]), str(p["library"]), str(p["version"])))
    except Exception:  # pragma: no cover - threadpoolctl missing
        return []


def config_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def record(threads: int | None = None, seed: int | None = None, **extra: Any) -> dict[str, Any]:
    """A provenance block for an output's metadata. Timestamps and host live here only, never in tables.
    ``cpu_s``: the process's CPU time so far (user + system, every thread; ``getrusage``), for the speed table:
    Snakemake's benchmark file samples a job's CPU every 30 s after its first 15 s, so a job's last stretch is
    missing there (a 40 s job reads about 15 s)."""
    import resource

    import torch

    use = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "versions": versions(), "blas": blas(), "threads": threads if threads else torch.get_num_threads(),
        "seed": seed, "host": platform.node(), "platform": platform.platform(),
        "device": "cpu", "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "env": {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "HF_ENDPOINT", "MKL_CBWR") if k in os.environ},
        "mkl_branch_in_force": mkl_branch_in_force(),  # what MKL ran, which env's MKL_CBWR only asked for
        "cpu_s": round(use.ru_utime + use.ru_stime, 2),
        **extra,
    }


def modelling_choices_html(cfg: dict, choices: list[str]) -> str:
    """The report's "Modelling choices" page: what the paper's summaries leave open and what this replication
    chose, then this run's settings that the choices depend on. Every text escaped (a config is data)."""
    dyn, st, cl = cfg.get("dynamics", {}), cfg.get("steering", {}), cfg.get("claims", {})
    settings = [
        ("Monte Carlo null draws R", dyn.get("null_draws")), ("significance level", dyn.get("alpha")),
        ("prompt truncation (tokens)", dyn.get("max_tokens")), ("attention-only law's normalisation N",
                                                                dyn.get("norm")),
        ("shared-weight law: steps", dyn.get("steps")), ("ALBERT steering edit", st.get("shared_edit")),
        *[(f"claims criterion {k}", v) for k, v in sorted(cl.items())],
    ]
    items = "".join(f"<li>{html.escape(c)}</li>" for c in choices)
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in settings
                   if v is not None)
    style = ("body{font-family:sans-serif;font-size:14px;margin:12px;max-width:60em;line-height:1.45}"
             "li{margin-bottom:.5em}td{padding:2px 10px;border-bottom:1px solid #ddd}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Modelling choices</title>"
            f"<style>{style}</style></head>\n<body>\n<h2>Modelling choices</h2>\n"
            "<p>The paper's full text is not available: where its summaries (paper.md) are silent, these choices "
            "are ours and say so. Each output's provenance (provenance.json) lists them too.</p>\n"
            f"<ul>{items}</ul>\n<h3>This run's settings ({html.escape(str(cfg.get('run')))})</h3>\n"
            f"<table>{rows}</table>\n</body></html>\n")

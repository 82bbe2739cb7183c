"""Provenance: what produced an output (versions, BLAS, threads, seed, host, time)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
from typing import Any

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


def blas() -> list[dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info

        return [{k: i.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
                for i in threadpool_info()]
    except Exception:  # pragma: no cover - threadpoolctl missing
        return []


def config_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def record(threads: int | None = None, seed: int | None = None, **extra: Any) -> dict[str, Any]:
    """A provenance block for an output's metadata. Timestamps and host live here only, never in tables."""
    import torch

    return {
        "versions": versions(), "blas": blas(), "threads": threads if threads else torch.get_num_threads(),
        "seed": seed, "host": platform.node(), "platform": platform.platform(),
        "device": "cpu", "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "env": {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "HF_ENDPOINT") if k in os.environ},
        **extra,
    }

"""Pipeline steps: read inputs, call the library, write outputs atomically.

Each ``scripts/*.py`` is a thin command-line wrapper around one function here, so every step can be
run by hand (``python scripts/extract.py --help``) or imported in a test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from . import provenance
from .errors import PowerlensError
from .io import read_json, write_json, write_text


def fetch_model(name: str, entry: dict, manifest_path: str | Path, lock_path: str | None = None) -> dict:
    """Resolve one model entry (download, locate or build), write its manifest."""
    from .sources import fetch

    lock = None
    if lock_path:
        p = Path(lock_path)
        if not p.is_file():
            raise PowerlensError(f"lock file {lock_path} does not exist",
                                 "set `lock_file` to a models.lock.yaml written by an earlier run, or remove it")
        lock = (yaml.safe_load(p.read_text()) or {}).get("models", {})
    manifest_path = Path(manifest_path)
    rec = fetch(name, entry, manifest_path.parent, lock=lock)
    rec["provenance"] = provenance.record()
    write_json(manifest_path, rec)
    return rec


def extract(manifest_path: str | Path, st_path: str | Path, json_path: str | Path, threads: int = 1) -> dict:
    """Extract every attention sublayer (W_Q, W_K, W_V, W_O, biases, LN, F) of one model."""
    import torch

    from .adapters import get_adapter
    from .sources import load_model

    threads = provenance.set_threads(threads)
    man = read_json(manifest_path)
    model = load_model(man, dtype=torch.float32)
    adapter = get_adapter(man["arch"])
    w = adapter.extract(model)
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    del model
    extra = {
        "model": man["model"], "source": man["source"], "random_weights": man["random_weights"],
        "weights_label": man["weights_label"], "repo_id": man.get("repo_id"), "twin_of": man.get("twin_of"),
        "resolved_revision": man.get("resolved_revision"), "n_params": n_params,
        "weight_files_sha256": {k: v["sha256"] for k, v in man["files"].items() if k.endswith(".safetensors")},
        "model_type": cfg.model_type, "dtype": "float32 (weights), float64 (F)",
        "provenance": provenance.record(threads=threads, seed=man.get("seed")),
    }
    w.save(st_path, json_path, extra_meta=extra)
    return read_json(json_path)


def check_extraction(manifest_path: str | Path, weights_st: str | Path, weights_json: str | Path,
                     out_path: str | Path, threads: int = 1, tol32: float = 1e-5, tol64: float = 1e-10) -> dict:
    """Rebuild every attention sublayer from the saved matrices and compare with the real module."""
    import torch

    from .adapters import get_adapter
    from .sources import load_model
    from .verify import reconstruction_errors
    from .weights import ModelWeights

    threads = provenance.set_threads(threads)
    man = read_json(manifest_path)
    w = ModelWeights.load(weights_st, weights_json)
    adapter = get_adapter(man["arch"])
    result: dict[str, Any] = {"model": man["model"], "weights_label": man["weights_label"],
                              "random_weights": man["random_weights"], "checks": {}}
    for dtype, tol in ((torch.float32, tol32), (torch.float64, tol64)):
        model = load_model(man, dtype=dtype, verify=dtype == torch.float32)
        errs = reconstruction_errors(model, adapter, w)
        del model
        name = str(dtype).replace("torch.", "")
        result["checks"][name] = {"max_abs_error": max(errs), "per_layer": errs, "tolerance": tol,
                                  "passed": max(errs) <= tol}
    result["shared_weights"] = w.shared
    if w.arch == "albert":
        result["albert_single_F"] = len(w.layers) == 1
    result["passed"] = all(c["passed"] for c in result["checks"].values())
    result["provenance"] = provenance.record(threads=threads)
    if not result["passed"]:
        bad = {k: v["max_abs_error"] for k, v in result["checks"].items()}
        raise PowerlensError(f"model {man['model']!r}: extraction does not reproduce the real attention "
                             f"module (max errors {bad})",
                             "the adapter for this architecture is wrong for this checkpoint: report it")
    write_json(out_path, result)
    return result


def write_lock(manifest_paths: list[str], out_path: str | Path) -> dict:
    """Gather the fetched models' resolved revisions and file hashes into a lock file."""
    models = {}
    for p in manifest_paths:
        m = read_json(p)
        models[m["model"]] = {k: m.get(k) for k in ("source", "arch", "repo_id", "resolved_revision",
                                                     "twin_of", "seed", "package", "package_version")
                              if m.get(k) is not None}
        models[m["model"]]["files"] = {k: {"sha256": v["sha256"]} for k, v in m["files"].items()}
    doc = {"comment": "written by powerlens; pin a later run to it with `lock_file:` in the config",
           "models": models}
    write_text(out_path, yaml.safe_dump(doc, sort_keys=True))
    return doc

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


def spectra(weights_st: str | Path, weights_json: str | Path, out_npz: str | Path, out_csv: str | Path,
            top_k: int = 8, threads: int = 1) -> "pd.DataFrame":
    """Eigendecomposition of every unique layer matrix F (float64, CPU): arrays + one tidy row per depth."""
    import numpy as np
    import pandas as pd

    from .io import atomic_path
    from .spectra import model_spectra, spectra_arrays
    from .weights import ModelWeights

    threads = provenance.set_threads(threads)
    w = ModelWeights.load(weights_st, weights_json)
    specs = model_spectra(w, k=top_k, threads=threads)
    arrays = spectra_arrays(specs, w.layer_map)
    with atomic_path(out_npz) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    rows = []
    for t, u in enumerate(w.layer_map):
        rows.append({"model": w.meta["model"], "layer": t, "unique_layer": u, **specs[u].summary(),
                     "weights": w.meta["weights_label"]})
    df = pd.DataFrame(rows)
    with atomic_path(out_csv) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n", float_format="%.10g")
    return df


def resolve_device(requested: str) -> str:
    """``auto`` -> cuda when present, else cpu; ``cuda`` without a GPU is an error."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise PowerlensError("device: cuda was requested but no CUDA device is visible",
                             "set `device: auto` or `device: cpu` in the config, or run on a GPU node")
    return requested


def dynamics(manifest_path, weights_st, weights_json, spectra_npz, prompts_path, out_npz, out_csv, out_json,
             mode: str, norm: str = "l2", steps: int = 200, batch_size: int = 16, max_tokens: int = 128,
             seed: int = 0, device: str = "cpu", dtype: str = "float32", threads: int = 1) -> "pd.DataFrame":
    """Token dynamics of one model in one mode: per-token alignments (.npz), per-layer statistics (.csv)."""
    import numpy as np
    import torch

    from .adapters import get_adapter
    from .corpus import batches, read_prompts, tokenize
    from .dynamics import layer_directions, layer_stats, run_attention_only, run_model_mode
    from .io import atomic_path
    from .sources import load_model, load_tokenizer
    from .weights import ModelWeights

    if mode not in ("model", "attention-only"):
        raise PowerlensError(f"unknown dynamics mode {mode!r}", "use `model` or `attention-only`")
    threads = provenance.set_threads(threads)
    device = resolve_device(device)
    torch.manual_seed(seed)
    prompts = read_prompts(prompts_path)
    man = read_json(manifest_path)
    w = ModelWeights.load(weights_st, weights_json)
    adapter = get_adapter(man["arch"])
    model = load_model(man, dtype=torch.float32).to(device)
    tok = load_tokenizer(man)
    max_len = min(int(max_tokens), adapter.max_positions(model.config))
    ids, special, truncated = tokenize(prompts, tok, max_len)
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    bs = batches(ids, special, batch_size, pad)
    with np.load(spectra_npz, allow_pickle=False) as z:
        dirs = layer_directions({k: z[k] for k in z.files}, seed)
    n_steps = w.n_layers
    if mode == "model":
        arr = run_model_mode(model, adapter, dirs, bs, device=device)
    else:
        n_steps = int(steps) if w.shared else w.n_layers
        arr = run_attention_only(lambda ids: adapter.embed(model, ids), w, dirs, bs, n_steps, norm=norm,
                                 device=device, dtype=getattr(torch, dtype))
    del model
    df = layer_stats(arr, dirs)
    df.insert(0, "mode", mode)
    df.insert(0, "model", man["model"])
    df["weights"] = man["weights_label"]
    with atomic_path(out_npz) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arr)
    with atomic_path(out_csv) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n", float_format="%.10g")
    n_stat = int(sum(int(b.stat_mask.sum()) for b in bs))
    write_json(out_json, {
        "model": man["model"], "mode": mode, "weights_label": man["weights_label"],
        "random_weights": man["random_weights"], "n_prompts": len(prompts), "n_tokens": n_stat,
        "n_positions": int(sum(len(x) for x in ids)), "n_special_excluded": int(sum(sum(s) for s in special)),
        "truncated_prompts": truncated, "max_tokens": max_len, "batch_size": batch_size, "steps": n_steps,
        "norm": norm if mode == "attention-only" else "model's own LayerNorm",
        "dtype": dtype if mode == "attention-only" else "float32 forward, float64 metrics",
        "x0": "embedding output (ALBERT: after embedding_hidden_mapping_in)",
        "special_tokens": "kept in the forward pass, excluded from statistics (our choice)",
        "tokenizer": type(tok).__name__, "device": device, "seed": seed,
        "provenance": provenance.record(threads=threads, seed=seed, device=device),
    })
    return df

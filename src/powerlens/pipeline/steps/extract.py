"""Extract W_Q, W_K, W_V, W_O, biases, LayerNorm and F = W_O W_V for every layer of one model."""

from __future__ import annotations

from pathlib import Path

from powerlens.core.io import read_generated_json, read_json
from powerlens.core.runtime import set_threads
from powerlens.models.adapters import get_adapter
from powerlens.models.sources import load_model
from powerlens.outputs import provenance
from powerlens.pipeline.options import Option, model_files

OPTIONS = model_files("manifest") + (
    Option("out-tensors", "output:tensors", dest="st_path", help="weights.safetensors to write"),
    Option("out-meta", "output:meta", dest="json_path", help="weights.json to write"),
    Option("threads", "threads", kind="int"),
)


def extract(manifest_path: str | Path, st_path: str | Path, json_path: str | Path, *, threads: int) -> dict:
    """Extract every attention sublayer (W_Q, W_K, W_V, W_O, biases, LN, F) of one model."""
    import torch

    threads = set_threads(threads)
    man = read_generated_json(manifest_path, "fetch_model")
    model = load_model(man, dtype=torch.float32)
    adapter = get_adapter(man["arch"])
    w = adapter.extract(model)
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    del model
    extra = {
        "model": man["model"], "source": man["source"], "random_weights": man["random_weights"],
        "weights_label": man["weights_label"], "repo_id": man.get("repo_id"), "twin_of": man.get("twin_of"),
        "control_of": man.get("control_of"),
        "resolved_revision": man.get("resolved_revision"), "n_params": n_params,
        "weight_files_sha256": {k: v["sha256"] for k, v in man["files"].items() if k.endswith(".safetensors")},
        "model_type": cfg.model_type, "dtype": "float32 (weights), float64 (F)",
        "provenance": provenance.record(threads=threads, seed=man.get("seed")),
    }
    w.save(st_path, json_path, extra_meta=extra)
    return read_json(json_path)


def show(result, kw: dict) -> None:
    print(f"{result['model']}: {result['n_layers']} layers ({result['n_unique_layers']} unique), "
          f"d={result['d_model']}, {result['n_heads']} heads, {result['weights_label']}")


STEP = extract

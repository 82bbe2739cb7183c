"""Check a fetched model's steering targets (single vocabulary entry, LM head for unembedding targets)."""

from __future__ import annotations

from pathlib import Path

from powerlens.core.io import read_generated_json, read_json, write_json
from powerlens.models.archs import has_lm_head
from powerlens.models.sources import load_tokenizer
from powerlens.outputs import provenance
from powerlens.pipeline.options import Option
from powerlens.pipeline.targets import check_targets, tokenizer_on_disk

OPTIONS = (
    Option("name", "wildcard:model", help="model key in the config"),
    Option("manifest", "input:manifest", dest="manifest_path", help="the model's manifest.json (from the fetch step)"),
    Option("targets", "param:targets", kind="json", help="the model's steering targets, as JSON"),
    Option("out", "output:json", dest="out_path", help="steering_targets.json to write (targets with token ids)"),
)


def check_steering_targets(name: str, manifest_path: str | Path, targets: list[dict], *, out_path: str | Path
                           ) -> list[dict]:
    """Resolve a model's steering targets to token ids right after its fetch (hub and GGUF models, whose
    tokenizer is not on disk before), so a bad target stops the run before extraction; write them."""
    found = tokenizer_on_disk(None, manifest_path)
    if found is None:  # no tokenizer.json in the folder: transformers builds the fast tokenizer

        man = read_generated_json(manifest_path, "fetch_model")
        cfg = read_json(Path(man["path"]) / "config.json")
        found = (load_tokenizer(man).backend_tokenizer, has_lm_head(cfg.get("architectures")))
    resolved = check_targets(name, targets, *found)
    man = read_generated_json(manifest_path, "fetch_model")
    write_json(out_path, {"model": name, "targets": resolved, "weights_label": man["weights_label"],
                          "random_weights": man["random_weights"], "provenance": provenance.record()})
    return resolved


def show(result, kw: dict) -> None:
    for t in result:
        print(f"{kw['name']}: {t['kind']} {t.get('token', t.get('seed'))!r} -> token id {t['token_id']}")


STEP = check_steering_targets

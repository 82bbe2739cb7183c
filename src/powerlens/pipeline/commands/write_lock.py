"""Write models.lock.yaml: each model's resolved revision and file sha256s (pin a later run to it)."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--out", required=True)
    ap.add_argument("manifests", nargs="+")


def run(a) -> None:
    from powerlens.pipeline.steps import write_lock

    doc = write_lock(a.manifests, a.out)
    print(f"locked {len(doc['models'])} models -> {a.out}")

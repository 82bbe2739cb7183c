#!/usr/bin/env python
"""Write the run's provenance manifest: versions, BLAS, models (revisions, weight sha256), config hash,
seeds, threads, device, and the start and end time of the run's outputs."""

import argparse

from _common import run


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True, help="the run's config as JSON")
    ap.add_argument("--manifests", nargs="+", required=True)
    ap.add_argument("--records", nargs="*", default=[], help="JSON outputs whose provenance blocks are gathered")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from powerlens.steps import provenance_manifest

    doc = provenance_manifest(a.config, a.manifests, a.records, a.out)
    print(f"run {doc['run']}: {len(doc['models'])} models, config sha256 {doc['config_sha256'][:12]}")


if __name__ == "__main__":
    run(main)

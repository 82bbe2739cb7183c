"""Write the run's provenance manifest: versions, BLAS, models (revisions, weight sha256), config hash,
seeds, threads, device, and the start and end time of the run's outputs."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--config", required=True, help="the run's config as JSON")
    ap.add_argument("--manifests", nargs="+", required=True)
    ap.add_argument("--records", nargs="*", required=True, help="JSON outputs whose provenance blocks are gathered")
    ap.add_argument("--out", required=True)
    ap.add_argument("--choices", required=True, help="the report's modelling-choices page (HTML)")


def run(a) -> None:
    from powerlens.pipeline.steps import provenance_manifest

    import json

    from powerlens.core.io import write_text
    from powerlens.outputs.provenance import modelling_choices_html
    from powerlens.pipeline.steps import MODELLING_CHOICES

    doc = provenance_manifest(a.config, a.manifests, a.records, out_path=a.out)
    write_text(a.choices, modelling_choices_html(json.loads(a.config), MODELLING_CHOICES))
    print(f"run {doc['run']}: {len(doc['models'])} models, config sha256 {doc['config_sha256'][:12]}")

"""Write table_models.{csv,md,tex} from the extracted models' metadata."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--stem", required=True, help="output path without suffix")
    ap.add_argument("--labels", required=True, help="JSON {model key: display name} (the config's labels)")
    ap.add_argument("--manifests", nargs="+", required=True, help="manifest.json files (where each model came from)")
    ap.add_argument("metas", nargs="+", help="weights.json files")


def run(a) -> None:
    from powerlens.core.io import read_json
    from powerlens.outputs.tables import models_table, write_table

    import json

    mans = {m["model"]: m for m in map(read_json, a.manifests)}
    df = models_table([read_json(p) for p in a.metas], json.loads(a.labels), mans)
    write_table(df, a.stem, caption="Models: checkpoints and architecture twins used in this run, trained first (name, config "
                "key, where the weights come from, revision, size, and the weights label every output carries).")
    print(df.to_string(index=False))

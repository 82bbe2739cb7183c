"""Write table_models.{csv,md,tex} from the extracted models' metadata."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--stem", required=True, help="output path without suffix")
    ap.add_argument("metas", nargs="+", help="weights.json files")


def run(a) -> None:
    from powerlens.io import read_json
    from powerlens.tables import models_table, write_table

    df = models_table([read_json(p) for p in a.metas])
    write_table(df, a.stem, caption="Models: checkpoints and architecture twins used in this run.")
    print(df.to_string(index=False))

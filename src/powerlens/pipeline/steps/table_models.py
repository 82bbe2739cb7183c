"""Write table_models.{csv,md,tex} from the extracted models' metadata."""

from __future__ import annotations

from powerlens.core.io import read_json
from powerlens.pipeline.options import Option, show_table

OPTIONS = (
    Option("stem", "param:stem", help="output path without suffix"),
    Option("labels", "param:labels", kind="json", help="JSON {model key: display name} (the config's labels)"),
    Option("manifests", "input:manifests", many=True, help="manifest.json files (where each model came from)"),
    Option("metas", "input:metas", many=True, help="weights.json files"),
    Option("record", "output:record", help="JSON of the sha256 of the table's files (the article and the report "
           "refuse a table changed after this step)"),
)


def table_models(*, stem: str, labels: dict, manifests: list[str], metas: list[str], record: str):
    from powerlens.outputs.records import write_record
    from powerlens.outputs.staging import staged
    from powerlens.outputs.tables import models_table, write_table

    mans = {m["model"]: m for m in map(read_json, manifests)}
    from powerlens.outputs.figures.style import model_rank

    meta = [read_json(p) for p in metas]
    rank = model_rank({m["model"]: m for m in meta})  # the verdict table's order, as every figure and table has it
    df = models_table(sorted(meta, key=lambda m: rank.get(m["model"], len(rank))), labels, mans)
    with staged({"stem": stem, "record": record}) as s:  # .csv, .md, .tex, .html and the record together
        write_table(df, s["stem"],
                    caption="Models: checkpoints and architecture twins used in this run, trained first (name, "
                    "config key, where the weights come from, revision, size, and the weights label every output "
                    "carries).")
        write_record(s["record"], [s["stem"]], "table_models")
    return df


show = show_table
STEP = table_models

"""Write table_claims: each claim C1-C10 with its criterion (paper.md section 4b, numbers from the config),
the models behind each family verdict, the measured value, the null and the verdict."""

from __future__ import annotations

from powerlens.core.io import read_json
from powerlens.pipeline.options import Option, show_table

OPTIONS = (
    Option("meta", "input:meta", many=True, help="weights.json of every model"),
    Option("spectra", "input:spectra", many=True, help="spectra.csv of every model (from the spectra step)"),
    Option("dynamics", "input:dynamics", many=True),
    Option("theory", "input:theory", many=True),
    Option("steering", "input:steering", many=True),
    Option("criteria", "param:criteria", kind="json", help="JSON of the claims criteria"),
    Option("labels", "param:labels", kind="json"),
    Option("table", "param:table", help="table_claims stem: the full evidence of judged claims"),
    Option("verdicts", "param:verdicts", help="table_claim_verdicts stem: one row per claim"),
    Option("twins", "param:twins", help="table_claims_twins stem: rows of random-weight twins only"),
)


def claims(*, meta: list[str], spectra: list[str], dynamics: list[str], theory: list[str], steering: list[str],
           criteria: dict, labels: dict, table: str, verdicts: str, twins: str):
    import pandas as pd

    from powerlens.analysis.claims import evaluate, is_twin_row, verdict_view

    metas = {m["model"]: m for m in (read_json(p) for p in meta)}
    records = [r for p in theory for r in read_json(p)["results"]]
    df = evaluate(criteria, metas, pd.concat([pd.read_csv(p) for p in spectra]),
                  pd.concat([pd.read_csv(p) for p in dynamics]), records,
                  pd.concat([pd.read_csv(p) for p in steering]), labels=labels)
    view = verdict_view(df)
    twin = is_twin_row(df)
    _write(view, df[~twin].reset_index(drop=True), df[twin].reset_index(drop=True), table, verdicts, twins)
    return view


def _write(view, judged, twin_rows, table: str, verdicts: str, twins: str) -> None:
    import pandas as pd

    from powerlens.analysis.claims import VIEW_MISSING, VIEW_NOT_APPLICABLE, verdict_class, verdict_column_class
    from powerlens.outputs.tables import write_table

    fams = [c for c in view.columns if c not in ("claim", "statement", "not judged in this run")]
    write_table(view, verdicts, caption="Claims at a glance: one row per claim, one column per model family with "
                "trained weights (a family's verdict needs every trained model of it to pass), the synthetic-layer "
                "checks last. A failed multi-part criterion names the part that failed. The evidence is in "
                "table_claims; random-weight twins are never evidence (table_claims_twins).",
                missing={**{f: VIEW_NOT_APPLICABLE for f in fams}, **VIEW_MISSING}, cell_class=verdict_class)
    write_table(judged, table, caption="Claims audit (paper.md section 4b), models with "
                "trained weights and synthetic layers: criterion fixed in the config before the run, measured value, "
                "the null it was judged against, verdict and the part of the criterion that failed. A family's "
                "verdict uses its trained models only.", cell_class=verdict_column_class)
    if not len(twin_rows):
        twin_rows = pd.DataFrame([{"claim": "-", "family": "-", "measured": "no family in this run has random-weight "
                                   "twins only"}])
    write_table(twin_rows, twins, caption="Random-weight twins: code exercise, not evidence. The same criteria run on "
                "architecture twins (a paper model's exact config with seeded random weights) of families that "
                "have no trained model in this run; nothing here is a verdict on a claim.")


show = show_table
STEP = claims

"""Write table_claims: each claim C1-C10 with its criterion (paper.md section 4b, numbers from the config),
the models behind each family verdict, the measured value, the null and the verdict."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--meta", nargs="+", required=True, help="weights.json of every model")
    ap.add_argument("--spectra", nargs="+", required=True)
    ap.add_argument("--dynamics", nargs="+", required=True)
    ap.add_argument("--theory", nargs="+", required=True)
    ap.add_argument("--steering", nargs="+", required=True)
    ap.add_argument("--criteria", required=True, help="JSON of the claims criteria")
    ap.add_argument("--labels", required=True)
    ap.add_argument("--table", required=True, help="table_claims stem: the full evidence of judged claims")
    ap.add_argument("--verdicts", required=True, help="table_claim_verdicts stem: one row per claim")
    ap.add_argument("--twins", required=True, help="table_claims_twins stem: rows of random-weight twins only")


def run(a) -> None:
    import json

    import pandas as pd

    from powerlens.analysis.claims import (VIEW_MISSING, VIEW_NOT_APPLICABLE, evaluate, is_twin_row, verdict_class,
                                  verdict_column_class, verdict_view)
    from powerlens.core.io import read_json
    from powerlens.outputs.tables import write_table

    meta = {m["model"]: m for m in (read_json(p) for p in a.meta)}
    theory = [r for p in a.theory for r in read_json(p)["results"]]
    df = evaluate(json.loads(a.criteria), meta, pd.concat([pd.read_csv(p) for p in a.spectra]),
                  pd.concat([pd.read_csv(p) for p in a.dynamics]), theory,
                  pd.concat([pd.read_csv(p) for p in a.steering]), labels=json.loads(a.labels))
    view = verdict_view(df)
    fams = [c for c in view.columns if c not in ("claim", "statement", "not judged in this run")]
    write_table(view, a.verdicts, caption="Claims at a glance: one row per claim, one column per model family with "
                "trained weights (a family's verdict needs every trained model of it to pass), the synthetic-layer "
                "checks last. A failed multi-part criterion names the part that failed. The evidence is in "
                "table_claims; random-weight twins are never evidence (table_claims_twins).",
                missing={**{f: VIEW_NOT_APPLICABLE for f in fams}, **VIEW_MISSING}, cell_class=verdict_class)
    twin = is_twin_row(df)
    write_table(df[~twin].reset_index(drop=True), a.table, caption="Claims audit (paper.md section 4b), models with "
                "trained weights and synthetic layers: criterion fixed in the config before the run, measured value, "
                "the null it was judged against, verdict and the part of the criterion that failed. A family's "
                "verdict uses its trained models only.", cell_class=verdict_column_class)
    twins = df[twin].reset_index(drop=True)
    if not len(twins):
        twins = pd.DataFrame([{"claim": "-", "family": "-", "measured": "no family in this run has random-weight "
                               "twins only"}])
    write_table(twins, a.twins, caption="Random-weight twins: code exercise, not evidence. The same criteria run on "
                "architecture twins (a paper model's exact config with seeded random weights) of families that "
                "have no trained model in this run; nothing here is a verdict on a claim.")
    print(view.to_string(index=False))


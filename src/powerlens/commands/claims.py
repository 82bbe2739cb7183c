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
    ap.add_argument("--table", required=True)


def run(a) -> None:
    import json

    import pandas as pd

    from powerlens.claims import evaluate
    from powerlens.io import read_json
    from powerlens.tables import write_table

    meta = {m["model"]: m for m in (read_json(p) for p in a.meta)}
    theory = [r for p in a.theory for r in read_json(p)["results"]]
    df = evaluate(json.loads(a.criteria), meta, pd.concat([pd.read_csv(p) for p in a.spectra]),
                  pd.concat([pd.read_csv(p) for p in a.dynamics]), theory,
                  pd.concat([pd.read_csv(p) for p in a.steering]), labels=json.loads(a.labels))
    write_table(df, a.table, caption="Claims audit (paper.md section 4b): criterion fixed in the config before the "
                "run, measured value, the null it was judged against, verdict. A family's verdict uses its trained "
                "models only; twin-only families are not tested (random weights are never evidence).")
    print(df.to_string(index=False))

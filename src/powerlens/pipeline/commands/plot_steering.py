"""Draw fig_steering and write table_steering from every model's steering results."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--csv", nargs="+", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--fig", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--continuations", nargs="+", required=True)
    ap.add_argument("--continuations-table", required=True)
    ap.add_argument("--dpi", type=int, required=True)


def run(a) -> None:
    import json

    import pandas as pd

    from powerlens.outputs.figures import fig_steering
    from powerlens.outputs.tables import STEERING_MISSING, steering_table, write_table

    labels = json.loads(a.labels)
    df = pd.concat([pd.read_csv(p) for p in a.csv], ignore_index=True)
    from powerlens.outputs.plotting import draw_split

    weights = dict(zip(df["model"], df["weights"]))
    draw_split(lambda d, s: fig_steering(d, labels, weights, s, a.dpi), df, weights, a.fig, a.dpi, "fig_steering")
    t = steering_table(df, labels)
    write_table(t, a.table, caption="Rank-1 steering of the last layer vs activation addition (same mean change "
                "in norm): alignment with the target u and target-token probability.", missing=STEERING_MISSING)
    print(t.to_string(index=False))
    if a.continuations_table:
        from powerlens.outputs.tables import continuations_table

        c = continuations_table([pd.read_csv(p, keep_default_na=False) for p in a.continuations], labels)
        write_table(c, a.continuations_table, caption="Greedy continuations of fixed prompts with the last layer "
                    "steered towards a token's unembedding direction (rank-1 edit of O, and activation addition "
                    "at the same site with the same mean norm of change), per kappa: does the model start saying "
                    "the target?")

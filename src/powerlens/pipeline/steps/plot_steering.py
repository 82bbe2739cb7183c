"""Draw fig_steering and write table_steering from every model's steering results."""

from __future__ import annotations

from powerlens.pipeline.options import Option, show_table

OPTIONS = (
    Option("csv", "input:csv", many=True),
    Option("meta", "input:meta", many=True, help="weights.json of every steered model (the figure's model order)"),
    Option("labels", "param:labels", kind="json"),
    Option("fig", "param:fig"),
    Option("table", "param:table"),
    Option("continuations", "input:continuations", many=True),
    Option("continuations-table", "param:continuations"),
    Option("parts", "param:parts", kind="json",
           help="JSON {figure: [trained, random weights]}: which parts of each figure the run writes"),
    Option("dpi", "config:plot.dpi", kind="int"),
)


def plot_steering(*, csv: list[str], labels: dict, fig: str, table: str, continuations: list[str],
                  continuations_table: str, dpi: int, meta: list[str] = (), parts: dict | None = None):
    """fig_steering, table_steering and table_continuations, replaced together or not at all; ``parts``: which
    parts (trained, random weights) of the figure the run writes (both where it says nothing)."""
    from powerlens.outputs.staging import staged

    with staged({"fig": fig, "table": table, "cont": continuations_table}) as s:
        return _plot_steering(csv, labels, s["fig"], s["table"], continuations, s["cont"], dpi, list(meta),
                              (parts or {}).get("fig_steering", (True, True)))


def _plot_steering(csv: list[str], labels: dict, fig: str, table: str, continuations: list[str],
                   continuations_table: str, dpi: int, meta: list[str], parts):
    import pandas as pd

    from powerlens.core.io import read_json
    from powerlens.outputs.figures import fig_steering
    from powerlens.outputs.figures.style import in_model_order, model_rank
    from powerlens.outputs.plotting import draw_split
    from powerlens.outputs.tables import CONTINUATIONS_NOTE, STEERING_MISSING, steering_table, write_table
    from powerlens.outputs.tables import continuations_table as cont_table

    df = pd.concat([pd.read_csv(p) for p in csv], ignore_index=True)
    weights = dict(zip(df["model"], df["weights"]))
    rank = model_rank({x["model"]: x for x in map(read_json, meta)}) if meta else {}
    draw_split(lambda d, s: fig_steering(d, labels, weights, s, dpi), in_model_order(df, rank), weights, fig, dpi,
               "fig_steering", parts=tuple(parts))
    t = steering_table(in_model_order(df, rank), labels)  # the figures' (and the verdict table's) model order
    write_table(t, table, caption="Rank-1 steering of the last layer vs activation addition (same mean change "
                "in norm): alignment with the target u and target-token probability.", missing=STEERING_MISSING)
    if continuations_table:
        c = cont_table([pd.read_csv(p, keep_default_na=False) for p in continuations], labels)
        write_table(c, continuations_table, caption="Greedy continuations of fixed prompts with the last layer "
                    "steered towards a token's unembedding direction (rank-1 edit of O, and activation addition "
                    "at the same site with the same mean norm of change), per kappa: does the model start saying "
                    "the target? " + CONTINUATIONS_NOTE)
    return t


show = show_table
STEP = plot_steering

"""Draw fig_spectra and fig_gap and write table_spectra from the per-model spectra outputs."""

from __future__ import annotations

from powerlens.pipeline.options import Option

OPTIONS = (
    Option("npz", "input:npz", many=True),
    Option("csv", "input:csv", many=True),
    Option("meta", "input:meta", many=True, help="weights.json of every model (the figures' model order)"),
    Option("labels", "param:labels", kind="json", help="JSON {model: display label}"),
    Option("fig-spectra", "param:fig_spectra", help="output stem (no suffix)"),
    Option("fig-gap", "param:fig_gap", help="output stem (no suffix)"),
    Option("table", "param:table", help="table_spectra stem (no suffix); empty = skip"),
    Option("parts", "param:parts", kind="json",
           help="JSON {figure: [trained, random weights]}: which parts of each figure the run writes"),
    Option("dpi", "config:plot.dpi", kind="int"),
)


def plot_spectra(*, npz: list[str], csv: list[str], labels: dict, fig_spectra: str, fig_gap: str, table: str,
                 dpi: int, meta: list[str] = (), parts: dict | None = None):
    """fig_spectra, fig_gap and table_spectra, replaced together or not at all (:func:`staged`); ``parts``: which
    parts (trained, random weights) of each figure the run writes (all where it says nothing)."""
    from powerlens.outputs.staging import staged

    with staged({"fig_spectra": fig_spectra, "fig_gap": fig_gap, "table": table}) as s:
        return _plot_spectra(npz, csv, labels, s["fig_spectra"], s["fig_gap"], s["table"], dpi, list(meta),
                             parts or {})


def _plot_spectra(npz: list[str], csv: list[str], labels: dict, fig_spectra: str, fig_gap: str, table: str,
                  dpi: int, meta: list[str], parts: dict):
    import numpy as np
    import pandas as pd

    from powerlens.core.io import read_json
    from powerlens.outputs.figures import fig_gap as draw_gap
    from powerlens.outputs.figures import fig_spectra as draw_spectra
    from powerlens.outputs.figures.style import in_model_order, model_rank
    from powerlens.outputs.plotting import draw_split
    from powerlens.outputs.tables import SPECTRA_MISSING, spectra_table, write_table

    dfs = [pd.read_csv(p) for p in csv]
    models = []
    for p, df in zip(npz, dfs):
        with np.load(p, allow_pickle=False) as z:
            ev = z["eigvals"]
        m = df["model"].iloc[0]
        models.append({"label": labels.get(m, m), "weights": df["weights"].iloc[0], "eigvals": ev,
                       "shared": ev.shape[0] < len(df)})
    weights = {d["model"].iloc[0]: d["weights"].iloc[0] for d in dfs}
    rank = model_rank({x["model"]: x for x in map(read_json, meta)}) if meta else {}
    keys = [d["model"].iloc[0] for d in dfs]
    models = [models[i] for i in sorted(range(len(models)), key=lambda i: rank.get(keys[i], len(rank)))]
    draw_split(lambda d, s: draw_spectra(d, s, dpi), models, weights, fig_spectra, dpi, "fig_spectra",
               parts=tuple(parts.get("fig_spectra", (True, True))))
    allrows = in_model_order(pd.concat(dfs, ignore_index=True), rank)
    draw_split(lambda d, s: draw_gap(d, labels, weights, s, dpi), allrows, weights, fig_gap, dpi, "fig_gap",
               parts=tuple(parts.get("fig_gap", (True, True))))
    if not table:
        return None
    t = spectra_table(sorted(dfs, key=lambda d: rank.get(d["model"].iloc[0], len(rank))), labels)  # figures' order
    write_table(t, table, caption="Spectra of F_t = O_t V_t per model (over unique layers).", missing=SPECTRA_MISSING)
    return t


def show(result, kw: dict) -> None:
    if result is not None:
        print(result.to_string(index=False))


STEP = plot_spectra

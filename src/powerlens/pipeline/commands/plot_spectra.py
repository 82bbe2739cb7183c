"""Draw fig_spectra and fig_gap and write table_spectra from the per-model spectra outputs."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--npz", nargs="+", required=True)
    ap.add_argument("--csv", nargs="+", required=True)
    ap.add_argument("--labels", required=True, help="JSON {model: display label}")
    ap.add_argument("--fig-spectra", required=True, help="output stem (no suffix)")
    ap.add_argument("--fig-gap", required=True, help="output stem (no suffix)")
    ap.add_argument("--table", required=True, help="table_spectra stem (no suffix); empty = skip")
    ap.add_argument("--dpi", type=int, required=True)


def run(a) -> None:
    import json

    import numpy as np
    import pandas as pd

    from powerlens.outputs.figures import fig_gap, fig_spectra
    from powerlens.outputs.tables import SPECTRA_MISSING, spectra_table, write_table

    labels = json.loads(a.labels)
    dfs = [pd.read_csv(p) for p in a.csv]
    models = []
    for p, df in zip(a.npz, dfs):
        with np.load(p, allow_pickle=False) as z:
            ev = z["eigvals"]
        m = df["model"].iloc[0]
        models.append({"label": labels.get(m, m), "weights": df["weights"].iloc[0], "eigvals": ev,
                       "shared": ev.shape[0] < len(df)})
    from powerlens.outputs.plotting import draw_split

    weights = {d["model"].iloc[0]: d["weights"].iloc[0] for d in dfs}
    draw_split(lambda d, s: fig_spectra(d, s, a.dpi), models, weights, a.fig_spectra, a.dpi, "fig_spectra")
    allrows = pd.concat(dfs, ignore_index=True)
    draw_split(lambda d, s: fig_gap(d, labels, weights, s, a.dpi), allrows, weights, a.fig_gap, a.dpi, "fig_gap")
    if a.table:
        t = spectra_table(dfs, labels)
        write_table(t, a.table, caption="Spectra of F_t = O_t V_t per model (over unique layers).",
                    missing=SPECTRA_MISSING)
        print(t.to_string(index=False))

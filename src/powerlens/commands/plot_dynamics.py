"""Draw fig_gamma, fig_rho, fig_albert_consensus, fig_albert_rotation and write table_alignment."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--csv", nargs="+", required=True, help="per-model, per-mode dynamics CSVs")
    ap.add_argument("--npz", nargs="+", required=True, help="matching dynamics arrays")
    ap.add_argument("--meta", nargs="+", required=True, help="weights.json of every model")
    ap.add_argument("--labels", default="{}")
    ap.add_argument("--out", nargs=5, required=True, metavar="STEM",
                    help="stems: fig_gamma fig_rho fig_albert_consensus fig_albert_rotation table_alignment")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--dpi", type=int, default=150)


def run(a) -> None:
    import json

    import numpy as np
    import pandas as pd

    from powerlens.figures import fig_albert_consensus, fig_albert_rotation, fig_gamma, fig_rho
    from powerlens.io import read_json
    from powerlens.tables import alignment_table, write_table

    labels = json.loads(a.labels)
    shared = {}
    for p in a.meta:
        m = read_json(p)
        shared[m["model"]] = m["shared_weights"]
    df = pd.concat([pd.read_csv(p) for p in a.csv], ignore_index=True)
    df["shared"] = df["model"].map(shared)
    weights = dict(zip(df["model"], df["weights"]))
    fig_gamma(df, labels, weights, a.out[0], a.dpi)
    fig_rho(df, labels, weights, a.out[1], a.alpha, a.dpi)
    fig_albert_consensus(df, labels, weights, a.out[2], a.dpi)
    runs = []
    for csv, npz in zip(a.csv, a.npz):
        g = pd.read_csv(csv)
        m = g["model"].iloc[0]
        if shared[m] and g["mode"].iloc[0] == "attention-only":
            with np.load(npz, allow_pickle=False) as z:
                tr = z["trajectory"]
            last = g.iloc[-20:]
            runs.append({"label": labels.get(m, m), "weights": weights[m], "trajectory": tr,
                         "leading_type": g["leading_type"].iloc[0], "arg_mu1": float(g["arg_mu1"].iloc[0]),
                         "predicted_dtheta": float(g["predicted_dtheta"].iloc[0]) if "predicted_dtheta" in g
                         else float(g["arg_mu1"].iloc[0]),
                         "rotation_plane": g["rotation_plane"].iloc[0],
                         "mean_dtheta": float(last["mean_dtheta"].mean())})
    fig_albert_rotation(runs, a.out[3], a.dpi)
    t = alignment_table(df, labels, a.alpha)
    write_table(t, a.out[4], caption="Alignment of tokens with each layer's leading eigenvector: gamma vs null "
                "models, rho > 0.5 and sign-test significance after Holm correction.")
    print(t.to_string(index=False))

"""Draw fig_theory and write table_theory from the three theory experiments."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--json", nargs=3, required=True, metavar=("REAL", "COMPLEX", "BIPARTITE"))
    ap.add_argument("--npz", nargs=3, required=True, metavar=("REAL", "COMPLEX", "BIPARTITE"))
    ap.add_argument("--fig", required=True, help="fig_theory stem")
    ap.add_argument("--table", required=True, help="table_theory stem")
    ap.add_argument("--dpi", type=int, default=150)


def run(a) -> None:
    import numpy as np

    from powerlens.figures import fig_theory
    from powerlens.io import read_json
    from powerlens.tables import theory_table, write_table

    docs = [read_json(p) for p in a.json]
    arrs = []
    for p in a.npz:
        with np.load(p, allow_pickle=False) as z:
            arrs.append({k: z[k] for k in z.files})
    rate = next(r["predicted"] for r in docs[0]["results"] if r["attention"] == "full")
    angle = next(r["predicted"] for r in docs[1]["results"] if r["quantity"].startswith("angle"))
    fig_theory(arrs[0], arrs[1], arrs[2], {"rate": rate, "angle": angle}, a.fig, a.dpi)
    t = theory_table([r for d in docs for r in d["results"]])
    write_table(t, a.table, caption="Theory checks on synthetic layers (prediction under full attention; "
                "softmax rows show how far random W_Q, W_K move the measured values).")
    print(t.to_string(index=False))

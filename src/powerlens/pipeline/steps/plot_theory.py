"""Draw fig_theory and write table_theory from the three theory experiments."""

from __future__ import annotations

from powerlens.core.io import read_json
from powerlens.pipeline.options import Option, show_table

CASES = ("real", "complex", "bipartite")
OPTIONS = tuple(
    Option(f"{c}-{kind}", f"input:{c}_{kind}", help=f"the {c} case's {what} (theory step)")
    for c in CASES for kind, what in (("json", "results"), ("npz", "arrays"))
) + (
    Option("fig", "param:fig", help="fig_theory stem"),
    Option("table", "param:table", help="table_theory stem"),
    Option("dpi", "config:plot.dpi", kind="int", help="resolution of the PNG figure"),
    Option("alpha", "config:dynamics.alpha", kind="float", help="significance level of C4's verdict (dynamics.alpha)"),
)


def plot_theory(*, fig: str, table: str, dpi: int, alpha: float, **cases: str):
    """fig_theory and table_theory from the theory step's files (``<case>_json``, ``<case>_npz``)."""
    import numpy as np

    from powerlens.outputs.figures import fig_theory
    from powerlens.outputs.tables import THEORY_MISSING, theory_table, write_table

    docs = {c: read_json(cases[f"{c}_json"]) for c in CASES}
    arrs = {}
    for c in CASES:
        with np.load(cases[f"{c}_npz"], allow_pickle=False) as z:
            arrs[c] = {k: z[k] for k in z.files}
    rate = next(r["predicted"] for r in docs["real"]["results"] if r["id"] == "C2.rate.full")
    angle = next(r["predicted"] for r in docs["complex"]["results"] if r["id"] == "C3.angle.full")
    fig_theory(arrs["real"], arrs["complex"], arrs["bipartite"], {"rate": rate, "angle": angle}, fig, dpi)
    t = theory_table([r for c in CASES for r in docs[c]["results"]], alpha=alpha)
    write_table(t, table, caption="Theory checks on synthetic layers (prediction under full attention; "
                "softmax rows show how far random W_Q, W_K move the measured values). \"check\" is each row's own "
                "criterion; the rows \"C2 verdict\", \"C3 verdict\" and \"C4 verdict\" are the claims' verdicts, "
                "the same records table_claims shows.", missing=THEORY_MISSING)
    return t


show = show_table
STEP = plot_theory

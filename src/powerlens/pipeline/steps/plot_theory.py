"""Draw fig_theory and write table_theory from the three theory experiments."""

from __future__ import annotations

from powerlens.core.io import read_json
from powerlens.pipeline.options import ALPHA, C4_RARE_SHARE, Option, show_table

CASES = ("real", "complex", "bipartite")
OPTIONS = tuple(
    Option(f"{c}-{kind}", f"input:{c}_{kind}", help=f"the {c} case's {what} (theory step)")
    for c in CASES for kind, what in (("json", "results"), ("npz", "arrays"))
) + (
    Option("fig", "param:fig", help="fig_theory stem"),
    Option("table", "param:table", help="table_theory stem"),
    Option("dpi", "config:plot.dpi", kind="int", help="resolution of the PNG figure"),
    ALPHA,
    C4_RARE_SHARE,
)


def plot_theory(*, fig: str, table: str, dpi: int, alpha: float, c4_rare_share: float, **cases: str):
    """fig_theory and table_theory from the theory step's files (``<case>_json``, ``<case>_npz``), replaced
    together or not at all (:func:`powerlens.outputs.staging.staged`)."""
    from powerlens.outputs.staging import staged

    with staged({"fig": fig, "table": table}) as s:
        return _plot_theory(s["fig"], s["table"], dpi, {"alpha": alpha, "C4_rare_share": c4_rare_share}, cases)


def _plot_theory(fig: str, table: str, dpi: int, crit: dict, cases: dict):
    import numpy as np

    from powerlens.outputs.figures import fig_theory
    from powerlens.outputs.tables import THEORY_MISSING, theory_table, write_table

    docs = {c: read_json(cases[f"{c}_json"]) for c in CASES}
    arrs = {}
    for c in CASES:
        with np.load(cases[f"{c}_npz"], allow_pickle=False) as z:
            arrs[c] = {k: z[k] for k in z.files}
    from powerlens.analysis.theory.verdicts import c4_verdict

    records = [r for c in CASES for r in docs[c]["results"]]
    notes = {claim: {r["detail"]["sharpness"]: f"{round(r['measured'] * r['detail']['seeds'])} of "
                     f"{r['detail']['seeds']} seeds" for r in records if r["id"] == f"{claim}.sweep"}
             for claim in ("C2", "C3")}
    v = c4_verdict(records, crit["alpha"], crit["C4_rare_share"])
    notes["C4"] = f"exact stratified p {v['p']:.3g}" if v else "no sweep"
    fig_theory(arrs["real"], arrs["complex"], arrs["bipartite"], notes, fig, dpi)
    t = theory_table(records, crit=crit)
    write_table(t, table, caption="Theory checks on synthetic layers (paper.md section 4d, revision 5): the "
                "uniform-attention positive controls (the law is then exactly the power method), the share of "
                "weight seeds reaching the claimed end state at each sharpness of the softmax sweep (C2, C3), every "
                "cell and seed of the C4 sweep with its equilibrium, class, stratum (configured sharpness x (size, "
                "seed) block: revision 6) and checks, and the positive "
                "control. \"check\" is each row's own criterion; the rows \"C2 verdict\", \"C3 verdict\" and "
                "\"C4 verdict\" are the claims' verdicts, the same records table_claims shows.",
                missing=THEORY_MISSING)
    return t


show = show_table
STEP = plot_theory

"""table_theory: every synthetic-layer record with its own check and notes, then the verdicts of C2, C3 and C4
(:func:`powerlens.analysis.claims.theory_verdicts`, the function table_claims takes them from)."""

from __future__ import annotations

import pandas as pd

from powerlens.analysis.claims import theory_verdicts
from powerlens.core.fmt import fmt_num


def _theory_notes(r: dict) -> tuple[str, str]:
    """(check, notes) of one theory record for table_theory."""
    from powerlens.analysis.theory.verdicts import stratum

    det = r["detail"]
    if det.get("sweep"):  # a C4 cell and seed
        status = f"{det['stability']} equilibrium" if det.get("equilibrium_found") else "no equilibrium"
        notes = (f"{status}; stratum {stratum(det)}; residual "
                 f"{fmt_num(det['fixed_point_residual'])} after {det['newton_iterations']} Newton iterations"
                 f"{' (groups swap each step)' if det.get('swap') else ''}; |score| at the equilibrium mean "
                 f"{fmt_num(det['score_at_equilibrium'])}, max {fmt_num(det['max_score_at_equilibrium'])}; check: "
                 f"{det['broke']}/{det['runs']} perturbed runs broke ({det['check']}), epsilon = 0 control stays: "
                 f"{'yes' if det['control_stays'] else 'no'}; plain iteration ({det['plain_iteration_steps']} steps) "
                 f"reaches it: {'yes' if det['plain_iteration_reaches'] else 'no'}; random starts ending bipartite: "
                 f"{det['random_starts_bipartite']} of {det['random_starts']}")
        return ("in the test" if r["passed"] else "no equilibrium: reported, not tested"), notes
    if "runs" in det:  # the positive control
        return ("pass" if r["passed"] else "fail"), (f"{det['broke']}/{det['runs']} runs broke; epsilon = 0 control "
                                                     f"stays: {'yes' if det['control_stays'] else 'no'}")
    if "isotropic_endings" in det:
        ends = ", ".join(f"{k} {v}" for k, v in det["isotropic_endings"].items() if v)
        far = fmt_num(max(det["final_line_distance"]))
        return ("pass" if r["passed"] else "fail"), f"largest final distance {far}; isotropic starts end: {ends}"
    if "isotropic_reach_plane" in det:
        far = fmt_num(max(det["final_plane_distance"]))
        return ("pass" if r["passed"] else "fail"), (f"largest final distance {far}; isotropic starts reaching the "
                                                     f"plane: {det['isotropic_reach_plane']} of {det['seeds']}")
    return ("pass" if r["passed"] else "fail"), "-"


def theory_table(results: list[dict], *, crit: dict) -> pd.DataFrame:
    """``table_theory``: case, attention, quantity, predicted, measured, relative error, criterion, the row's
    own check, notes; then one row per claim (C2, C3, C4) with its verdict from
    :func:`powerlens.analysis.claims.theory_verdicts`, the function table_claims takes it from (so they cannot
    disagree); ``crit``: alpha and ``C4_rare_share``."""
    rows = []
    for r in results:
        check, notes = _theory_notes(r)
        rows.append({"case": r["case"], "attention": r["attention"], "quantity": r["quantity"],
                     "predicted": r["predicted"], "measured": r["measured"], "relative error": r["rel_error"],
                     "criterion": r["criterion"], "check": check, "notes": notes})
    for claim, (criterion, v) in theory_verdicts(results, crit).items():
        rows.append({"case": f"{claim} verdict", "attention": "softmax",
                     "quantity": "-", "predicted": None, "measured": None, "relative error": None,
                     "criterion": criterion, "check": v.word + ("" if v.ok else f": {v.failed}"),
                     "notes": v.measured})
    return pd.DataFrame(rows)


THEORY_MISSING = {"predicted": "no analytic prediction (the C4 sweep cells and the verdict rows)",
                  "quantity": "a verdict row",
                  "measured": "a verdict row (its measurement is in notes)",
                  "relative error": "no prediction to compare with, or the prediction is 0 (plane distance)"}



"""What the theory checks decide with, without their arithmetic: the tolerances of C2 and C3, the names of an
equilibrium's stability, and C4's verdict from the sweep's records. Pure numpy and scipy (no torch), so
the claims, the tables and the figures read the theory step's results without importing the attention law."""

from __future__ import annotations

import numpy as np

from powerlens.core.fmt import sci

#: The synthetic checks' tolerances (C2: the rate's relative error; C3: the distance to the plane, the angle).
C2_REL_TOL, C3_DIST_TOL, C3_ANGLE_TOL = 0.05, 1e-6, 1e-3
RESIDUAL = 1e-9  # an equilibrium: one full law step moves it by less than this (max abs)
UNSTABLE, STABLE, NEUTRAL = "unstable", "stable", "neutral"


def record_id(r: dict) -> str:
    """A theory record's id (``C2.rate.full``, ``C4.cell``...): what the code looks records up by."""
    if "id" not in r:
        from powerlens.core.errors import PowerlensError

        raise PowerlensError("a theory result without an id (written by a powerlens before revision 5)",
                             "re-run the theory step: snakemake --forcerun theory (with your other arguments)")
    return r["id"]


def c4_verdict(results: list[dict], alpha: float) -> dict | None:
    """C4's verdict from the sweep's results (dicts as the theory step writes them), the one place table_theory
    and table_claims take it from. Over the non-degenerate cells with an equilibrium, at the (size,
    sharpness) pairs whose one-head cell is among them: is "unstable" more frequent with several heads than
    with one (one-sided Fisher exact test over cells, < alpha)? And is the positive control unstable? A p
    within 1e-6 (relative) of alpha is inconclusive. None when the results hold no sweep."""
    from scipy.stats import fisher_exact

    from powerlens.analysis import decisions as dc

    cells = [r for r in results if record_id(r) == "C4.cell"]
    pos = next((r for r in results if record_id(r) == "C4.positive_control"), None)
    if not cells:
        return None
    tested = [r for r in cells if r["passed"]]
    ones = {(r["detail"]["d"], r["detail"]["sharpness"]) for r in tested if r["detail"]["heads"] == 1}
    used = [r for r in tested if (r["detail"]["d"], r["detail"]["sharpness"]) in ones]
    unstable = lambda r: r["detail"]["stability"] == UNSTABLE  # noqa: E731
    one = [r for r in used if r["detail"]["heads"] == 1]
    many = [r for r in used if r["detail"]["heads"] > 1]
    u1, um = sum(map(unstable, one)), sum(map(unstable, many))
    p = (float(fisher_exact([[um, len(many) - um], [u1, len(one) - u1]], alternative="greater").pvalue)
         if one and many else float("nan"))
    sig = dc.compare(p, alpha, above=False) if not np.isnan(p) else dc.NO
    power = dc.YES if pos is not None and pos["passed"] else dc.NO
    degenerate = [r for r in cells if r["detail"].get("degenerate")]
    none = [r for r in cells if not r["detail"].get("equilibrium_found") and not r["detail"].get("degenerate")]
    checks = [r["detail"]["check"] for r in tested]
    measured = (f"unstable equilibria: several heads {um} of {len(many)} cells, one head {u1} of {len(one)} "
                f"(one-sided Fisher p {p:.3g}); {len(degenerate)} degenerate cells (uniform attention, not tested), "
                f"{len(none)} without an equilibrium (residual >= {sci(RESIDUAL)}); perturbation check: "
                f"{checks.count('agrees')} agree, {checks.count('disagrees')} disagree, "
                f"{checks.count('too slow to see')} too slow to see in the run's steps")
    measured += (f"; positive control: spectral radius {pos['measured']:.4g} ({pos['detail']['stability']}), broke "
                 f"{pos['detail']['broke']}/{pos['detail']['runs']}" if pos else "; no positive control")
    failed = "; ".join(x for x, bad in ((f"Fisher p {p:.3g} >= {alpha}", sig == dc.NO),
                                         ("positive control not unstable (no power)", power == dc.NO)) if bad)
    return {"state": dc.both(sig, power), "ok": dc.both(sig, power) == dc.YES, "measured": measured,
            "p": p, "power": power == dc.YES, "failed": failed or f"Fisher p {p:.3g} within 1e-6 of {alpha}",
            "unstable_many": um, "cells_many": len(many), "unstable_one": u1, "cells_one": len(one),
            "null": "one head at the same size and sharpness (one-sided Fisher exact test over cells)"}

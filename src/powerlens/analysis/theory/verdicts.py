"""What the theory checks decide with, without their arithmetic: the tolerances of C2 and C3, the names of an
equilibrium's stability, and C4's verdict from the sweep's records. Pure numpy and scipy (no torch), so
the claims, the tables and the figures read the theory step's results without importing the attention law."""

from __future__ import annotations

import numpy as np

from powerlens.core.fmt import sci

#: The synthetic checks' tolerances (paper.md section 4d, revision 5): C2, a token on the line of v_1 (sin angle);
#: C3, a token on the leading plane; the share of weight seeds that must reach it at every sharpness; the
#: uniform-attention positive control's relative error against the analytic rate or angle.
C2_LINE_TOL, C3_DIST_TOL, C23_SHARE, CONTROL_TOL = 1e-6, 1e-6, 0.95, 1e-9
#: An equilibrium: one full law step moves it by less than this (max abs). Our deviation from the spec's 1e-12:
#: float64 rounding of one law step leaves up to 1.2e-11 at d 32 at points Newton has converged to quadratically
#: (measured on 320 cell-seeds of the default sweep: 272 below 1e-12, 31 between 1e-12 and 1.2e-11, the other 17
#: at 1e-3 or more), so 1e-12 would drop equilibria for rounding alone.
RESIDUAL = 1e-9
UNSTABLE, STABLE, NEUTRAL = "unstable", "stable", "neutral"


def record_id(r: dict) -> str:
    """A theory record's id (``C2.rate.full``, ``C4.cell``...): what the code looks records up by."""
    if "id" not in r:
        from powerlens.core.errors import PowerlensError

        raise PowerlensError("a theory result without an id (written by a powerlens before revision 5)",
                             "re-run the theory step: `snakemake --cores all --configfile <your config> --forcerun "
                             "theory`")
    return r["id"]


def strata_edges(targets: list[float]) -> np.ndarray:
    """The sharpness strata's edges: the geometric midpoints between the sweep's target sharpness values."""
    t = np.sort(np.unique(np.asarray(targets, dtype=float)))
    return np.sqrt(t[1:] * t[:-1])


def stratum(score: float, degenerate: bool, edges: np.ndarray) -> str:
    """The stratum of an equilibrium: its own for uniform attention there (degenerate), else the band of the
    sweep's sharpness its measured mean |score| falls in."""
    if degenerate:
        return "uniform attention (degenerate)"
    i = int(np.searchsorted(edges, score))
    lo = "0" if i == 0 else f"{edges[i - 1]:.3g}"
    hi = "inf" if i == len(edges) else f"{edges[i]:.3g}"
    return f"|score| {lo} to {hi}"


def stratified_exact(tables: list[tuple[int, int, int, int]]) -> tuple[float, float, float]:
    """One-sided exact stratified test (the conditional form of Cochran-Mantel-Haenszel): per stratum (a, n1, b,
    n0) = (unstable with several heads, cells with several heads, unstable with one head, cells with one head).
    Given every stratum's margins, a_k is hypergeometric; the p is P(sum A_k >= sum a_k) (H1: several heads more
    often unstable), by convolution. Returns (p, the smallest p these margins allow with several heads unstable
    wherever they can be, the Mantel-Haenszel common odds ratio)."""
    from scipy.stats import hypergeom

    pmf, best, obs = np.ones(1), np.ones(1), 0
    num = den = 0.0
    for a, n1, b, n0 in tables:
        N, K = n1 + n0, a + b
        lo, hi = max(0, K - n0), min(K, n1)
        ks = np.arange(lo, hi + 1)
        pk = np.zeros(hi + 1)
        pk[lo:] = hypergeom.pmf(ks, N, K, n1)
        pmf = np.convolve(pmf, pk)
        obs += a
        # perfect data at these cell counts: every multi-head cell unstable, every one-head cell stable (K = n1)
        best = np.convolve(best, hypergeom.pmf(np.arange(n1 + 1), N, n1, n1) if N else np.ones(1))
        if N:
            num += a * (n0 - b) / N
            den += b * (n1 - a) / N
    p = float(pmf[obs:].sum()) if obs < len(pmf) else 0.0
    attainable = float(best[-1]) if len(best) else 1.0
    return min(1.0, p), attainable, (num / den if den > 0 else float("inf") if num > 0 else float("nan"))


def c4_verdict(results: list[dict], alpha: float) -> dict | None:
    """C4's verdict from the sweep's records (paper.md section 4d, revision 5), the one place table_theory and
    table_claims take it from. Every equilibrium found, degenerate ones included, falls in a stratum of the
    sharpness measured at it (:func:`stratum`); within each, unstable with several heads against one head; the
    one-sided exact stratified test over the strata (:func:`stratified_exact`), with its attainable p; and the
    positive control must be unstable. "Rare": the share of random starts that end bipartite. A p within 1e-6
    (relative) of alpha is inconclusive. None when the results hold no sweep."""
    from powerlens.analysis import decisions as dc

    cells = [r for r in results if record_id(r) == "C4.cell"]
    pos = next((r for r in results if record_id(r) == "C4.positive_control"), None)
    if not cells:
        return None
    edges = strata_edges([r["detail"]["sharpness"] for r in cells])
    found = [r for r in cells if r["detail"]["equilibrium_found"]]
    counts: dict[str, list[int]] = {}
    for r in found:
        key = stratum(r["detail"]["score_at_equilibrium"], r["detail"]["degenerate"], edges)
        c = counts.setdefault(key, [0, 0, 0, 0])
        unstable = r["detail"]["stability"] == UNSTABLE
        if r["detail"]["heads"] > 1:
            c[0] += unstable
            c[1] += 1
        else:
            c[2] += unstable
            c[3] += 1
    p, attainable, odds = stratified_exact([tuple(c) for c in counts.values()])
    sig = dc.compare(p, alpha, above=False)
    power = dc.YES if pos is not None and pos["passed"] else dc.NO
    powered = attainable < alpha
    none = len(cells) - len(found)
    rare_n = sum(r["detail"].get("random_starts", 0) for r in cells)
    rare_k = sum(r["detail"].get("random_starts_bipartite", 0) for r in cells)
    checks = [r["detail"]["check"] for r in found]
    per = "; ".join(f"{k}: several heads {c[0]}/{c[1]}, one head {c[2]}/{c[3]}" for k, c in sorted(counts.items()))
    measured = (f"unstable equilibria per stratum of the sharpness at the equilibrium: {per} (exact stratified "
                f"one-sided p {p:.3g}, Mantel-Haenszel odds ratio {odds:.3g}; attainable p {attainable:.3g}); "
                f"{len(found)} of {len(cells)} cell-seeds with an equilibrium ({none} without, residual >= "
                f"{sci(RESIDUAL)}); rare: {rare_k} of {rare_n} random starts end in two antipodal groups; perturbation "
                f"check: {checks.count('agrees')} agree, {checks.count('disagrees')} disagree, "
                f"{checks.count('too slow to see')} too slow to see")
    measured += (f"; positive control: spectral radius {pos['measured']:.4g} ({pos['detail']['stability']}), broke "
                 f"{pos['detail']['broke']}/{pos['detail']['runs']}" if pos else "; no positive control")
    failed = "; ".join(x for x, bad in ((f"stratified p {p:.3g} >= {alpha}", sig == dc.NO),
                                         ("positive control not unstable (no power)", power == dc.NO)) if bad)
    return {"state": dc.both(sig, power), "ok": dc.both(sig, power) == dc.YES, "measured": measured,
            "p": p, "attainable": attainable, "powered": powered, "power": power == dc.YES,
            "failed": failed or f"stratified p {p:.3g} within 1e-6 of {alpha}", "strata": counts,
            "rare": (rare_k, rare_n),
            "null": "one head, stratum by stratum of the sharpness at the equilibrium (one-sided exact stratified "
                    "test, the conditional Cochran-Mantel-Haenszel)"}


def c23_verdict(results: list[dict], claim: str) -> dict | None:
    """C2 or C3 (paper.md section 4d, revision 5): the uniform-attention positive control matches the analytic
    rate (C2) or angle (C3) to 1e-9, and at every sharpness of the sweep at least 95% of the weight seeds reach
    consensus on v_1 (C2) or the leading plane (C3) from clustered starts. None without the records."""
    control = next((r for r in results if record_id(r) == f"{claim}.control"), None)
    sweep = [r for r in results if record_id(r) == f"{claim}.sweep"]
    if control is None or not sweep:
        return None
    weakest = min(sweep, key=lambda r: r["measured"])
    shares = "; ".join(f"|score| {r['detail']['sharpness']:g}: {r['measured']:.0%} of {r['detail']['seeds']}"
                       for r in sweep)
    rel = abs(control["measured"] / control["predicted"] - 1) if control["predicted"] else float("nan")
    ok = bool(control["passed"]) and all(r["passed"] for r in sweep)
    return {"ok": ok, "shares": shares, "weakest": weakest["measured"], "control_rel_error": rel,
            "control": control, "sweep": sweep}

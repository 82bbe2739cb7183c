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


def block(detail: dict) -> tuple[int, int]:
    """A C4 cell's weight draw: (size d, seed). Cells of one block share their weights' draw, so they are not
    independent of each other (paper.md section 4e)."""
    return int(detail["d"]), int(detail["seed"])


def stratum(detail: dict) -> str:
    """C4's stratum of a cell (paper.md section 4e, revision 6): the configured sharpness crossed with the
    (size, seed) block. Never the sharpness measured at the equilibrium: the number of heads moves that."""
    d, seed = block(detail)
    return f"sharpness {detail['sharpness']:g}, d {d}, seed {seed}"


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


#: C4's "rare": the block bootstrap's draws and quantile (a seeded stream; the bound's own Monte Carlo error is
#: decided by its order-statistic interval, so no verdict rests on it)
RARE_DRAWS, RARE_QUANTILE = 20_000, 0.95


def rare_bound(k: np.ndarray, n: np.ndarray, seed: int = 0) -> tuple[float, float, tuple[float, float]]:
    """The pooled share sum k / sum n of random starts ending bipartite and its one-sided 95% upper bound from a
    bootstrap over the blocks (``k``, ``n`` per (size, seed) block): (share, bound, the bound's 99% interval from
    the order statistics of :data:`RARE_DRAWS` resamples)."""
    from scipy.stats import binom

    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    if not len(k) or n.sum() == 0:
        return float("nan"), float("nan"), (float("nan"), float("nan"))
    rng = np.random.default_rng([seed, 4, 95])
    idx = rng.integers(0, len(k), (RARE_DRAWS, len(k)))
    tot = n[idx].sum(1)
    shares = np.sort(np.where(tot > 0, k[idx].sum(1) / np.maximum(tot, 1), 0.0))
    lo_i, hi_i = (int(binom.ppf(q, RARE_DRAWS, RARE_QUANTILE)) for q in (0.005, 0.995))
    at = lambda i: float(shares[min(max(i, 0), RARE_DRAWS - 1)])  # noqa: E731
    return float(k.sum() / n.sum()), float(np.quantile(shares, RARE_QUANTILE)), (at(lo_i - 1), at(hi_i))


def _tables(found: list[dict], key) -> dict:
    """Per ``key(detail)`` (a stratum or a block): [unstable with several heads, cells with several heads,
    unstable with one head, cells with one head] over the equilibria found."""
    out: dict = {}
    for r in found:
        det = r["detail"]
        c = out.setdefault(key(det), [0, 0, 0, 0])
        c[0 if det["heads"] > 1 else 2] += det["stability"] == UNSTABLE
        c[1 if det["heads"] > 1 else 3] += 1
    return out


def _starts(cells: list[dict], many: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per (size, seed) block, with several heads (``many``) or one: random starts ending bipartite, and all."""
    out: dict = {}
    for r in cells:
        if (r["detail"]["heads"] > 1) == many:
            c = out.setdefault(block(r["detail"]), [0, 0])
            c[0] += r["detail"].get("random_starts_bipartite", 0)
            c[1] += r["detail"].get("random_starts", 0)
    return np.array([c[0] for c in out.values()]), np.array([c[1] for c in out.values()])


def c4_verdict(results: list[dict], alpha: float, rare_share: float) -> dict | None:
    """C4's verdict from the sweep's records (paper.md sections 4d and 4e, revision 6), the one place
    table_theory and table_claims take it from. (i) Unstable more often with several heads than with one: every
    equilibrium found falls in its stratum (:func:`stratum`: configured sharpness x (size, seed) block), the
    one-sided exact conditional test over the strata (:func:`stratified_exact`) with its attainable p, and a sign
    test over the blocks beside it; the positive control must be unstable. (ii) "Rare": with several heads, the
    pooled share of random starts ending in two antipodal groups has a block-bootstrap 95% upper bound below
    ``rare_share`` (config ``claims.C4_rare_share``). C4 holds when both do. A p within 1e-6 (relative) of alpha,
    or a bound whose own Monte Carlo interval straddles the share, is inconclusive. None without a sweep."""
    from powerlens.analysis import decisions as dc
    from powerlens.analysis.stats import sign_test

    cells = [r for r in results if record_id(r) == "C4.cell"]
    pos = next((r for r in results if record_id(r) == "C4.positive_control"), None)
    if not cells:
        return None
    found = [r for r in cells if r["detail"]["equilibrium_found"]]
    counts, blocks = _tables(found, stratum), _tables(found, block)
    p, attainable, odds = stratified_exact([tuple(c) for c in counts.values()])
    diff = [np.sign(a / n1 - b / n0) for a, n1, b, n0 in blocks.values() if n1 and n0]
    up, down = int(sum(x > 0 for x in diff)), int(sum(x < 0 for x in diff))
    p_sign = sign_test(up, up + down)
    sig = dc.compare(p, alpha, above=False)
    power = dc.YES if pos is not None and pos["passed"] else dc.NO
    powered = attainable < alpha
    none = len(cells) - len(found)
    ks, ns = _starts(cells, many=True)
    share, bound, (b_lo, b_hi) = rare_bound(ks, ns)
    rare = (dc.NO if not np.isfinite(bound) else dc.YES if b_hi < rare_share else
            dc.NO if b_lo >= rare_share else dc.UNDECIDED)
    one_k, one_n = (int(x.sum()) for x in _starts(cells, many=False))
    checks = [r["detail"]["check"] for r in found]
    measured = (f"(i) unstable equilibria, several heads {sum(c[0] for c in counts.values())} of "
                f"{sum(c[1] for c in counts.values())}, one head {sum(c[2] for c in counts.values())} of "
                f"{sum(c[3] for c in counts.values())}, over {len(counts)} strata (configured sharpness x (size, "
                f"seed) block): exact conditional one-sided p {p:.3g}, Mantel-Haenszel odds ratio {odds:.3g}, "
                f"attainable p {attainable:.3g}; sign test over {len(blocks)} blocks: several heads more often "
                f"unstable in {up}, less in {down} (one-sided p {p_sign:.3g}); {len(found)} of {len(cells)} "
                f"cell-seeds with an equilibrium ({none} without, residual >= {sci(RESIDUAL)}); (ii) rare: with "
                f"several heads {int(ks.sum())} of {int(ns.sum())} random starts end in two antipodal groups "
                f"({share:.3g}; block-bootstrap 95% upper bound {bound:.3g}, its 99% Monte Carlo interval "
                f"{b_lo:.3g} to {b_hi:.3g}; must stay below {rare_share:g}); one head {one_k} of {one_n}; "
                f"perturbation check: {checks.count('agrees')} agree, {checks.count('disagrees')} disagree, "
                f"{checks.count('too slow to see')} too slow to see")
    measured += (f"; positive control: spectral radius {pos['measured']:.4g} ({pos['detail']['stability']}), broke "
                 f"{pos['detail']['broke']}/{pos['detail']['runs']}" if pos else "; no positive control")
    state = dc.both(sig, power, rare)
    failed = [x for x, bad in ((f"(i) stratified p {p:.3g} >= {alpha}", sig == dc.NO),
                               ("positive control not unstable (no power)", power == dc.NO),
                               (f"(ii) not rare: the share's 95% upper bound {bound:.3g} >= {rare_share:g}",
                                rare == dc.NO)) if bad]
    undecided = [x for x, st in ((f"(i) stratified p {p:.3g} within 1e-6 of {alpha}", sig),
                                 (f"(ii) the bound's Monte Carlo interval {b_lo:.3g} to {b_hi:.3g} straddles "
                                  f"{rare_share:g}", rare)) if st == dc.UNDECIDED]
    return {"state": state, "ok": state == dc.YES, "measured": measured,
            "p": p, "attainable": attainable, "powered": powered, "power": power == dc.YES,
            "failed": failed if state == dc.NO else undecided, "strata": counts, "p_sign": p_sign,
            "rare": (int(ks.sum()), int(ns.sum())), "rare_bound": bound,
            "null": "one head, stratum by stratum of the configured sharpness x (size, seed) block (one-sided exact "
                    "conditional test); the rare clause against its bound"}


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

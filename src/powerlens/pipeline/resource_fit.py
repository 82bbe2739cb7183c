"""The fit behind ``workflow/resources.yaml``: per rule, a non-negative line of peak memory and wall time in the
job's size terms (:mod:`powerlens.pipeline.resources`), refitted from benchmark files by
``scripts/fit_resources.py``."""

from __future__ import annotations

from powerlens.pipeline.resources import RULES


def fit_line(x: list[float], y: list[float]) -> tuple[float, float]:
    """Non-negative least squares y ~ a + b x in relative error (each row divided by its y, so a 10 s job
    and a 1000 s job weigh the same); both coefficients >= 0; x scaled for conditioning."""
    import numpy as np
    from scipy.optimize import nnls

    x, y = np.asarray(x, float), np.asarray(y, float)
    scale = float(np.max(np.abs(x))) or 1.0
    A = np.column_stack([np.ones_like(x), x / scale]) / y[:, None]
    (a, b), _ = nnls(A, np.ones_like(y))
    a += max(0.0, float(np.max(y - (a + b * x / scale))))  # intercept raised to cover every measured job
    return float(a), float(b / scale)


def fit(rows: list[dict]) -> dict:
    """Per rule: fitted (a, b) for memory (MB vs params) and time (s vs the rule's time term).

    ``rows`` need keys rule, mem_term, time_term, max_rss_mb, s.
    """
    out = {}
    for rule in RULES:
        rs = [r for r in rows if r["rule"] == rule]
        if not rs:
            continue
        ma, mb = fit_line([r["mem_term"] for r in rs], [r["max_rss_mb"] for r in rs])
        ta, tb = fit_line([r["time_term"] for r in rs], [r["s"] for r in rs])
        out[rule] = {"n": len(rs), "mem_mb": {"a": ma, "b": mb}, "runtime_s": {"a": ta, "b": tb},
                     "params_range": [min(r["params"] for r in rs), max(r["params"] for r in rs)]}
    return out

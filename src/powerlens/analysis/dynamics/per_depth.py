"""The per-depth table of one run's sums: gamma_t, rho_t and the tilt for every named direction (values: their
tests against the nulls are :mod:`powerlens.analysis.dynamics.decided`'s), secondary token- and prompt-level
tests, consensus and rotation, the L2 law's diagnostics, and the consensus subspace's test at the final step."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from powerlens.analysis.spectra import leading_type

if TYPE_CHECKING:
    import pandas as pd

from powerlens.analysis.dynamics.directions import NAMED, LayerDirections
from powerlens.analysis.nulls import SATURATED_TIES, random_direction_test, tie_uniform
from powerlens.analysis.verdict_tests import Field, Sums

#: The final step's consensus test (C5): its fields, in the table's order
_FINAL_FIELDS = (Field.NULL_MEDIAN, Field.NULL_Q95, Field.PCT, Field.P, Field.TIES)


def layer_stats(arr: dict[str, np.ndarray], dirs: list[LayerDirections], seed: int = 0) -> "pd.DataFrame":
    """Per-depth values: gamma_t, rho_t and the tilt against every named direction (F's lead, M = I + F's,
    F~'s, the non-leading eigenvector); secondary token- and prompt-level tests (named as such, never a verdict's
    basis); consensus and rotation measures; L2-law diagnostics (attention-only); at the last step the consensus
    subspace's alignment against its Monte Carlo null (its p with the seeded tie-break of ``seed``)."""
    import pandas as pd

    col = _sums(arr)
    S = arr["prompt_n"].shape[0]
    rows = []
    for i, t in enumerate(arr["depth"]):
        u = int(arr["unique_layer"][i])
        n = col("n", i)
        row = {"layer": int(t), "unique_layer": u, Sums.LEADING_TYPE: leading_type(dirs[u].lam1),
               Sums.LEADING_TYPE_M: leading_type(dirs[u].mu1), "null_eig_index": dirs[u].null_eig_index,
               Sums.N_TOKENS: int(n)}
        for name in NAMED:
            _direction_columns(row, arr, col, i, S, name, n)
        _geometry_columns(row, arr, col, i, n, dirs[u])
        if i == len(arr["depth"]) - 1:
            null = arr["null_out_span_M_final"] / n
            v = row[Sums.SPAN_M]
            m = random_direction_test(v, null, tie_uniform(seed, int(t), Sums.SPAN_M_FINAL))
            row[Sums.SPAN_M_FINAL] = v
            row.update({Sums.span_m_final(f): np.nan if np.isnan(v) else m[f] for f in _FINAL_FIELDS})
            row[Sums.SPAN_M_FINAL_SATURATED] = bool(not np.isnan(v) and m[Field.TIES] >= SATURATED_TIES)
            row[Sums.SPAN_M_FINAL_Q99] = float(np.quantile(null, 0.99))
        rows.append(row)
    return pd.DataFrame(rows)


def lead_nulls(arr: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    """The same statistics of the Accumulator's random draws at depth index i (a run with ``leads=("lead",)``:
    the bias-free control)."""
    n = float(arr["sum_n"][i])
    ninc, ndec = arr["null_inc_lead"][i], arr["null_dec_lead"][i]
    return {"gamma": arr["null_out_lead"][i] / n,
            "rho": np.where(ninc + ndec > 0, ninc / np.maximum(ninc + ndec, 1), np.nan),
            "tilt": arr["null_tilt_lead"][i] / n}


def _sums(arr: dict[str, np.ndarray]):
    """col(q, i): the per-depth sum ``sum_<q>`` at depth index i (NaN where the run did not keep it)."""

    def col(q: str, i: int) -> float:
        k = "sum_" + q.replace(":", "_")
        return float(arr[k][i]) if k in arr else float("nan")

    return col


def _direction_columns(row: dict, arr, col, i: int, S: int, name: str, n: float) -> None:
    """gamma, rho and the tilt against one direction (``NAMED``); for F's lead also the secondary token- and
    prompt-level tests."""
    inc, dec = col(f"{name}:inc", i), col(f"{name}:dec", i)
    row[Sums.of("gamma", name)] = col(f"{name}:out", i) / n
    row[Sums.of("rho", name)] = inc / (inc + dec) if inc + dec else float("nan")
    row[Sums.of("tilt", name)] = col(f"{name}:tilt", i) / n
    if name == "lead":
        _secondary_tests(row, arr, i, S, inc, dec)


def _secondary_tests(row: dict, arr, i: int, S: int, inc: float, dec: float) -> None:
    """Token- and prompt-level sign tests and the prompt-level Wilcoxon test of the tilt (secondary columns:
    tokens and prompts are not independent units)."""
    from scipy.stats import wilcoxon

    from powerlens.analysis.stats import sign_test

    row[Sums.RHO_TOKEN_SIGN] = sign_test(int(inc), int(inc + dec)) if i < S else float("nan")
    if i < S:
        pi, pd_, pt, pn = (arr[f"prompt_{q}"][i] for q in ("inc", "dec", "tilt", "n"))
        ok = (pi + pd_) > 0
        rp = pi[ok] / (pi[ok] + pd_[ok])
        above, below = int(np.sum(rp > 0.5)), int(np.sum(rp < 0.5))
        row[Sums.N_PROMPTS] = int(np.sum(pn > 0))
        row[Sums.RHO_PROMPT_SIGN] = sign_test(above, above + below)
        tilt_p = pt[pn > 0] / pn[pn > 0]
        row[Sums.TILT_PROMPT_WILCOXON] = (float(wilcoxon(tilt_p, alternative="greater").pvalue)
                                         if np.any(tilt_p != 0) and len(tilt_p) > 1 else float("nan"))


def _geometry_columns(row: dict, arr, col, i: int, n: float, d: LayerDirections) -> None:
    """Consensus (span alignments, pairwise cosines), rotation in its plane against the eigenvalue's argument,
    and the L2 law's diagnostics (attention-only runs)."""
    row[Sums.SPAN12] = col("span12:out", i) / n
    row[Sums.SPAN_M] = col("span_M:out", i) / n
    row[Sums.SPAN_M_DIM] = int(d.span_M.shape[1])
    pn_ = col("pair_n", i)
    row[Sums.PAIRWISE_COS] = col("pair_sum", i) / pn_ if pn_ > 0 else float("nan")  # not defined for 1 token
    row[Sums.PAIRWISE_ABS_COS] = col("pair_abs_sum", i) / pn_ if pn_ > 0 else float("nan")
    row[Sums.MEAN_DTHETA] = col("dtheta", i) / n
    row[Sums.ROTATION_PLANE] = ("I+F leading pair" if leading_type(d.mu1 - 1) == "complex pair" else
                                "F leading pair" if row[Sums.LEADING_TYPE] == "complex pair" else "span(v1, v2)")
    row[Sums.ARG_LAMBDA1] = float(np.angle(d.lam1))
    row[Sums.ARG_MU1] = float(np.angle(d.mu1))
    # rotation per step predicted in the plane mean_dtheta is measured in: the argument of the eigenvalue
    # of I + F that owns the plane (none for span(v1, v2) of a real lead)
    row[Sums.PREDICTED_DTHETA] = {"I+F leading pair": row[Sums.ARG_MU1],
                                  "F leading pair": float(np.angle(1 + d.lam1))}.get(row[Sums.ROTATION_PLANE], 0.0)
    if "sum_ent_n" in arr and i < len(arr["sum_ent_n"]) and not np.isnan(arr["sum_ent_n"][i]):
        row[Sums.ATTN_ENTROPY] = col("ent_sum", i) / max(col("ent_n", i), 1)
        row[Sums.BIAS_RATIO] = col("b_eff", i) / max(col("fx_sum", i) / max(col("fx_n", i), 1), 1e-300)

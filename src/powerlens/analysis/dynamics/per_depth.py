"""Per-depth statistics from the accumulated arrays: gamma_t, rho_t and the tilt for every lead, each
with the Monte Carlo null and Holm's correction across the depth."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from powerlens.analysis.spectra import leading_type

if TYPE_CHECKING:
    import pandas as pd

from powerlens.analysis.dynamics.directions import LEADS, NAMED, LayerDirections
from powerlens.analysis.nulls import SATURATED_TIES, mc_test, tie_uniform


def _mc_columns(prefix: str, value: float, null: np.ndarray | None, seed: int, depth: int) -> dict:
    if null is None:
        return {prefix: value}
    m = mc_test(value, null, tie_uniform(seed, depth, prefix))
    return {prefix: value, f"{prefix}_null_median": m["null_median"], f"{prefix}_null_q95": m["null_q95"],
            f"{prefix}_pct": m["pct"], f"{prefix}_p": m["p"], f"{prefix}_ties": m["ties"],
            f"{prefix}_saturated": bool(m["ties"] >= SATURATED_TIES)}


def layer_stats(arr: dict[str, np.ndarray], dirs: list[LayerDirections], suffix: str = "",
                seed: int = 0) -> "pd.DataFrame":
    """Per-depth statistics: gamma_t, rho_t and the tilt for every lead (F, M = I + F, F~), each with the Monte
    Carlo null (median, 95th percentile, the lead's percentile, p with seeded randomised tie-breaking, the
    share of draws tied with the lead and "saturated" where it is at least half, Holm across the model's depth);
    the non-leading-eigenvector null; secondary token- and prompt-level tests (named as such, never a
    verdict's basis); consensus and rotation measures; L2-law diagnostics (attention-only)."""
    import pandas as pd

    from powerlens.analysis.stats import holm

    col = _sums(arr)
    S = arr["prompt_n"].shape[0]
    rows = []
    for i, t in enumerate(arr["depth"]):
        u = int(arr["unique_layer"][i])
        n = col("n", i)
        row = {"layer": int(t), "unique_layer": u, "leading_type": leading_type(dirs[u].lam1),
               "leading_type_M": leading_type(dirs[u].mu1), "null_eig_index": dirs[u].null_eig_index,
               "n_tokens": int(n)}
        for name in NAMED:
            _direction_columns(row, arr, col, i, S, name, n, seed, int(t))
        _geometry_columns(row, arr, col, i, n, dirs[u])
        if i == len(arr["depth"]) - 1:
            row.update(_mc_columns("span_M_final", row["span_M_alignment"], arr["null_out_span_M_final"] / n, seed,
                                   int(t)))
            row["span_M_final_null_q99"] = float(np.quantile(arr["null_out_span_M_final"] / n, 0.99))
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in [c for c in df.columns if c.endswith("_p") and c.split("_")[0] in ("gamma", "rho", "tilt")]:
        stat_rows = df.index < S
        adj = np.full(len(df), np.nan)
        adj[stat_rows] = holm(df.loc[stat_rows, c].to_numpy(dtype=float))
        df[c + "_holm"] = adj
    if suffix:
        df = df.rename(columns={c: c + suffix for c in df.columns if c not in ("layer", "unique_layer")})
    return df


def _sums(arr: dict[str, np.ndarray]):
    """col(q, i): the per-depth sum ``sum_<q>`` at depth index i (NaN where the run did not keep it)."""

    def col(q: str, i: int) -> float:
        k = "sum_" + q.replace(":", "_")
        return float(arr[k][i]) if k in arr else float("nan")

    return col


def _direction_columns(row: dict, arr, col, i: int, S: int, name: str, n: float, seed: int, depth: int) -> None:
    """gamma, rho and the tilt against one direction (``NAMED``), with the Monte Carlo null for the leads;
    for F's lead also the secondary token- and prompt-level tests."""
    key = "_null_eig" if name == "null_eig" else "" if name == "lead" else f"_{name.replace('lead_', '')}"
    inc, dec = col(f"{name}:inc", i), col(f"{name}:dec", i)
    vals = {"gamma": col(f"{name}:out", i) / n, "rho": inc / (inc + dec) if inc + dec else float("nan"),
            "tilt": col(f"{name}:tilt", i) / n}
    for q, v in vals.items():
        null = None
        if name in LEADS and i < S and f"null_out_{name}" in arr:
            ninc, ndec = arr[f"null_inc_{name}"][i], arr[f"null_dec_{name}"][i]
            null = {"gamma": arr[f"null_out_{name}"][i] / n,
                    "rho": np.where(ninc + ndec > 0, ninc / np.maximum(ninc + ndec, 1), np.nan),
                    "tilt": arr[f"null_tilt_{name}"][i] / n}[q]
            if np.isnan(v):
                null = None
        row.update(_mc_columns(f"{q}{key}", v, null, seed, depth))
    if name == "lead":
        _secondary_tests(row, arr, i, S, inc, dec)


def _secondary_tests(row: dict, arr, i: int, S: int, inc: float, dec: float) -> None:
    """Token- and prompt-level sign tests and the prompt-level Wilcoxon test of the tilt (secondary columns:
    tokens and prompts are not independent units)."""
    from scipy.stats import wilcoxon

    from powerlens.analysis.stats import sign_test

    row["rho_p_token_sign"] = sign_test(int(inc), int(inc + dec)) if i < S else float("nan")
    if i < S:
        pi, pd_, pt, pn = (arr[f"prompt_{q}"][i] for q in ("inc", "dec", "tilt", "n"))
        ok = (pi + pd_) > 0
        rp = pi[ok] / (pi[ok] + pd_[ok])
        above, below = int(np.sum(rp > 0.5)), int(np.sum(rp < 0.5))
        row["n_prompts"] = int(np.sum(pn > 0))
        row["rho_p_prompt_sign"] = sign_test(above, above + below)
        tilt_p = pt[pn > 0] / pn[pn > 0]
        row["tilt_p_prompt_wilcoxon"] = (float(wilcoxon(tilt_p, alternative="greater").pvalue)
                                         if np.any(tilt_p != 0) and len(tilt_p) > 1 else float("nan"))


def _geometry_columns(row: dict, arr, col, i: int, n: float, d: LayerDirections) -> None:
    """Consensus (span alignments, pairwise cosines), rotation in its plane against the eigenvalue's argument,
    and the L2 law's diagnostics (attention-only runs)."""
    row["span12_alignment"] = col("span12:out", i) / n
    row["span_M_alignment"] = col("span_M:out", i) / n
    row["span_M_dim"] = int(d.span_M.shape[1])
    pn_ = col("pair_n", i)
    row["pairwise_cos"] = col("pair_sum", i) / pn_ if pn_ > 0 else float("nan")  # not defined for 1 token
    row["pairwise_abs_cos"] = col("pair_abs_sum", i) / pn_ if pn_ > 0 else float("nan")
    row["mean_dtheta"] = col("dtheta", i) / n
    row["rotation_plane"] = ("I+F leading pair" if leading_type(d.mu1 - 1) == "complex pair" else
                             "F leading pair" if row["leading_type"] == "complex pair" else "span(v1, v2)")
    row["arg_lambda1"] = float(np.angle(d.lam1))
    row["arg_mu1"] = float(np.angle(d.mu1))
    # rotation per step predicted in the plane mean_dtheta is measured in: the argument of the eigenvalue
    # of I + F that owns the plane (none for span(v1, v2) of a real lead)
    row["predicted_dtheta"] = {"I+F leading pair": row["arg_mu1"],
                               "F leading pair": float(np.angle(1 + d.lam1))}.get(row["rotation_plane"], 0.0)
    if "sum_ent_n" in arr and i < len(arr["sum_ent_n"]) and not np.isnan(arr["sum_ent_n"][i]):
        row["attn_entropy_rel"] = col("ent_sum", i) / max(col("ent_n", i), 1)
        row["bias_ratio"] = col("b_eff", i) / max(col("fx_sum", i) / max(col("fx_n", i), 1), 1e-300)

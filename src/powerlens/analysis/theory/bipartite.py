"""Claim C4: the bipartite state, its multi-head equilibrium, breaking runs, the sweep over sizes, head
counts and sharpness with its positive control, and the verdict from Fisher tests."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from powerlens.analysis.theory import linearise as lin
from powerlens.analysis.theory.synthetic import (
    Result,
    leading_pair,
    prescribed_matrix,
    step_matrix,
    synthetic_layer,
)
from powerlens.core.fmt import sci
from powerlens.models.attention import attention_only_step, attention_output, visible_keys
from powerlens.models.weights import LayerWeights


def bipartite_state(v: np.ndarray, n_tokens: int) -> np.ndarray:
    signs = np.where(np.arange(n_tokens) % 2 == 0, 1.0, -1.0)
    return signs[:, None] * (v / np.linalg.norm(v))[None, :]


STALL_STEPS, STALL_MOVED = 300, 1e-6  # a plain iteration still moving this much by then is cycling: Newton takes over


def bipartite_equilibrium(X0: np.ndarray, lw: LayerWeights, n_heads: int, residual: bool, max_steps: int = 800,
                          causal: bool = False) -> dict:
    """The bipartite equilibrium reached from the bipartite state X0 (tokens s_i w, s_i = +-1, equal groups).

    The exact law keeps a bipartite state bipartite (the two groups see mirror-image attention), so the plain
    iteration runs on w alone (one law step, then w <- the sign-weighted mean of the tokens; a swap of the
    groups, w -> -w, is the same state) until it moves by less than 1e-10, stalls (still moving by 1e-6 after
    300 steps) or reaches ``max_steps``; then Newton refines it to a fixed point (:func:`linearise.refine`), so
    that the step budget only sets where Newton starts, never whether an equilibrium is found. Returns a dict:
    X (the state), sigma, residual (one full law step, max abs), steps (plain iteration), newton (its
    iterations), found (residual < :data:`linearise.RESIDUAL`)."""
    step = lin.law_step(lw, n_heads, residual, causal)
    signs = np.sign(X0 @ X0[0])
    w = X0[0] / np.linalg.norm(X0[0])
    s = torch.as_tensor(signs, dtype=torch.float64)
    k = 0
    with torch.no_grad():
        for k in range(1, max_steps + 1):
            Y = step(s[:, None] * torch.as_tensor(w)[None, :]).numpy()
            w_new = (signs[:, None] * Y).mean(axis=0)
            w_new /= np.linalg.norm(w_new)
            w_new *= 1.0 if w_new @ w >= 0 else -1.0  # a swap of the two groups is the same state
            moved = float(np.abs(w_new - w).max())
            w = w_new
            if moved < 1e-10 or (k == STALL_STEPS and moved > STALL_MOVED):
                break
    w, sigma, res, it = lin.refine(w, signs, step)
    return {"X": signs[:, None] * w[None, :], "sigma": sigma, "residual": res, "steps": k, "newton": it,
            "found": bool(res < lin.RESIDUAL)}


def antipodal(X: np.ndarray, signs: np.ndarray, tol: float = 1e-3) -> np.ndarray:
    """Per step (X: (steps, n, d)): are the two groups still antipodal? Every token of the '+' group has
    cos > 1 - tol with the '+' group's mean direction w, every token of the '-' group cos < -(1 - tol)."""
    Xn = X / np.linalg.norm(X, axis=-1, keepdims=True)
    w = Xn[:, signs > 0].mean(axis=1)  # (steps, d)
    w = w / np.linalg.norm(w, axis=-1, keepdims=True).clip(1e-300)
    c = np.einsum("snd,sd->sn", Xn, w) * signs[None, :]  # (steps, n): signed cosines
    return (c > 1 - tol).all(axis=1)


def typical_score(X: np.ndarray, lw: LayerWeights, n_heads: int) -> float:
    """Mean |s <q_i, k_j>| over heads and token pairs of the state X (n, d): how sharp attention is there
    (about 0.1: near uniform, every bipartite state near neutral; about 10: near hard attention)."""
    x = torch.as_tensor(X / np.linalg.norm(X, axis=-1, keepdims=True), dtype=torch.float64)
    n, d = x.shape
    dh = d // n_heads
    q = (x @ lw.W_Q.T).view(n, n_heads, dh).transpose(0, 1)  # (H, n, dh)
    k = (x @ lw.W_K.T).view(n, n_heads, dh).transpose(0, 1)
    return float((lw.attn_scale * (q @ k.transpose(1, 2))).abs().mean())


def broken_runs(X0s: np.ndarray, lw: LayerWeights, n_heads: int, steps: int, residual: bool, signs: np.ndarray,
                tol: float, causal: bool = False) -> np.ndarray:
    """All perturbed runs at once (X0s: (R, n, d)); per run, whether its two groups stopped being antipodal
    (|cos| with the '+' group's mean below 1 - tol) at some step within ``steps``: (R,) bool."""
    x = torch.as_tensor(X0s, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    mask = torch.ones(x.shape[0], x.shape[1], dtype=torch.long)
    broke = np.zeros(x.shape[0], dtype=bool)
    for _ in range(steps):
        if residual:
            x = attention_only_step(x, lw, n_heads, causal, mask, "l2")
        else:
            y = attention_output(x, lw, n_heads, visible_keys(x.shape[1], causal, lw.window, mask))
            x = y / y.norm(dim=-1, keepdim=True)
        xn = x.numpy()
        w = xn[:, signs > 0].mean(axis=1)  # (R, d)
        w = w / np.linalg.norm(w, axis=-1, keepdims=True).clip(1e-300)
        c = np.einsum("rnd,rd->rn", xn, w) * signs[None, :]
        broke |= ~(c > 1 - tol).all(axis=1)
    return broke


def experiment_c4_sweep(sizes: list[int], heads_list: list[int], sharpness: list[float], n_tokens: int, steps: int,
                        seed: int, runs: int, epsilon: float, residual: bool, tol: float = 1e-3,
                        max_eq_steps: int = 800) -> tuple[list[Result], dict]:
    """C4 over a sweep: per size d, head count H and target sharpness s (the typical |score| of the bipartite
    start, set through the q.k scale: scores scale as its square), the multi-head bipartite equilibrium refined
    by Newton (:func:`bipartite_equilibrium`), its stability from the spectral radius of one law step's
    Jacobian (:mod:`powerlens.analysis.theory.linearise`), and as a check ``runs`` perturbed starts (epsilon)
    with an epsilon = 0 control: a run breaks when its groups stop being antipodal within ``steps`` steps.
    Every cell with an equilibrium is tested unless its attention there is uniform (degenerate).

    Positive control (a setting known to be unstable): attention on the token itself only, where the law is
    the power method token by token, x <- N(M x), and the bipartite state on +-v_2 of M is an exact equilibrium
    with spectral radius |mu_1 / mu_2| > 1 (every perturbation with a v_1 component grows)."""
    shape = (len(sizes), len(heads_list), len(sharpness))
    arrays = {k: np.full(shape, np.nan) for k in ("sweep_rate", "sweep_rate_all", "sweep_score", "sweep_radius")}
    signs = np.where(np.arange(n_tokens) % 2 == 0, 1.0, -1.0)
    results = []
    for di, d in enumerate(sizes):
        rng = np.random.default_rng([seed, 3, d])
        F = prescribed_matrix(d, [3.0], rest_radius=-0.1, rng=rng, rest_min=-0.9)
        vals, V = leading_pair(step_matrix(F, residual))
        X0 = bipartite_state(V[:, 0].real, n_tokens)
        for hi, H in enumerate(heads_list):
            if d % H:
                continue
            base = synthetic_layer(F, H, np.random.default_rng([seed, 3, d, H]), "softmax", qk_scale=1.0)
            for si, s in enumerate(sharpness):
                r = _c4_cell(X0, base, H, s, signs, d=d, si=si, seed=seed, steps=steps, runs=runs, epsilon=epsilon,
                             residual=residual, tol=tol, max_eq_steps=max_eq_steps)
                arrays["sweep_score"][di, hi, si] = r.detail["score_at_equilibrium"]
                arrays["sweep_rate"][di, hi, si] = r.detail["break_rate"] if r.passed else np.nan
                arrays["sweep_rate_all"][di, hi, si] = r.detail["break_rate"]
                arrays["sweep_radius"][di, hi, si] = r.measured
                results.append(r)
    control = _c4_positive_control(sizes[0], n_tokens, signs, seed=seed, steps=steps, runs=runs, epsilon=epsilon,
                                   residual=residual, tol=tol)
    results.append(control)
    arrays.update({"sweep_sizes": np.array(sizes), "sweep_heads": np.array(heads_list),
                   "sweep_sharpness": np.array(sharpness, dtype=float),
                   "positive_control_rate": np.array(control.detail["break_rate"]),
                   "positive_control_radius": np.array(control.measured), "epsilon": np.array(epsilon)})
    return results, arrays


def _perturbed(X: np.ndarray, lw: LayerWeights, H: int, signs, *, prng, steps: int, runs: int, epsilon: float,
               residual: bool, tol: float, causal: bool = False) -> tuple[int, bool]:
    """The perturbation check: (runs that broke, whether the epsilon = 0 control stays)."""
    stays = not broken_runs(X[None], lw, H, steps, residual, signs, tol, causal=causal)[0]
    broke = int(broken_runs(X[None] + epsilon * prng.standard_normal((runs, *X.shape)), lw, H, steps, residual,
                            signs, tol, causal=causal).sum())
    return broke, stays


def _classified(eq: dict, lw: LayerWeights, H: int, causal: bool, residual: bool) -> dict:
    """Degeneracy, spectral radius and stability of a found equilibrium (dashes where there is none)."""
    out = {"max_score_at_equilibrium": lin.max_score(eq["X"], lw, H), "spectral_radius": float("nan"),
           "stability": "-", "degenerate": False}
    # uniform attention at the refined point: heads cannot matter there, found or not (rounding decides the
    # residual of such a state, never its class)
    out["degenerate"] = bool(out["max_score_at_equilibrium"] < lin.UNIFORM_SCORE)
    if out["degenerate"]:
        out["stability"] = "degenerate"  # never tested; its residual is rounding's, not a class
        return out
    if not eq["found"]:
        return out
    rho = lin.spectral_radius(eq["X"], eq["sigma"], lin.law_step(lw, H, residual, causal))
    out.update({"spectral_radius": rho, "stability": lin.classify(rho)})
    return out


def _c4_cell(X0: np.ndarray, base: LayerWeights, H: int, s: float, signs: np.ndarray, *, d: int, si: int,
             seed: int, steps: int, runs: int, epsilon: float, residual: bool, tol: float,
             max_eq_steps: int) -> "Result":
    """One cell of the C4 sweep: the layer's q.k scaled to sharpness s, its Newton-refined bipartite
    equilibrium, the Jacobian's spectral radius there, and the perturbation check."""
    qk = math.sqrt(s / typical_score(X0, base, H))  # W_Q, W_K scaled by qk: every score by qk^2
    lw = dataclasses.replace(base, W_Q=base.W_Q * qk, W_K=base.W_K * qk)
    eq = bipartite_equilibrium(X0, lw, H, residual, max_steps=max_eq_steps)
    cls = _classified(eq, lw, H, False, residual)
    broke, stays = _perturbed(eq["X"], lw, H, signs, prng=np.random.default_rng([seed, 30, d, H, si]), steps=steps,
                              runs=runs, epsilon=epsilon, residual=residual, tol=tol)
    tested = eq["found"] and not cls["degenerate"]
    check = (lin.check_agrees(cls["stability"], cls["spectral_radius"], broke, runs, epsilon=epsilon, d=d,
                              steps=steps, tol=tol) if tested else "-")
    return Result(
        id="C4.cell", case="c: bipartite", attention="softmax",
        quantity=f"spectral radius (d {d}, {H} head{'s' if H > 1 else ''}, |score| {s:g})",
        predicted=float("nan"), measured=cls["spectral_radius"],
        criterion=f"Newton-refined equilibrium (one law step moves it by < {sci(lin.RESIDUAL)}); unstable if the "
        f"spectral radius of one step's Jacobian (tangent space) > 1 + {sci(lin.RADIUS_TOL)}, stable < 1 - "
        f"{sci(lin.RADIUS_TOL)}; degenerate (not tested) if max |score| < {sci(lin.UNIFORM_SCORE)}; check: groups no "
        f"longer antipodal (|cos| < 1 - {sci(tol)}) within {steps} steps", passed=bool(tested),
        detail={"d": d, "heads": H, "sharpness": s, "score_at_equilibrium": typical_score(eq["X"], lw, H),
                "qk_scale": qk, "runs": runs, "broke": broke, "break_rate": broke / runs,
                "fixed_point_residual": eq["residual"], "equilibrium_found": eq["found"],
                "equilibrium_steps": eq["steps"], "newton_iterations": eq["newton"], "swap": eq["sigma"] < 0,
                "control_stays": stays, "epsilon": epsilon, "check": check, "sweep": True, **cls})


def _c4_positive_control(d: int, n_tokens: int, signs: np.ndarray, *, seed: int, steps: int, runs: int,
                         epsilon: float, residual: bool, tol: float) -> "Result":
    """Self-only attention (window 1, causal), bipartite on +-v_2 of M: an equilibrium known to be unstable
    (spectral radius |mu_1 / mu_2|), classified by the same linearisation; the perturbation runs must break."""
    rng = np.random.default_rng([seed, 3, d])
    F = prescribed_matrix(d, [3.0], rest_radius=-0.1, rng=rng, rest_min=-0.9)
    vals, V = leading_pair(step_matrix(F, residual))
    lw = dataclasses.replace(synthetic_layer(F, 1, np.random.default_rng([seed, 3, d, 0]), "full"), window=1)
    Xc = bipartite_state(V[:, 1].real, n_tokens)
    step = lin.law_step(lw, 1, residual, causal=True)
    sigma = 1.0 if float(step(torch.as_tensor(Xc))[0].numpy() @ Xc[0]) >= 0 else -1.0
    res = lin.full_residual(step, Xc, sigma)
    rho = lin.spectral_radius(Xc, sigma, step)
    broke, stays = _perturbed(Xc, lw, 1, signs, prng=np.random.default_rng([seed, 31]), steps=steps, runs=runs,
                              epsilon=epsilon, residual=residual, tol=tol, causal=True)
    stability = lin.classify(rho)
    return Result(
        id="C4.positive_control", case="c: bipartite, positive control", attention="self only",
        quantity="spectral radius (known unstable: +-v_2, x <- N(M x))", predicted=float(abs(vals[0] / vals[1])),
        measured=rho, criterion="the linearisation classifies a known unstable equilibrium as unstable (spectral "
        "radius |mu_1 / mu_2|), and the perturbation runs break (>= 90%) while the epsilon = 0 control stays",
        passed=bool(stability == lin.UNSTABLE and broke / runs >= 0.9 and stays and res < lin.RESIDUAL),
        detail={"d": d, "heads": 1, "runs": runs, "broke": broke, "break_rate": broke / runs, "control_stays": stays,
                "epsilon": epsilon, "stability": stability, "spectral_radius": rho, "fixed_point_residual": res,
                "mu2_over_mu1": float(abs(vals[1]) / abs(vals[0]))})

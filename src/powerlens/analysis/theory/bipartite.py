"""Claim C4 (paper.md section 4d, revision 5): the bipartite state, its multi-head equilibrium followed by
Newton continuation along the attention sharpness, its stability by linearisation, the perturbation check, how
often random starts end bipartite ("rare"), over a sweep of sizes, head counts, sharpness and weight seeds, with
a positive control."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from powerlens.analysis.theory import linearise as lin
from powerlens.analysis.theory.synthetic import (
    BIPARTITE_ELSEWHERE,
    BIPARTITE_V1,
    Result,
    ending,
    leading_pair,
    prescribed_matrix,
    sharpened,
    step_matrix,
    synthetic_layer,
    typical_score,
)
from powerlens.core.fmt import sci
from powerlens.models.attention import attention_only_step, attention_output, visible_keys
from powerlens.models.weights import LayerWeights


def bipartite_state(v: np.ndarray, n_tokens: int) -> np.ndarray:
    signs = np.where(np.arange(n_tokens) % 2 == 0, 1.0, -1.0)
    return signs[:, None] * (v / np.linalg.norm(v))[None, :]


def plain_iteration(X0: np.ndarray, lw: LayerWeights, n_heads: int, residual: bool, max_steps: int,
                    causal: bool = False) -> np.ndarray:
    """The plain law iterated from the bipartite state X0 (tokens s_i w) on w alone (the exact law keeps a
    bipartite state bipartite; w -> -w, a swap of the groups, is the same state), ``max_steps`` steps or until it
    moves by less than 1e-10: the unit vector w it ends at. Only a check of the equilibrium Newton finds (a stable
    one attracts it, an unstable one repels it): the budget never decides an equilibrium or its class."""
    step = lin.law_step(lw, n_heads, residual, causal)
    signs = np.sign(X0 @ X0[0])
    w = X0[0] / np.linalg.norm(X0[0])
    s = torch.as_tensor(signs, dtype=torch.float64)
    with torch.no_grad():
        for _ in range(max_steps):
            Y = step(s[:, None] * torch.as_tensor(w)[None, :]).numpy()
            w_new = (signs[:, None] * Y).mean(axis=0)
            w_new /= np.linalg.norm(w_new)
            w_new *= 1.0 if w_new @ w >= 0 else -1.0
            moved = float(np.abs(w_new - w).max())
            w = w_new
            if moved < 1e-10:
                break
    return w


def newton_equilibrium(w0: np.ndarray, signs: np.ndarray, lw: LayerWeights, n_heads: int, residual: bool,
                       causal: bool = False) -> dict:
    """The bipartite fixed point Newton reaches from the unit vector w0. The swap sign (sigma = +1: the groups
    stay; -1: they swap each step) is chosen after the refinement: first the sign of g(w0) . w0, and if Newton
    finds no equilibrium with it (residual >= :data:`linearise.RESIDUAL`), the other one; of two failures the
    smaller residual. No step budget enters. Returns X, w, sigma, residual, newton (iterations), found."""
    step = lin.law_step(lw, n_heads, residual, causal)
    w, sigma, res, it = lin.refine(w0, signs, step)
    if not res < lin.RESIDUAL:
        w2, sigma2, res2, it2 = lin.refine(w0, signs, step, sigma=-sigma)
        if res2 < res:
            w, sigma, res, it = w2, sigma2, res2, it2
    return {"X": signs[:, None] * w[None, :], "w": w, "sigma": sigma, "residual": res, "newton": it,
            "found": bool(res < lin.RESIDUAL)}


def antipodal(X: np.ndarray, signs: np.ndarray, tol: float = 1e-3) -> np.ndarray:
    """Per step (X: (steps, n, d)): are the two groups still antipodal? Every token of the '+' group has
    cos > 1 - tol with the '+' group's mean direction w, every token of the '-' group cos < -(1 - tol)."""
    Xn = X / np.linalg.norm(X, axis=-1, keepdims=True)
    w = Xn[:, signs > 0].mean(axis=1)  # (steps, d)
    w = w / np.linalg.norm(w, axis=-1, keepdims=True).clip(1e-300)
    c = np.einsum("snd,sd->sn", Xn, w) * signs[None, :]  # (steps, n): signed cosines
    return (c > 1 - tol).all(axis=1)


def broken_runs(X0s: np.ndarray, lw: LayerWeights, n_heads: int, steps: int, residual: bool, signs: np.ndarray,
                tol: float, causal: bool = False) -> np.ndarray:
    """All perturbed runs at once (X0s: (R, n, d)); per run, whether its two groups stopped being antipodal
    (|cos| with the '+' group's mean below 1 - tol) at some step within ``steps``: (R,) bool. Stops at the step
    where every run has broken (the answer is then final)."""
    x = torch.as_tensor(X0s, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    mask = None  # no padding (the kept all-visible mask: no masking per step)
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
        if broke.all():  # a run that broke stays broken: no later step can change the answer
            break
    return broke


def experiment_c4_sweep(sizes: list[int], heads_list: list[int], sharpness: list[float], n_tokens: int, steps: int,
                        seed: int, runs: int, epsilon: float, residual: bool, seeds: int, rare_runs: int,
                        tol: float = 1e-3, max_eq_steps: int = 800) -> tuple[list[Result], dict]:
    """C4 over a sweep (paper.md section 4d, revision 5): per size d, head count H, weight seed k and target
    sharpness s (the typical |score| of the bipartite start, set through the q.k scale), the bipartite
    equilibrium on the branch that continues +-v_1 of M: Newton from the start at the smallest sharpness, then
    from each equilibrium at the next (:func:`newton_equilibrium`; our choice: the equilibrium the bipartite
    start belongs to, whatever the step budget). Every equilibrium is classified by the spectral radius of one
    law step's Jacobian (:mod:`powerlens.analysis.theory.linearise`), degenerate ones (uniform attention there)
    included; its sharpness is measured at the equilibrium. Checks: ``runs`` perturbed starts (epsilon) with an
    epsilon = 0 control, and the plain iteration from the start (``max_eq_steps`` steps). "Rare": of
    ``rare_runs`` random isotropic starts, how many end in two antipodal groups (:func:`ending`).

    Positive control (a setting known to be unstable): attention on the token itself only, where the law is
    the power method token by token, x <- N(M x), and the bipartite state on +-v_2 of M is an exact equilibrium
    with spectral radius |mu_1 / mu_2| > 1."""
    signs = np.where(np.arange(n_tokens) % 2 == 0, 1.0, -1.0)
    results = []
    for d in sizes:
        for k in range(seeds):
            rng = np.random.default_rng([seed, 3, d, k])
            F = prescribed_matrix(d, [3.0], rest_radius=-0.1, rng=rng, rest_min=-0.9)
            vals, V = leading_pair(step_matrix(F, residual))
            X0 = bipartite_state(V[:, 0].real, n_tokens)
            for H in heads_list:
                if d % H:
                    continue
                base = synthetic_layer(F, H, np.random.default_rng([seed, 3, d, H, k]), "softmax", qk_scale=1.0)
                w = X0[0].copy()
                for s in sorted(sharpness):
                    r = _c4_cell(X0, w, base, H, s, signs, d=d, k=k, seed=seed, steps=steps, runs=runs,
                                 epsilon=epsilon, residual=residual, tol=tol, max_eq_steps=max_eq_steps,
                                 rare_runs=rare_runs)
                    if r.detail["equilibrium_found"]:
                        w = np.asarray(r.detail["w"])  # the branch goes on from here
                    results.append(r)
    control = _c4_positive_control(sizes[0], n_tokens, signs, seed=seed, steps=steps, runs=runs, epsilon=epsilon,
                                   residual=residual, tol=tol)
    results.append(control)
    arrays = {"sweep_sizes": np.array(sizes), "sweep_heads": np.array(heads_list),
              "sweep_sharpness": np.array(sorted(sharpness), dtype=float),
              "positive_control_rate": np.array(control.detail["break_rate"]),
              "positive_control_radius": np.array(control.measured), "epsilon": np.array(epsilon)}
    for key, f in (("cell_d", "d"), ("cell_heads", "heads"), ("cell_seed", "seed"), ("cell_target", "sharpness"),
                   ("cell_score", "score_at_equilibrium"), ("cell_radius", "spectral_radius")):
        arrays[key] = np.array([r.detail[f] for r in results if r.id == "C4.cell"], dtype=float)
    arrays["cell_degenerate"] = np.array([r.detail["degenerate"] for r in results if r.id == "C4.cell"])
    arrays["cell_found"] = np.array([r.detail["equilibrium_found"] for r in results if r.id == "C4.cell"])
    return results, arrays


def _perturbed(X: np.ndarray, lw: LayerWeights, H: int, signs, *, prng, steps: int, runs: int, epsilon: float,
               residual: bool, tol: float, causal: bool = False) -> tuple[int, bool]:
    """The perturbation check: (runs that broke, whether the epsilon = 0 control stays)."""
    stays = not broken_runs(X[None], lw, H, steps, residual, signs, tol, causal=causal)[0]
    broke = int(broken_runs(X[None] + epsilon * prng.standard_normal((runs, *X.shape)), lw, H, steps, residual,
                            signs, tol, causal=causal).sum())
    return broke, stays


def _classified(eq: dict, lw: LayerWeights, H: int, causal: bool, residual: bool) -> dict:
    """Degeneracy, spectral radius and stability of an equilibrium found (a dash where there is none). A
    degenerate one (uniform attention there: max |score| < 1e-8) is classified too: its stratum is its own."""
    out = {"max_score_at_equilibrium": lin.max_score(eq["X"], lw, H), "spectral_radius": float("nan"),
           "stability": "-"}
    out["degenerate"] = bool(out["max_score_at_equilibrium"] < lin.UNIFORM_SCORE)
    if not eq["found"]:
        return out
    rho = lin.spectral_radius(eq["X"], eq["sigma"], lin.law_step(lw, H, residual, causal))
    out.update({"spectral_radius": rho, "stability": lin.classify(rho)})
    return out


def _bipartite_endings(lw: LayerWeights, H: int, v1: np.ndarray, *, rng, n_tokens: int, steps: int, runs: int,
                       residual: bool) -> int:
    """Of ``runs`` random isotropic starts (run together), how many end in two antipodal groups (on +-v_1 or
    elsewhere, :func:`ending`)."""
    if runs == 0:
        return 0
    d = lw.W_Q.shape[1]
    x = torch.as_tensor(rng.standard_normal((runs, n_tokens, d)), dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    mask = None  # no padding (the kept all-visible mask: no masking per step)
    prev = x
    for _ in range(steps):
        prev = x
        if residual:
            x = attention_only_step(x, lw, H, False, mask, "l2")
        else:
            y = attention_output(x, lw, H, visible_keys(n_tokens, False, lw.window, mask))
            x = y / y.norm(dim=-1, keepdim=True)
    return sum(ending(np.stack([prev[i].numpy(), x[i].numpy()]), v1) in (BIPARTITE_V1, BIPARTITE_ELSEWHERE)
               for i in range(runs))


def _c4_cell(X0: np.ndarray, w0: np.ndarray, base: LayerWeights, H: int, s: float, signs: np.ndarray, *, d: int,
             k: int, seed: int, steps: int, runs: int, epsilon: float, residual: bool, tol: float,
             max_eq_steps: int, rare_runs: int) -> "Result":
    """One cell and weight seed of the C4 sweep: the layer's q.k scaled to sharpness s at the start, the
    bipartite equilibrium Newton reaches from w0, the Jacobian's spectral radius there, the checks."""
    lw, qk = sharpened(base, X0, H, s)
    eq = newton_equilibrium(w0, signs, lw, H, residual)
    cls = _classified(eq, lw, H, False, residual)
    broke, stays = _perturbed(eq["X"], lw, H, signs, prng=np.random.default_rng([seed, 30, d, H, k, round(s * 1e6)]),
                              steps=steps, runs=runs, epsilon=epsilon, residual=residual, tol=tol)
    check = (lin.check_agrees(cls["stability"], cls["spectral_radius"], broke, runs, epsilon=epsilon, d=d,
                              steps=steps, tol=tol) if eq["found"] else "-")
    w_plain = plain_iteration(X0, lw, H, residual, max_eq_steps)
    rare = _bipartite_endings(lw, H, X0[0], rng=np.random.default_rng([seed, 31, d, H, k, round(s * 1e6)]),
                              n_tokens=len(signs), steps=steps, runs=rare_runs, residual=residual)
    score = typical_score(eq["X"], lw, H)
    # how far the refined w is determined (a bound from Newton's residual and conditioning; NaN without one)
    bound = lin.newton_error(eq["w"], signs, lin.law_step(lw, H, residual), eq["sigma"]) if eq["found"] else np.nan
    return Result(
        id="C4.cell", case="c: bipartite", attention="softmax",
        quantity=f"spectral radius (d {d}, {H} head{'s' if H > 1 else ''}, seed {k}, |score| {s:g} at the start)",
        predicted=float("nan"), measured=cls["spectral_radius"],
        criterion=f"Newton continuation of the bipartite equilibrium on +-v_1 along the sharpness (one law step "
        f"moves it by < {sci(lin.RESIDUAL)}); unstable if the spectral radius of one step's Jacobian (tangent space) "
        f"> 1 + {sci(lin.RADIUS_TOL)}, stable < 1 - {sci(lin.RADIUS_TOL)}; degenerate (its own stratum) if max |score| "
        f"< {sci(lin.UNIFORM_SCORE)} there; check: groups no longer antipodal (|cos| < 1 - {sci(tol)}) within {steps} "
        "steps", passed=bool(eq["found"]),
        detail={"d": d, "heads": H, "seed": k, "sharpness": s, "score_at_equilibrium": score,
                "qk_scale": qk, "runs": runs, "broke": broke, "break_rate": broke / runs,
                "fixed_point_residual": eq["residual"], "equilibrium_error_bound": bound,
                "equilibrium_found": eq["found"], "newton_iterations":
                eq["newton"], "swap": eq["sigma"] < 0, "w": [float(x) for x in eq["w"]],
                "plain_iteration_reaches": bool(abs(float(w_plain @ eq["w"])) > 1 - 1e-6),
                "plain_iteration_steps": max_eq_steps, "random_starts": rare_runs, "random_starts_bipartite": rare,
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

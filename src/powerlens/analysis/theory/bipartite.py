"""Claim C4: the bipartite state, its multi-head equilibrium, breaking runs, the sweep over sizes, head
counts and sharpness with its positive control, and the verdict from Fisher tests."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from powerlens.analysis.theory.synthetic import (
    Result,
    iterate,
    leading_pair,
    prescribed_matrix,
    step_matrix,
    synthetic_layer,
)
from powerlens.models.attention import attention_only_step, attention_output, visible_keys
from powerlens.models.weights import LayerWeights


def bipartite_state(v: np.ndarray, n_tokens: int) -> np.ndarray:
    signs = np.where(np.arange(n_tokens) % 2 == 0, 1.0, -1.0)
    return signs[:, None] * (v / np.linalg.norm(v))[None, :]


STALL_STEPS, STALL_MOVED = 300, 1e-6  # a search still moving this much by then has never converged here (the


def bipartite_equilibrium(X0: np.ndarray, lw: LayerWeights, n_heads: int, residual: bool, tol: float = 1e-15,
                          max_steps: int = 100000) -> tuple[np.ndarray, float, int]:
    """The bipartite equilibrium reached from the bipartite state X0 (tokens s_i w, s_i = +-1, equal groups).

    The exact law keeps a bipartite state bipartite (the two groups see mirror-image attention), so the
    iteration is run on w alone: one step of the law, then w <- the sign-weighted mean of the tokens, until w
    moves by less than ``tol`` (this also finds an unstable equilibrium, where the unsymmetrised iteration
    would drift off it on rounding errors). A state whose groups swap at every step (w -> -w) is the same
    bipartite consensus with its labels exchanged, so w is compared up to sign. Returns the state, its
    fixed-point residual under one step of the full law (max |x(t+1) - x(t)|, up to that global sign), and the
    steps taken."""
    signs = np.sign(X0 @ X0[0])
    w = X0[0] / np.linalg.norm(X0[0])
    for k in range(max_steps):
        Y = iterate(signs[:, None] * w[None, :], lw, n_heads, 1, residual)[1]
        w_new = (signs[:, None] * Y).mean(axis=0)
        w_new /= np.linalg.norm(w_new)
        w_new *= 1.0 if w_new @ w >= 0 else -1.0  # a swap of the two groups is the same state
        moved = float(np.abs(w_new - w).max())
        w = w_new
        if moved < tol:
            break
        if k + 1 == STALL_STEPS and moved > STALL_MOVED:
            break  # still moving by more than 1e-6 after 300 steps: not converging (cycling); give up early
    X = signs[:, None] * w[None, :]
    Y = iterate(X, lw, n_heads, 1, residual)[1]
    res = float(min(np.abs(Y - X).max(), np.abs(Y + X).max()))
    return X, res, k + 1


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
                        seed: int, runs: int, epsilon: float, residual: bool = True, tol: float = 1e-3,
                        max_eq_steps: int = 3000) -> tuple[list[Result], dict]:
    """C4 over a sweep: per size d, head count H and target sharpness s (the typical |score| of the bipartite
    start, set through the q.k scale: scores scale as its square), the multi-head bipartite equilibrium
    (:func:`bipartite_equilibrium`), ``runs`` perturbed starts (epsilon) and an epsilon = 0 control; a run
    breaks when its groups stop being antipodal within ``steps`` steps. A cell whose equilibrium is not a fixed
    point to 1e-10 within ``max_eq_steps`` (or whose control leaves) is reported and left out of the tests.

    Positive control (a setting known to be unstable, so the test must see breaks): attention on the token
    itself only, where the law is the power method token by token, x <- N(M x), and the bipartite state on
    +-v_2 of M is an exact equilibrium that every perturbation with a v_1 component leaves (|mu_2| < |mu_1|):
    each token goes to the sign of its own v_1 component, so the groups split."""
    shape = (len(sizes), len(heads_list), len(sharpness))
    arrays = {"sweep_rate": np.full(shape, np.nan),  # cells in the tests
              "sweep_rate_all": np.full(shape, np.nan), "sweep_score": np.full(shape, np.nan)}
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
                found = r.passed
                arrays["sweep_score"][di, hi, si] = r.detail["score_at_equilibrium"]
                arrays["sweep_rate"][di, hi, si] = r.measured if found else np.nan
                arrays["sweep_rate_all"][di, hi, si] = r.measured
                results.append(r)
    control = _c4_positive_control(sizes[0], n_tokens, signs, seed=seed, steps=steps, runs=runs, epsilon=epsilon,
                                   residual=residual, tol=tol)
    results.append(control)
    arrays.update({"sweep_sizes": np.array(sizes), "sweep_heads": np.array(heads_list),
                   "sweep_sharpness": np.array(sharpness, dtype=float),
                   "positive_control_rate": np.array(control.measured), "epsilon": np.array(epsilon)})
    return results, arrays


def _c4_cell(X0: np.ndarray, base: LayerWeights, H: int, s: float, signs: np.ndarray, *, d: int, si: int,
             seed: int, steps: int, runs: int, epsilon: float, residual: bool, tol: float,
             max_eq_steps: int) -> "Result":
    """One cell of the C4 sweep: the layer's q.k scaled to sharpness s, its bipartite equilibrium, the
    epsilon = 0 control and ``runs`` perturbed runs."""
    qk = math.sqrt(s / typical_score(X0, base, H))  # W_Q, W_K scaled by qk: every score by qk^2
    lw = dataclasses.replace(base, W_Q=base.W_Q * qk, W_K=base.W_K * qk)
    Xs, fp, n_eq = bipartite_equilibrium(X0, lw, H, residual, tol=1e-15, max_steps=max_eq_steps)
    stays = not broken_runs(Xs[None], lw, H, steps, residual, signs, tol)[0]
    prng = np.random.default_rng([seed, 30, d, H, si])
    broke = int(broken_runs(Xs[None] + epsilon * prng.standard_normal((runs, *Xs.shape)), lw, H, steps,
                            residual, signs, tol).sum())
    return Result(
        case="c: bipartite", attention="softmax",
        quantity=f"fraction breaking (d {d}, {H} head{'s' if H > 1 else ''}, |score| {s:g})",
        predicted=float("nan"), measured=broke / runs,
        criterion=f"equilibrium residual < 1e-10 and epsilon = 0 control stays; broken = groups no longer "
        f"antipodal (|cos| < 1 - {tol:g}) within {steps} steps", passed=bool(fp < 1e-10 and stays),
        detail={"d": d, "heads": H, "sharpness": s, "score_at_equilibrium": typical_score(Xs, lw, H),
                "qk_scale": qk, "runs": runs, "broke": broke, "fixed_point_residual": fp,
                "equilibrium_steps": n_eq, "control_stays": stays, "epsilon": epsilon, "sweep": True})


def _c4_positive_control(d: int, n_tokens: int, signs: np.ndarray, *, seed: int, steps: int, runs: int,
                         epsilon: float, residual: bool, tol: float) -> "Result":
    """Self-only attention (window 1, causal), bipartite on +-v_2 of M: an equilibrium known to be unstable,
    so the test must see breaks."""
    rng = np.random.default_rng([seed, 3, d])
    F = prescribed_matrix(d, [3.0], rest_radius=-0.1, rng=rng, rest_min=-0.9)
    vals, V = leading_pair(step_matrix(F, residual))
    lw = dataclasses.replace(synthetic_layer(F, 1, np.random.default_rng([seed, 3, d, 0]), "full"), window=1)
    Xc = bipartite_state(V[:, 1].real, n_tokens)
    prng = np.random.default_rng([seed, 31])
    broke = int(broken_runs(Xc[None] + epsilon * prng.standard_normal((runs, *Xc.shape)), lw, 1, steps, residual,
                            signs, tol, causal=True).sum())
    stays = not broken_runs(Xc[None], lw, 1, steps, residual, signs, tol, causal=True)[0]
    control = broke / runs
    return Result(
        case="c: bipartite, positive control", attention="self only",
        quantity="fraction breaking (known unstable: +-v_2, x <- N(M x))", predicted=1.0, measured=control,
        criterion="the test sees breaks where the equilibrium is known to be unstable: >= 90% of runs break, "
        "the epsilon = 0 control stays", passed=bool(control >= 0.9 and stays),
        detail={"d": d, "heads": 1, "runs": runs, "broke": broke, "control_stays": stays, "epsilon": epsilon,
                "mu2_over_mu1": float(abs(vals[1]) / abs(vals[0]))})


def c4_verdict(results: list[dict], alpha: float) -> dict | None:
    """C4's verdict from the sweep's results (dicts as the theory step writes them), the one place table_theory
    and table_claims take it from: per size and sharpness, one-sided Fisher exact tests of "H heads break more
    often than 1 head" for every H > 1 with a found equilibrium in both cells, Holm across the whole sweep. C4
    holds if some test is significant (and H heads broke more), and the positive control shows the test can see
    a break. None when the results hold no sweep."""
    from scipy.stats import fisher_exact

    from powerlens.analysis.stats import holm

    cells = [r for r in results if r["case"] == "c: bipartite" and r["detail"].get("sweep")]
    pos = next((r for r in results if r["case"] == "c: bipartite, positive control"), None)
    if not cells:
        return None
    by = {(r["detail"]["d"], r["detail"]["sharpness"], r["detail"]["heads"]): r for r in cells}
    tests = []
    for (d, s, H), r in sorted(by.items()):
        one = by.get((d, s, 1))
        if H == 1 or one is None or not (r["passed"] and one["passed"]):
            continue
        n1, nm = one["detail"]["runs"], r["detail"]["runs"]
        b1, bm = one["detail"]["broke"], r["detail"]["broke"]
        p = float(fisher_exact([[bm, nm - bm], [b1, n1 - b1]], alternative="greater").pvalue)
        tests.append({"d": d, "sharpness": s, "heads": H, "broke": bm, "broke_1": b1, "runs": nm,
                      "score": r["detail"]["score_at_equilibrium"], "p": p})
    adj = holm(np.array([t["p"] for t in tests])) if tests else np.array([])
    for t, a in zip(tests, adj):
        t["p_holm"] = float(a)
    sig = [t for t in tests if t["p_holm"] < alpha and t["broke"] > t["broke_1"]]
    power = bool(pos is not None and pos["passed"])
    missing = [f"d {r['detail']['d']}, {r['detail']['heads']} heads, |score| {r['detail']['sharpness']:g}"
               for r in cells if not r["passed"]]
    best = min(tests, key=lambda t: t["p_holm"]) if tests else None
    measured = (f"{len(tests)} tests (sizes x sharpness x heads > 1, each vs 1 head), {len(sig)} significant after "
                "Holm")
    if best:
        measured += (f"; strongest: d {best['d']}, |score| {best['sharpness']:g}, {best['heads']} heads "
                     f"{best['broke']}/{best['runs']} vs 1 head {best['broke_1']}/{best['runs']} (Holm p "
                     f"{best['p_holm']:.3g})")
    measured += (f"; positive control broke {pos['detail']['broke']}/{pos['detail']['runs']}"
                 + ("" if power else " (the test cannot see a break: no power)") if pos else "; no positive control")
    if missing:
        measured += f"; no equilibrium found (left out): {len(missing)} cells"
    failed = "; ".join(x for x, bad in ((f"0 of {len(tests)} Fisher tests significant", not sig),
                                         ("no positive control break (no power)", not power)) if bad)
    return {"ok": bool(sig) and power, "measured": measured, "tests": tests, "power": power, "failed": failed,
            "null": "one head at the same size and sharpness (one-sided Fisher exact test, Holm across the sweep)"}


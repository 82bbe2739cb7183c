"""Theory checks on synthetic multi-head layers with a prescribed spectrum (paper.md sections 2 and 7).

Write M for the matrix one step iterates: M = I + F when the update keeps the residual (the paper's law
x <- N(x + attn(x))), M = F without it; mu_1, mu_2 are its eigenvalues by modulus. Under *full* attention
(every softmax weight 1/n) the attention output is F times the tokens' mean, so once the tokens agree each
step is exactly a power-method step on M. Predictions checked here:

(a) real, strictly dominant mu_1: tokens converge to +-v_1 at the asymptotic rate |mu_2 / mu_1| per step;
(b) dominant complex pair: tokens converge to the plane span(Re v_1, Im v_1) and rotate in it by
    arg(mu_1) per step (a closed orbit); angles are measured in the coordinates of Re v_1, Im v_1, where M
    acts as an exact rotation-scaling;
(c) bipartite consensus (two groups of tokens on +w and -w). With several softmax heads +-v_1 is *not* a
    fixed point (each head weighs the two groups differently), so the equilibrium is found first: iterate
    from a bipartite start on +-v_1 until the state stops moving (the iteration keeps the state exactly
    bipartite, so it converges to a bipartite equilibrium +-w*, in general not on v_1). Then perturb it by
    epsilon and count the runs whose two groups stop being antipodal; an epsilon = 0 control must stay.
    Run over a sweep of sizes, head counts and attention sharpness (with near-uniform attention every
    bipartite state is close to neutral, so a test there has no power), one head against several by Fisher
    tests with Holm across the sweep, beside a positive control whose equilibrium is known to be unstable
    (:func:`experiment_c4_sweep`, :func:`c4_verdict`). (With full attention and equal groups the attention
    output of a bipartite state is zero, so every bipartite state is a fixed point: softmax attention only.)

Then (a) and (b) are repeated with softmax attention from random W_Q, W_K to see how far the measured
values move from the full-attention prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from powerlens.models.attention import attention_only_step
from powerlens.analysis.spectra import sort_order
from powerlens.models.weights import LayerWeights


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a), dtype=torch.float64)


def prescribed_matrix(d: int, lead: list[complex], rest_radius: float, rng: np.random.Generator,
                      rest_min: float = 0.0, symmetric: bool = False) -> np.ndarray:
    """A real d x d matrix with leading eigenvalues ``lead`` (a complex entry brings its conjugate) and the
    others drawn uniformly in [rest_min, rest_radius] (real, so M = I + F keeps |1 + lambda| >= 1 + rest_min).

    ``symmetric=True`` uses an orthogonal eigenbasis (real eigenvalues only)."""
    blocks: list[np.ndarray] = []
    n = 0
    for lam in lead:
        if abs(complex(lam).imag) > 0:
            a, b = complex(lam).real, complex(lam).imag
            blocks.append(np.array([[a, b], [-b, a]]))
            n += 2
        else:
            blocks.append(np.array([[complex(lam).real]]))
            n += 1
    rest = rng.uniform(rest_min, rest_radius, d - n)
    D = np.zeros((d, d))
    i = 0
    for B in blocks + [np.array([[r]]) for r in rest]:
        k = B.shape[0]
        D[i:i + k, i:i + k] = B
        i += k
    if symmetric:
        S, _ = np.linalg.qr(rng.standard_normal((d, d)))
        return S @ D @ S.T
    S = rng.standard_normal((d, d)) / math.sqrt(d) + np.eye(d)
    return S @ D @ np.linalg.inv(S)


def synthetic_layer(F: np.ndarray, n_heads: int, rng: np.random.Generator, attention: str = "full",
                    qk_scale: float = 1.0) -> LayerWeights:
    """A multi-head layer with W_O W_V = F: W_V random (well conditioned), W_O = F W_V^{-1}.

    attention="full": W_Q = W_K = 0, so every softmax weight is 1/n. "softmax": random W_Q, W_K with
    entries N(0, qk_scale^2 / d)."""
    d = F.shape[0]
    W_V = np.linalg.qr(rng.standard_normal((d, d)))[0] * rng.uniform(0.5, 2.0, d)
    W_O = F @ np.linalg.inv(W_V)
    if attention == "full":
        W_Q = W_K = np.zeros((d, d))
    else:
        W_Q = rng.standard_normal((d, d)) * qk_scale / math.sqrt(d)
        W_K = rng.standard_normal((d, d)) * qk_scale / math.sqrt(d)
    z = np.zeros(d)
    return LayerWeights(_t(W_Q), _t(W_K), _t(W_V), _t(W_O), _t(z), _t(z), _t(z), _t(z), _t(np.ones(d)), _t(z),
                        1e-5, 1.0 / math.sqrt(d // n_heads))


def step_matrix(F: np.ndarray, residual: bool) -> np.ndarray:
    return np.eye(F.shape[0]) + F if residual else F


def leading_pair(M: np.ndarray):
    vals, V = np.linalg.eig(M)
    o = sort_order(vals)
    return vals[o], V[:, o]


def iterate(x0: np.ndarray, lw: LayerWeights, n_heads: int, steps: int, residual: bool) -> np.ndarray:
    """Tokens (n, d) through ``steps`` steps of the attention-only law (L2 normalisation); (steps+1, n, d)."""
    x = torch.as_tensor(x0, dtype=torch.float64)[None]  # (1, n, d)
    x = x / x.norm(dim=-1, keepdim=True)
    mask = torch.ones(1, x.shape[1], dtype=torch.long)
    out = [x[0].numpy().copy()]
    for _ in range(steps):
        if residual:
            x = attention_only_step(x, lw, n_heads, False, mask, "l2")
        else:  # no residual: x <- N(attn(x))
            from powerlens.models.attention import attention_output, visible_keys

            y = attention_output(x, lw, n_heads, visible_keys(x.shape[1], False, None, mask))
            x = y / y.norm(dim=-1, keepdim=True)
        out.append(x[0].numpy().copy())
    return np.stack(out)


def line_distance(X: np.ndarray, v: np.ndarray) -> np.ndarray:
    """sin of the angle between each token and the line span(v), per token: (..., n, d) -> (..., n)."""
    v = v / np.linalg.norm(v)
    resid = X - (X @ v)[..., None] * v  # component off the line (no 1 - cos^2 cancellation)
    return np.linalg.norm(resid, axis=-1) / np.linalg.norm(X, axis=-1)


def plane_distance(X: np.ndarray, P: np.ndarray) -> np.ndarray:
    Q, _ = np.linalg.qr(P)
    resid = X - (X @ Q) @ Q.T
    return np.linalg.norm(resid, axis=-1) / np.linalg.norm(X, axis=-1)


def fit_rate(err: np.ndarray, lo: float = 1e-11, hi: float = 1e-4) -> tuple[float, int]:
    """Asymptotic per-step contraction: exp of the slope of log(err) over the steps with lo < err < hi."""
    idx = np.where((err > lo) & (err < hi))[0]
    if len(idx) < 3:
        return float("nan"), len(idx)
    slope = np.polyfit(idx, np.log(err[idx]), 1)[0]
    return float(np.exp(slope)), len(idx)


@dataclass
class Result:
    case: str
    attention: str
    quantity: str
    predicted: float
    measured: float
    criterion: str
    passed: bool
    detail: dict

    @property
    def rel_error(self) -> float:
        return abs(self.measured - self.predicted) / abs(self.predicted) if self.predicted else float("nan")


def clustered_starts(n_tokens: int, d: int, rng: np.random.Generator, spread: float = 0.5) -> np.ndarray:
    """Random starts around a random common direction (token embeddings of real models are anisotropic)."""
    c = rng.standard_normal(d)
    return c / np.linalg.norm(c) + spread * rng.standard_normal((n_tokens, d)) / math.sqrt(d)


def experiment_real(d, n_heads, n_tokens, steps, seed, residual=True, attention="full", gap=3.0) -> tuple[Result, dict]:
    """(a) real strictly dominant eigenvalue: consensus on +-v_1 at the asymptotic rate |mu_2/mu_1|.

    Starts are clustered around a random direction, so the tokens reach one-sided consensus and each
    step becomes a power step on M. Isotropic starts are run too: under full attention the common push
    lambda_1 <m, v_1> can be too weak to flip the minority, which then freezes on -v_1 (a bipartite
    split); the minority fraction is reported."""
    rng = np.random.default_rng([seed, 1])
    F = prescribed_matrix(d, [gap], rest_radius=0.5, rng=rng, rest_min=0.0)
    vals, V = leading_pair(step_matrix(F, residual))
    v1 = V[:, 0].real
    lw = synthetic_layer(F, n_heads, rng, attention)
    X = iterate(clustered_starts(n_tokens, d, rng), lw, n_heads, steps, residual)
    err = line_distance(X, v1).max(axis=1)  # worst token per step
    predicted = abs(vals[1] / vals[0])
    measured, n_fit = fit_rate(err)
    Xi = iterate(rng.standard_normal((n_tokens, d)), lw, n_heads, steps, residual)
    side = np.sign(Xi[-1] @ v1)
    minority = float(min(np.mean(side > 0), np.mean(side < 0)))
    res = Result("a: real dominant", attention, "rate per step", predicted, measured,
                 "|measured - |mu2/mu1|| <= 5% (full attention)", bool(abs(measured - predicted) <= 0.05 * predicted),
                 {"mu1": complex(vals[0]), "mu2": complex(vals[1]), "steps_fitted": n_fit,
                  "final_line_distance": float(err[-1]),
                  "isotropic_starts_minority_fraction": minority,
                  "isotropic_starts_final_line_distance": float(line_distance(Xi[-1:], v1).max())})
    return res, {"err": err}


def experiment_complex(d, n_heads, n_tokens, steps, seed, residual=True, attention="full", radius=3.0,
                       angle=0.4) -> tuple[Result, Result, dict]:
    """(b) dominant complex pair: distance to span(Re v_1, Im v_1) -> 0, angle advances by arg(mu_1)."""
    rng = np.random.default_rng([seed, 2])
    mu = radius * np.exp(1j * angle)
    lam = mu - 1 if residual else mu
    F = prescribed_matrix(d, [lam], rest_radius=0.5, rng=rng, rest_min=0.0)
    vals, V = leading_pair(step_matrix(F, residual))
    v1 = V[:, 0]
    P = np.stack([v1.real, v1.imag], axis=1)
    lw = synthetic_layer(F, n_heads, rng, attention)
    X = iterate(clustered_starts(n_tokens, d, rng), lw, n_heads, steps, residual)
    dist = plane_distance(X, P).max(axis=1)
    coef, *_ = np.linalg.lstsq(P, X.reshape(-1, d).T, rcond=None)  # x = alpha Re v1 + beta Im v1
    c = (coef[0] - 1j * coef[1]).reshape(X.shape[0], X.shape[1])  # x = Re(c v1): c -> mu_1 c per step
    dtheta = np.angle(c[1:] / c[:-1])  # (steps, n)
    tail = dtheta[-20:]
    measured_angle = float(np.mean(tail))
    predicted = float(np.angle(vals[0]))
    r_dist = Result("b: complex pair", attention, "plane distance", 0.0, float(dist[-1]),
                    "final distance < 1e-6 (full attention)", bool(dist[-1] < 1e-6),
                    {"mu1": complex(vals[0])})
    r_angle = Result("b: complex pair", attention, "angle per step (rad)", predicted, measured_angle,
                     "|measured - arg(mu1)| < 1e-3 rad (full attention)",
                     bool(abs(measured_angle - predicted) < 1e-3),
                     {"mu1": complex(vals[0]), "angle_spread_last20": float(np.ptp(tail))})
    return r_dist, r_angle, {"dist": dist, "dtheta": dtheta.mean(axis=1), "coords": c[:, :6]}


def bipartite_state(v: np.ndarray, n_tokens: int) -> np.ndarray:
    signs = np.where(np.arange(n_tokens) % 2 == 0, 1.0, -1.0)
    return signs[:, None] * (v / np.linalg.norm(v))[None, :]


STALL_STEPS, STALL_MOVED = 300, 1e-6  # a search still moving this much by then has never converged here (the
# slowest converging cell of the default sweep moves by about 1e-7 at step 300 and reaches 1e-15 by step 635)


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


# --- (c) with power: the sweep over attention sharpness (paper.md section 4b, C4, revision 3) ---------------

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
    from powerlens.models.attention import attention_output, visible_keys

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
    import dataclasses

    rates = np.full((len(sizes), len(heads_list), len(sharpness)), np.nan)  # cells in the tests
    rates_all, scores, results = np.full_like(rates, np.nan), np.full_like(rates, np.nan), []
    signs = np.where(np.arange(n_tokens) % 2 == 0, 1.0, -1.0)
    control = None
    for di, d in enumerate(sizes):
        rng = np.random.default_rng([seed, 3, d])
        F = prescribed_matrix(d, [3.0], rest_radius=-0.1, rng=rng, rest_min=-0.9)
        vals, V = leading_pair(step_matrix(F, residual))
        X0 = bipartite_state(V[:, 0].real, n_tokens)
        for hi, H in enumerate(heads_list):
            if d % H:
                continue
            base = synthetic_layer(F, H, np.random.default_rng([seed, 3, d, H]), "softmax", qk_scale=1.0)
            s1 = typical_score(X0, base, H)
            for si, s in enumerate(sharpness):
                qk = math.sqrt(s / s1)  # W_Q, W_K scaled by qk: every score by qk^2
                lw = dataclasses.replace(base, W_Q=base.W_Q * qk, W_K=base.W_K * qk)
                Xs, fp, n_eq = bipartite_equilibrium(X0, lw, H, residual, tol=1e-15, max_steps=max_eq_steps)
                stays = not broken_runs(Xs[None], lw, H, steps, residual, signs, tol)[0]
                prng = np.random.default_rng([seed, 30, d, H, si])
                broke = int(broken_runs(Xs[None] + epsilon * prng.standard_normal((runs, *Xs.shape)), lw, H, steps,
                                        residual, signs, tol).sum())
                found = bool(fp < 1e-10 and stays)
                scores[di, hi, si] = typical_score(Xs, lw, H)
                rates[di, hi, si] = broke / runs if found else np.nan
                rates_all[di, hi, si] = broke / runs
                results.append(Result(
                    "c: bipartite", "softmax", f"fraction breaking (d {d}, {H} head{'s' if H > 1 else ''}, "
                    f"|score| {s:g})", float("nan"), broke / runs,
                    f"equilibrium residual < 1e-10 and epsilon = 0 control stays; broken = groups no longer "
                    f"antipodal (|cos| < 1 - {tol:g}) within {steps} steps", found,
                    {"d": d, "heads": H, "sharpness": s, "score_at_equilibrium": scores[di, hi, si],
                     "qk_scale": qk, "runs": runs, "broke": broke, "fixed_point_residual": fp,
                     "equilibrium_steps": n_eq, "control_stays": stays, "epsilon": epsilon, "sweep": True}))
    # positive control: self-only attention (window 1, causal), bipartite on +-v_2 of M
    d = sizes[0]
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
    results.append(Result(
        "c: bipartite, positive control", "self only", "fraction breaking (known unstable: +-v_2, x <- N(M x))",
        1.0, control, "the test sees breaks where the equilibrium is known to be unstable: >= 90% of runs break, "
        "the epsilon = 0 control stays", bool(control >= 0.9 and stays),
        {"d": d, "heads": 1, "runs": runs, "broke": broke, "control_stays": stays, "epsilon": epsilon,
         "mu2_over_mu1": float(abs(vals[1]) / abs(vals[0]))}))
    arrays = {"sweep_rate": rates, "sweep_rate_all": rates_all, "sweep_score": scores, "sweep_sizes": np.array(sizes),
              "sweep_heads": np.array(heads_list), "sweep_sharpness": np.array(sharpness, dtype=float),
              "positive_control_rate": np.array(control), "epsilon": np.array(epsilon)}
    return results, arrays


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

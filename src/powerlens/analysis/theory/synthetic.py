"""Synthetic layers with a prescribed spectrum, the law iterated on them, and the C2/C3 experiments (real
leading eigenvalue: consensus at rate |mu_2/mu_1|; complex pair: a closed orbit in the leading plane)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from powerlens.analysis.spectra import sort_order
from powerlens.analysis.theory.verdicts import C2_REL_TOL, C3_ANGLE_TOL, C3_DIST_TOL
from powerlens.core.fmt import sci
from powerlens.models.attention import attention_only_step, attention_output, visible_keys
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
    return LayerWeights(W_Q=_t(W_Q), W_K=_t(W_K), W_V=_t(W_V), W_O=_t(W_O), b_Q=_t(z), b_K=_t(z), b_V=_t(z), b_O=_t(z),
                        ln_w=_t(np.ones(d)), ln_b=_t(z), ln_eps=1e-5, attn_scale=1.0 / math.sqrt(d // n_heads))


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


@dataclass(kw_only=True)
class Result:
    """One synthetic-layer check. ``id`` names it for the code (``C2.rate.full``, ``C4.cell``...); ``case``,
    ``attention`` and ``quantity`` are its display labels, never looked up."""

    id: str
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


def experiment_real(d, n_heads, n_tokens, steps, seed, residual, attention="full", gap=3.0) -> tuple[Result, dict]:
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
    res = Result(id=f"C2.rate.{attention}", case="a: real dominant", attention=attention, quantity="rate per step",
                 predicted=predicted,
                 measured=measured, criterion=f"|measured - |mu2/mu1|| <= {C2_REL_TOL:.0%} (full attention)",
                 passed=bool(abs(measured - predicted) <= C2_REL_TOL * predicted),
                 detail={"mu1": complex(vals[0]), "mu2": complex(vals[1]), "steps_fitted": n_fit,
                         "final_line_distance": float(err[-1]), "isotropic_starts_minority_fraction": minority,
                         "isotropic_starts_final_line_distance": float(line_distance(Xi[-1:], v1).max())})
    return res, {"err": err}


def experiment_complex(d, n_heads, n_tokens, steps, seed, residual, attention="full", radius=3.0,
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
    r_dist = Result(id=f"C3.distance.{attention}", case="b: complex pair", attention=attention,
                    quantity="plane distance", predicted=0.0,
                    measured=float(dist[-1]), criterion=f"final distance < {sci(C3_DIST_TOL)} (full attention)",
                    passed=bool(dist[-1] < C3_DIST_TOL), detail={"mu1": complex(vals[0])})
    r_angle = Result(id=f"C3.angle.{attention}", case="b: complex pair", attention=attention,
                     quantity="angle per step (rad)", predicted=predicted,
                     measured=measured_angle,
                     criterion=f"|measured - arg(mu1)| < {sci(C3_ANGLE_TOL)} rad (full attention)",
                     passed=bool(abs(measured_angle - predicted) < C3_ANGLE_TOL),
                     detail={"mu1": complex(vals[0]), "angle_spread_last20": float(np.ptp(tail))})
    return r_dist, r_angle, {"dist": dist, "dtheta": dtheta.mean(axis=1), "coords": c[:, :6]}


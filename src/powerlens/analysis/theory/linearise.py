"""C4 by linearisation (paper.md section 4b, revision 4): the bipartite equilibrium refined by Newton's method,
and its stability from the Jacobian of one law step there, so that no step budget decides a verdict.

A bipartite state is X = s w^T: token i is s_i w (s_i = +-1, two equal groups, w a unit vector). The law
step G (x <- N(x + attn(x)) with L2 normalisation N, or x <- N(attn(x)) without the residual) keeps such a state
bipartite, G(s w^T) = s g(w)^T with g(w) = N(mean_i s_i G(s w^T)_i), and an equilibrium is g(w) = sigma w:
sigma = -1 is the same bipartite consensus with its groups swapped at every step. Newton (damped Gauss-Newton
on the square system [g(w) - sigma w; (|w|^2 - 1) / 2], float64) refines the iterate to a fixed point, to the
rounding floor; the equilibrium counts when one step of the *full* law moves it by less than :data:`RESIDUAL` (max
|G(X) - sigma X|),
whatever the number of steps.

Stability: the Jacobian of X -> sigma G(X) at the equilibrium, on the tangent space of the token spheres (each
token's own scale removed by N; the swap sigma folded in), of size n (d - 1). Its spectral radius rho classifies
the equilibrium: unstable if rho > 1 + 1e-6, stable if rho < 1 - 1e-6, else neutral (paper.md section 4c: a
quantity within 1e-6 of its threshold is not decided by rounding). The law has no continuous symmetry for
generic weights (the global sign X -> -X is discrete), so no exact neutral direction needs removing.
"""

from __future__ import annotations

import numpy as np
import torch

from powerlens.analysis.theory.verdicts import NEUTRAL, RESIDUAL, STABLE, UNSTABLE  # noqa: F401 (lin.UNSTABLE, ...)
from powerlens.models.attention import attention_output, law_attention, law_norm, visible_keys
from powerlens.models.weights import LayerWeights

# Newton goes on to this (or until no step lowers the residual): float64 rounding leaves about 1e-12 at d 32, so
# `found` has three orders of margin on either side (measured: found cells 4e-16..8e-12, the others >= 7e-3)
NEWTON_TARGET = 1e-13
RADIUS_TOL = 1e-6  # a spectral radius this close to 1 (relative) is neutral
UNIFORM_SCORE = 1e-8  # max |score| below this at the equilibrium: uniform attention, heads cannot matter


def law_step(lw: LayerWeights, n_heads: int, residual: bool, causal: bool = False):
    """One law step as a function of the tokens X (n, d) -> (n, d), float64, differentiable."""
    def step(X: torch.Tensor) -> torch.Tensor:
        x = X[None]
        mask = None  # no padding (the kept all-visible mask: no masking per step)
        if residual:  # attention_only_step's own composition, without its no_grad: the Jacobian needs the graph
            return law_norm(x + law_attention(x, lw, n_heads, causal, mask), lw, "l2")[0]
        y = attention_output(x, lw, n_heads, visible_keys(x.shape[1], causal, lw.window, mask))
        return (y / y.norm(dim=-1, keepdim=True))[0]
    return step


def _reduced(step, signs: torch.Tensor):
    def g(w: torch.Tensor) -> torch.Tensor:
        Y = step(signs[:, None] * w[None, :])
        m = (signs[:, None] * Y).mean(0)
        return m / m.norm()
    return g


def full_residual(step, X: np.ndarray, sigma: float) -> float:
    """max |G(X) - sigma X| over tokens and coordinates."""
    with torch.no_grad():
        Y = step(torch.as_tensor(X, dtype=torch.float64)).numpy()
    return float(np.abs(Y - sigma * X).max())


def refine(w0: np.ndarray, signs: np.ndarray, step, max_iter: int = 60, sigma: float | None = None
           ) -> tuple[np.ndarray, float, float, int]:
    """Newton-refined bipartite equilibrium from the unit vector w0: (w, sigma, full-law residual, Newton
    iterations). ``sigma``: +1 (the groups stay) or -1 (they swap each step); None: the sign of g(w0) . w0."""
    s = torch.as_tensor(signs, dtype=torch.float64)
    g = _reduced(step, s)
    w = torch.as_tensor(w0 / np.linalg.norm(w0), dtype=torch.float64)
    if sigma is None:
        with torch.no_grad():
            sigma = 1.0 if float(g(w) @ w) >= 0 else -1.0

    def r(v):
        return torch.cat([g(v) - sigma * v, ((v @ v - 1) / 2)[None]])

    res = lambda v: full_residual(step, (s[:, None] * v[None, :]).numpy(), sigma)  # noqa: E731
    best, it = res(w), 0
    for it in range(1, max_iter + 1):
        if best < NEWTON_TARGET:
            it -= 1
            break
        J = torch.autograd.functional.jacobian(r, w, vectorize=True)  # (d + 1, d)
        with torch.no_grad():
            rv = r(w)
            # numpy's SVD least squares: torch's (MKL gelsy) varies in its last bits from run to run on one CPU
            delta = torch.as_tensor(np.linalg.lstsq(J.numpy(), -rv.numpy(), rcond=None)[0])
            norm0, t = float(rv.norm()), 1.0
            while t > 1e-6:  # damping: the largest step 1, 1/2, ... that lowers the residual
                cand = w + t * delta
                cand = cand / cand.norm()
                if float(r(cand).norm()) < norm0:
                    break
                t /= 2
            if t <= 1e-6:
                break
            w = cand
        best = res(w)
    return w.numpy(), sigma, best, it


#: the rounding floor of one evaluation of the reduced residual in float64 (measured: 4e-16..8e-12 at found
#: cells up to d 32, :data:`NEWTON_TARGET`'s note), added to the residual a bound starts from
EVAL_FLOOR = 1e-11


def newton_error(w: np.ndarray, signs: np.ndarray, step, sigma: float) -> float:
    """A first-order bound on how far a refined w lies from the exact equilibrium w* it approximates:
    |w - w*| <= 2 (|r(w)| + :data:`EVAL_FLOOR`) / s_min, with r the square system Newton solves and s_min the
    smallest singular value of its Jacobian at w (the factor 2 covers the second-order term while
    |w - w*| s_min is small against the Jacobian's variation). Two refinements of one equilibrium that round
    differently (another thread count, another BLAS branch) may differ by the sum of their bounds, and no more;
    an ill-conditioned equilibrium (s_min small) is determined only that far. Infinite where s_min is 0."""
    s = torch.as_tensor(signs, dtype=torch.float64)
    g = _reduced(step, s)
    v = torch.as_tensor(w, dtype=torch.float64)

    def r(u):
        return torch.cat([g(u) - sigma * u, ((u @ u - 1) / 2)[None]])

    J = torch.autograd.functional.jacobian(r, v).numpy()  # (d + 1, d)
    with torch.no_grad():
        res = float(r(v).norm())
    s_min = float(np.linalg.svd(J, compute_uv=False)[-1])
    return 2.0 * (res + EVAL_FLOOR) / s_min if s_min > 0 else float("inf")


def spectral_radius(X: np.ndarray, sigma: float, step) -> float:
    """Spectral radius of the Jacobian of X -> sigma G(X) at X (n, d), on the tangent spaces of the token
    spheres (every token of a bipartite state is +-w, so they share one tangent basis T, (d, d - 1))."""
    Xt = torch.as_tensor(X, dtype=torch.float64)
    n, d = X.shape
    J = torch.autograd.functional.jacobian(lambda Z: sigma * step(Z), Xt, vectorize=True).reshape(n, d, n, d).numpy()
    w = X[0] / np.linalg.norm(X[0])
    T = np.linalg.svd(np.eye(d) - np.outer(w, w))[0][:, : d - 1]  # orthonormal basis of w's complement
    Jr = np.einsum("ak,iajb,bl->ikjl", T, J, T, optimize=True).reshape(n * (d - 1), n * (d - 1))  # two contractions
    return float(np.abs(np.linalg.eigvals(Jr)).max())


def classify(rho: float) -> str:
    if rho > 1 + RADIUS_TOL:
        return UNSTABLE
    if rho < 1 - RADIUS_TOL:
        return STABLE
    return NEUTRAL


def abs_scores(X: np.ndarray, lw: LayerWeights, n_heads: int) -> torch.Tensor:
    """|s <q_i, k_j>| for every head and token pair of the state X (n, d), tokens normalised first: (H, n, n)."""
    x = torch.as_tensor(X / np.linalg.norm(X, axis=-1, keepdims=True), dtype=torch.float64)
    n, d = x.shape
    dh = lw.W_Q.shape[0] // n_heads
    q = (x @ lw.W_Q.T).view(n, n_heads, dh).transpose(0, 1)  # (H, n, dh)
    k = (x @ lw.W_K.T).view(n, n_heads, dh).transpose(0, 1)
    return (lw.attn_scale * (q @ k.transpose(1, 2))).abs()  # (H, n, n)


def max_score(X: np.ndarray, lw: LayerWeights, n_heads: int) -> float:
    """max |s <q_i, k_j>| over heads and token pairs: below 1e-8 attention is uniform at X."""
    return float(abs_scores(X, lw, n_heads).max())


def check_agrees(stability: str, rho: float, broke: int, runs: int, *, epsilon: float, d: int, steps: int,
                 tol: float) -> str:
    """Does the perturbation check agree with the linearisation? A perturbation of size about epsilon sqrt(d)
    grows like rho^steps; it is visible as a break only once it reaches the break threshold sqrt(2 tol) (an
    angle): an unstable equilibrium that grows too slowly for ``steps`` steps is "too slow to see"."""
    if stability == NEUTRAL:
        return "neutral: no prediction"
    if stability == UNSTABLE:
        visible = np.log(np.sqrt(2 * tol) / (epsilon * np.sqrt(d))) <= steps * np.log(rho)
        if not visible:
            return "too slow to see" if broke == 0 else "agrees (broke before the linear estimate)"
        return "agrees" if broke > 0 else "disagrees"
    return "agrees" if broke == 0 else "disagrees"

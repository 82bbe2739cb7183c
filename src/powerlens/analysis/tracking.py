"""The lead's members tracked across layers: the specificity p when layers depend on each other (paper.md
section 4e, point 3; revision 6).

The specificity p of :func:`~powerlens.analysis.across_layers.specificity` sums the lead's rank among its members
over the layers and reads the sum against independent uniform ranks. Layers are not independent: an eigenbasis
shared by all layers (ALBERT's F_t = S at every depth), F_t = S + noise, a corpus drift that favours one
direction at every depth all make a direction's rank persist, and then the sum of an unspecial lead's ranks
exceeds the independent tail far more often than alpha (45% at 5% in the law simulator with F_t = S + noise).

Here the null's units are not single ranks but **chains**: each member followed from layer to layer along its
most similar member (one-to-one where the layers' sizes allow: the Hungarian assignment on the squared cosines
between the members' directions, or planes' mean squared cosine of their principal angles; the rest to their
most similar member). A chain carries whatever persists along the geometry (a shared eigenbasis, its
eigenvalues, a drift along a direction), as the lead's own sequence does when the lead persists. Under the
null "the lead's label carries no information" the lead's rank sum is one more draw among the chains' rank
sums (each member's rank counted among the other members and the lead, on the test's side), so

    p_chain = (1 + #{chains j : S_j >= S_lead}) / (1 + n_chains),

exact in the permutation sense, whatever the dependence along the chains. Chains start from every member of
the layer with the most members (n_chains = max_t M_t; resolution 1 / (1 + max_t M_t)). The specificity p is
the larger of the independent p and p_chain (a test valid under either; its level holds where either holds).

The dependence estimate, printed beside each specificity, is the exchangeable between-layer rank correlation
the chains imply: (var_j S_j - sum_t v_t) / ((sum_t sqrt v_t)^2 - sum_t v_t), v_t = M_t (M_t + 2) / 12 the
variance of a uniform rank on {0..M_t}: comparable with the tipping correlation
(:func:`~powerlens.analysis.across_layers.tipping_correlation`).

What it cannot see (stated in the outputs): a lead that persists along its own geometry more than its members
can be tracked (the members' directions changing too much between layers for any matching to follow them, while
the lead's label follows it): the chains then look independent and the test is as calibrated as the independent
one (measured in the law simulator, d 32, L 12: partly shared bases with one spectrum, |cos| about 0.30 between a
direction and its next-layer self, reject 30% at 5%, against 45% for the independent test; at |cos| 0.55 and
above the chains follow them and hold the level: ``tests/unit/test_dependence.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def rank_variance(M: np.ndarray) -> tuple[float, float]:
    """Layers' uniform ranks on {0..M_t}: sum_t v_t (v_t = M_t (M_t + 2) / 12, each rank's variance) and the
    cross term (sum_t sqrt v_t)^2 - sum_t v_t, which an exchangeable correlation rho multiplies:
    var(sum of ranks) = sum_t v_t + rho * cross."""
    v = np.asarray(M, dtype=float) * (np.asarray(M, dtype=float) + 2.0) / 12.0
    return float(v.sum()), float(np.sqrt(v).sum() ** 2 - v.sum())


def similarity(A: np.ndarray, B: np.ndarray, da: int, db: int) -> np.ndarray:
    """(Ma, Mb): each pair of members' mean squared cosine (A: (d, Ma * da) blocks of ``da`` orthonormal columns,
    B likewise): for lines cos^2, for planes the mean of the squared cosines of their principal angles, for a line
    and a plane the squared norm of the line's projection on the plane."""
    C = A.T @ B  # (Ma * da, Mb * db)
    Ma, Mb = A.shape[1] // da, B.shape[1] // db
    return (C.reshape(Ma, da, Mb, db) ** 2).sum(axis=(1, 3)) / min(da, db)


def step_map(S: np.ndarray) -> np.ndarray:
    """Similarities (Ma, Mb) -> for each of the Ma members its successor in 0..Mb-1: the Hungarian assignment
    (largest total similarity, one to one) for min(Ma, Mb) of them, each remaining one to its most similar."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(-S)
    succ = S.argmax(axis=1)
    succ[rows] = cols
    return succ


def track(blocks: list[np.ndarray | None], dims: list[int]) -> list[np.ndarray | None]:
    """Chains through the layers: ``blocks[t]`` the members' directions of layer t ((d, M_t * dims[t]); None or
    no column: no member). Returns per layer the member each chain stands on (n_chains indices; None where the
    layer has no member). Chains start from every member of the layer with the most and step forwards and
    backwards to the nearest layer with members (:func:`step_map`)."""
    M = [0 if b is None else b.shape[1] // max(int(r), 1) for b, r in zip(blocks, dims)]
    out: list[np.ndarray | None] = [None] * len(blocks)
    if not any(M):
        return out
    t0 = int(np.argmax(M))
    out[t0] = np.arange(M[t0])
    for order in (range(t0 + 1, len(blocks)), range(t0 - 1, -1, -1)):
        prev = t0
        for t in order:
            if M[t] == 0:
                continue
            out[t] = step_map(similarity(blocks[prev], blocks[t], dims[prev], dims[t]))[out[prev]]
            prev = t
    return out


def member_ranks(values: np.ndarray, lead: float, tail: str = "upper") -> np.ndarray:
    """Each member's rank among the other M units of its layer (the other members and the lead), on the test's
    side (``upper``: how many it exceeds), ties counted half: uniform-like on {0..M} as the lead's rank is."""
    v = np.asarray(values, dtype=float)
    units = np.append(v, lead)
    beats = units[None, :] < v[:, None] if tail == "upper" else units[None, :] > v[:, None]
    ties = (units[None, :] == v[:, None]).sum(1) - 1  # minus itself
    return beats.sum(1) + ties / 2.0


@dataclass(frozen=True)
class ChainTest:
    """The lead's rank sum among its members' chains: ``n`` chains, how many reach the lead's sum with its
    randomised ranks (``ge``, the point p), with the ranks of the members it beats strictly (``ge_hi``: the
    upper end) and with the ties won (``ge_lo``: the lower end); ``dep`` the exchangeable rank correlation the
    chains imply (the dependence estimate)."""

    n: int
    ge: int
    ge_lo: int
    ge_hi: int
    dep: float

    @staticmethod
    def p_of(ge: float, n: float) -> float:
        return float((1.0 + ge) / (1.0 + n)) if n > 0 else 1.0


def chain_test(values: list[np.ndarray], leads: list[float], chains: list[np.ndarray | None],
               rank: np.ndarray, beaten: np.ndarray, tied: np.ndarray, tail: str = "upper") -> ChainTest | None:
    """The lead's rank sums (randomised ``rank``, ``beaten``, ``beaten + tied``: one entry per layer, NaN where
    the layer has no lead value) against the chains' (:func:`track`) over the layers where both exist. None: no
    chain."""
    use = [t for t, c in enumerate(chains) if c is not None and len(values[t]) and np.isfinite(leads[t])
           and np.isfinite(rank[t])]
    if not use:
        return None
    S = sum(member_ranks(values[t], leads[t], tail)[chains[t]] for t in use)  # (n_chains,)
    var, cross = rank_variance(np.array([len(values[t]) for t in use], dtype=float))
    dep = float((np.var(S, ddof=1) - var) / cross) if cross > 0 and len(S) > 1 else float("nan")
    r, b, t_ = (float(np.sum(np.asarray(a, dtype=float)[use])) for a in (rank, beaten, tied))
    ge = lambda s: int(np.sum(S >= s - 1e-9))  # noqa: E731  (half ranks: a sum equal up to rounding counts)
    return ChainTest(len(S), ge(r), ge(b + t_), ge(b), dep)

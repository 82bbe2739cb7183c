"""Monte Carlo null distributions of random directions (paper.md section 4, "Statistics").

Neither tokens nor prompts are independent units: between two layers the whole corpus shares a drift of
the mean token, so for a *fixed* direction the sign of a(t+1) - a(t) agrees across tokens and prompts, and a
binomial sign test over tokens (or prompts) calls a large share of random directions "significant". The
verdict's test is therefore a Monte Carlo test: the statistic s(D) of the leading direction D is compared with
the same statistic of R random subspaces of D's dimension r (unit vectors for r = 1, planes for r = 2),
measured on the same tokens in the same pass,

    p = (#{k : s(N_k) > s(D)} + U (1 + #{k : s(N_k) = s(D)})) / (1 + R),   U ~ Uniform(0, 1) seeded,

one-sided, Holm across layers. Ties (paper.md section 4, revision 3): rho_t is a count, and near consensus
most draws tie with the lead (rho = 1); the old p = (1 + #{s(N_k) >= s(D)}) / (1 + R) counted every tie
against the lead and could then never reject. The randomised tie-break is exactly calibrated with ties; the
share of draws tied with the lead is reported, and where it is at least half the layer is "saturated" (the
statistic cannot separate any direction there). For a random D the statistic is exchangeable with the R null draws, so
the
test is significant 5% of the time by construction, whatever the dependence between tokens.

Random subspaces are drawn once per model (seeded) and shared by all layers, so the projections of a state
that leaves layer t and enters layer t + 1 are computed once.

A null is one class (:class:`Null`): its members, its p and interval, and how it combines across layers.
:class:`RandomDirections` is the Monte Carlo null every per-layer test reads (its draws extended where a verdict
can move, :mod:`powerlens.analysis.dynamics.decided`; combined across layers by the partial conjunction).
:class:`RankingNull` is a finite set of directions measured like the lead, all of them enumerated: the lead's rank
among them per layer, summed across the model (the specificity p). F's other eigen-directions
(:class:`EigenDirections`) is one; another is added by :func:`register` alone: every test that ranks its lead
(``TestSpec.ranked``) then writes its columns, and every claim reading that needs specificity reads its p.
"""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from powerlens.analysis import decisions as dc

if TYPE_CHECKING:
    import torch

#: The open projection count of :func:`counting_projections` (None: nobody counts).
_COUNT: ContextVar["ProjectionCount | None"] = ContextVar("powerlens_projection_count", default=None)


class ProjectionCount:
    """Floating-point operations of the null's projections made while counting: each call of
    :func:`subspace_alignments` adds its product's 2 n d (R r) (one multiply-add per token, coordinate and
    direction column), whichever draws, stream, state or dimension it projects."""

    def __init__(self) -> None:
        self.flops = 0.0
        self.calls = 0


@contextmanager
def counting_projections():
    """Count the Monte Carlo projections made inside the block (:class:`ProjectionCount`): the dynamics step
    writes the count, so the speed table's bound holds every projection the step made (the extension past R0
    draws, the robustness streams, both dimensions, every state) rather than an estimate of the first R0."""
    count = ProjectionCount()
    token = _COUNT.set(count)
    try:
        yield count
    finally:
        _COUNT.reset(token)


def random_subspaces(d: int, r: int, R: int, rng: np.random.Generator) -> np.ndarray:
    """R random r-dimensional subspaces of R^d (Haar), as one matrix (d, R * r) whose columns k*r .. k*r+r-1
    are an orthonormal basis of subspace k. Inside :func:`~powerlens.core.scratch.reusing_scratch` the Gaussians
    are drawn into a kept buffer (the same numbers: ``out=`` fills in the generator's order); the result is always
    a fresh array."""
    from powerlens.core.scratch import scratch

    work = scratch()
    G = rng.standard_normal((R, d, r)) if work is None else rng.standard_normal(out=work.numpy("gauss", (R, d, r)))
    if r == 1:
        Q = np.divide(G, np.linalg.norm(G, axis=1, keepdims=True), out=None if work is None else G)
    else:
        Q, Rm = np.linalg.qr(G)  # (R, d, r) batched
        Q *= np.sign(np.diagonal(Rm, axis1=1, axis2=2))[:, None, :]  # Haar: fix QR's sign ambiguity
    out = np.empty((d, R, r))
    np.copyto(out, Q.transpose(1, 0, 2))
    return out.reshape(d, R * r)


def subspace_alignments(x: torch.Tensor, U: torch.Tensor, r: int) -> torch.Tensor:
    """Alignment (n, R) of tokens x (n, d) with each of R subspaces stacked in U (d, R * r): per subspace the
    norm of the tokens' projection, ||U_k^T x|| / ||x||. Inside :func:`~powerlens.core.scratch.reusing_scratch`
    the (n, R r) product is written into a kept buffer and the alignments into a block of its pool (the same
    bits: the same operations, their results in other memory)."""
    import torch

    from powerlens.core.scratch import scratch

    count = _COUNT.get()
    if count is not None:
        count.flops += 2.0 * x.shape[0] * x.shape[1] * U.shape[1]
        count.calls += 1
    work = scratch()
    n = x.shape[0]
    proj = x @ U if work is None else torch.matmul(x, U, out=work.torch("proj", (n, U.shape[1])))  # (n, R * r)
    if work is None:
        out = torch.linalg.vector_norm(proj.view(n, -1, r), dim=-1) if r > 1 else proj.abs()  # (n, R)
    else:  # into a block of the scratch's pool (the caller owns it; null_sums gives it back)
        out = work.take((n, U.shape[1] // r))
        torch.linalg.vector_norm(proj.view(n, -1, r), dim=-1, out=out) if r > 1 else torch.abs(proj, out=out)
    return out.div_(x.norm(dim=-1, keepdim=True).clamp_min(1e-300))


SATURATED_TIES = 0.5  # paper.md section 4: a layer where at least half the draws tie with the lead is saturated


def tie_uniform(seed: int, *key) -> float:
    """The seeded U of one test: a fixed function of the run's seed and the test's key (depth, statistic),
    so a rerun gives the same p and two statistics never share their U."""
    ints = [int(k) if isinstance(k, (int, np.integer)) else zlib.crc32(str(k).encode()) for k in key]
    return float(np.random.default_rng([int(seed), 23, *ints]).random())


@dataclass(frozen=True)
class NullTest:
    """A lead value against one null's values: ``above`` = #{values beyond the lead on the test's side},
    ``tied`` = #{values equal to it}, out of ``n``; the randomised p (tie-break ``u``) and its interval."""

    above: int
    tied: int
    n: int
    p: float
    lo: float
    hi: float

    @property
    def beaten(self) -> int:
        """Values the lead beats strictly (its rank from the bottom)."""
        return self.n - self.above - self.tied


class Null:
    """A null distribution the lead is compared with: one p for every kind,
    p = (#{beyond} + u (1 + #{tied})) / (1 + n), and the kind's own 99% interval of it."""

    name = "null"

    @staticmethod
    def interval(above: int, tied: int, n: int) -> tuple[float, float]:
        raise NotImplementedError

    @classmethod
    def test(cls, lead: float, values: np.ndarray, u: float, tail: str = "upper") -> NullTest:
        """The lead against ``values`` (NaN values dropped), one-sided (``tail`` upper: H1 lead is larger)."""
        if not 0.0 <= u < 1.0:
            raise ValueError(f"the tie-break u must lie in [0, 1), got {u}")
        v = np.asarray(values, dtype=np.float64)
        v = v[~np.isnan(v)]
        n = len(v)
        if n == 0 or lead is None or np.isnan(lead):
            return NullTest(0, 0, n, np.nan, np.nan, np.nan)
        above = int(np.sum(v > lead if tail == "upper" else v < lead))
        tied = int(np.sum(v == lead))
        lo, hi = cls.interval(above, tied, n)
        return NullTest(above, tied, n, float((above + u * (1 + tied)) / (1 + n)), lo, hi)


class RandomDirections(Null):
    """R random subspaces of the lead's dimension (Haar), a seeded stream: the interval is the 99%
    Clopper-Pearson interval (Monte Carlo error and every tie-break,
    :func:`powerlens.analysis.decisions.mc_interval`)."""

    name = "random directions"
    # its fields in a dynamics table, in order (:func:`random_direction_test`): p and its 99% interval, R, the
    # share of draws tied with the lead, the null's median and 95th percentile, the lead's percentile in it
    P, R, TIES, P_LO, P_HI = "p", "R", "ties", "p_lo", "p_hi"
    ABOVE = "above"  # the draws beyond the lead: with R and the ties, any level's interval (a claim's, 1 - 0.01/L)
    NULL_MEDIAN, NULL_Q95, PCT = "null_median", "null_q95", "pct"
    # the null's mean and standard deviation: the lead's z-score against its own null (the training comparison,
    # paper.md section 4e)
    NULL_MEAN, NULL_SD = "null_mean", "null_sd"
    FIELDS = (P, R, TIES, ABOVE, P_LO, P_HI, NULL_MEDIAN, NULL_Q95, PCT, NULL_MEAN, NULL_SD)

    @staticmethod
    def interval(above: int, tied: int, n: int) -> tuple[float, float]:
        return dc.mc_interval(above, tied, n)


class RankingNull(Null):
    """A finite set of directions measured like the lead, all enumerated (no Monte Carlo error): per layer the
    lead's rank among them (its columns ``<test>_<key>_<field>``, :attr:`FIELDS`), summed across the model into
    one p (:meth:`across`). A subclass gives its ``key``, its ``name`` and its :meth:`members`; :func:`register`
    adds it to the run."""

    key = "rank"
    label = "specificity"  # how a criterion's power names it
    plural = "members"  # what its members are, in words
    nobody = "no member"  # a layer without members, in words
    FIELDS = ("M", "beaten", "tied", "rank", "pct")
    # the chains' test across the model (:mod:`powerlens.analysis.tracking`), the same on every row of a test:
    # chains, how many reach the lead's rank sum (point, lower and upper ends), the dependence they imply
    CHAIN_FIELDS = ("chains", "chains_ge", "chains_ge_lo", "chains_ge_hi", "dep")

    @staticmethod
    def interval(above: int, tied: int, n: int) -> tuple[float, float]:
        return dc.exact_interval(above, tied, n)

    def members(self, d, dim: int) -> np.ndarray | None:
        """Layer directions ``d`` (:class:`~powerlens.analysis.dynamics.directions.LayerDirections`) -> the members
        of the lead's kind as one block (d_model, M * dim), ``dim`` columns each; None: no member."""
        raise NotImplementedError

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(f"{self.key}_{f}" for f in self.FIELDS + self.CHAIN_FIELDS)

    def chain_columns(self, chain) -> dict:
        """The chains' test (:class:`~powerlens.analysis.tracking.ChainTest`, None: not tracked) as columns."""
        names = self.fields[len(self.FIELDS):]
        if chain is None:
            return dict.fromkeys(names, np.nan)
        return dict(zip(names, (chain.n, chain.ge, chain.ge_lo, chain.ge_hi, chain.dep)))

    def columns(self, lead: float, values: np.ndarray, u: float, tail: str) -> dict:
        """One depth: members, members the lead beats, ties, its randomised rank (tie-break ``u``), percentile."""
        from powerlens.analysis.across_layers import tie_rank

        t = self.test(lead, values, u, tail)
        m, beaten, tied, rank, pct = self.fields[:len(self.FIELDS)]
        if np.isnan(t.p):
            return {m: 0, beaten: 0, tied: 0, rank: 0, pct: np.nan}
        return {m: t.n, beaten: t.beaten, tied: t.tied, rank: tie_rank(t.beaten, t.tied, u),
                pct: 100.0 * (t.beaten + t.tied / 2) / t.n if t.n else np.nan}

    def across(self, cols: dict[str, np.ndarray], alpha: float):
        """The layers' ranks summed across the model against their exact distribution under independent uniform
        ranks and against the members' chains (:func:`~powerlens.analysis.across_layers.specificity`)."""
        from powerlens.analysis.across_layers import specificity
        from powerlens.analysis.tracking import ChainTest

        m, beaten, tied, rank, _, n, ge, ge_lo, ge_hi, dep = self.fields

        def first(f: str) -> float:  # the same on every row of the test
            a = np.asarray(cols.get(f, ()), dtype=float)
            return float(a[0]) if len(a) else np.nan

        k = [int(np.nan_to_num(first(f))) for f in (n, ge, ge_lo, ge_hi)]
        chain = ChainTest(*k, first(dep)) if k[0] > 0 else None
        return specificity(cols[beaten], cols[tied], cols[m], cols[rank], alpha, chain)


class EigenDirections(RankingNull):
    """All of F's other eigen-directions of the lead's kind (|lambda| > 1e-9 |lambda_1|; real eigenvectors for a
    real lead, planes of complex pairs for a complex one): the spectra step's ``eig_null_*`` arrays."""

    name = "F's other eigen-directions"
    key = "eig"
    plural = "eigen-directions of the lead's kind"
    nobody = "F has no other eigen-direction of the lead's kind"

    def members(self, d, dim: int) -> np.ndarray | None:
        return d.eig_r1 if dim == 1 else d.eig_r2


#: The ranking nulls of a run, by key: every test with ``ranked`` ranks its lead among each.
RANKING: dict[str, RankingNull] = {}


def register(null: RankingNull) -> RankingNull:
    """Add a ranking null (its key unused so far); the one registration a new null needs."""
    if null.key in RANKING:
        raise ValueError(f"a ranking null with the key {null.key!r} is registered already")
    RANKING[null.key] = null
    return null


def unregister(key: str) -> None:
    RANKING.pop(key, None)


register(EigenDirections())


def random_direction_test(lead: float, null: np.ndarray, u: float, tail: str = "upper") -> dict:
    """The lead value against the Monte Carlo null's draws (NaN draws dropped), tie-break ``u``: the fields of one
    depth's random-direction test (:attr:`RandomDirections.FIELDS`): p (:meth:`RandomDirections.test`), R, the
    share of draws tied with the lead, the draws beyond it, the 99% interval, the range the tie-break alone spans
    (``tie_lo``, ``tie_hi``: no Monte Carlo error, more draws cannot narrow it), the null's median and 95th
    percentile, the lead's percentile in it, and the null's mean and standard deviation. For a lead exchangeable
    with the draws, P(p <= a) = a exactly, ties or not. The one test of a lead against random directions: the
    verdict tests, the bias-free control's and the consensus subspace's."""
    F = RandomDirections
    null = np.asarray(null, dtype=np.float64)
    null = null[~np.isnan(null)]
    t = F.test(lead, null, u, tail)
    R = t.n
    ok = R and not np.isnan(lead)
    return {F.P: t.p, F.R: R, F.TIES: t.tied / R if R else np.nan, F.ABOVE: t.above if ok else np.nan,
            F.P_LO: t.lo, F.P_HI: t.hi,
            "tie_lo": t.above / R if ok else np.nan, "tie_hi": (t.above + t.tied) / R if ok else np.nan,
            F.NULL_MEDIAN: float(np.median(null)) if R else np.nan,
            F.NULL_Q95: float(np.quantile(null, 0.95)) if R else np.nan,
            F.PCT: float(100.0 * np.mean(null < lead)) if R else np.nan,
            F.NULL_MEAN: float(np.mean(null)) if R else np.nan,
            F.NULL_SD: float(np.std(null, ddof=1)) if R > 1 else np.nan}

"""What the verdict statistics are measured on: the counted tokens' states at every depth of the model, the
probes (a before and an after state, and a direction) and their per-direction sums over tokens.

A *probe* at depth t compares the tokens' alignment with a direction before and after one part of layer t:

``layer``  x(t) -> x(t+1), the whole layer (C1 in the law, C6 and C7 in the real forward pass);
``attn``   x(t) -> the residual stream after the attention sublayer (its residual add and any norm that
           belongs to it), real forward pass only (C10);
``ffn``    that stream -> x(t+1), the FFN sublayer (C10);
``first``  the last depth's output x(L) against the *first* layer's lead (C6 (c): no accumulation);
``layer_M``, ``layer_Ft``  the whole layer against the leading direction of M = I + F and of the norm-folded
           F~ (reported beside F's, never a verdict's basis).

For a block of directions (columns of U, each direction r columns) a probe gives per direction and per token
subset the sums ``out`` (alignment after), ``tilt`` (after - before), ``inc`` and ``dec`` (tokens whose
alignment increases or decreases): gamma = out / n, tilt = tilt / n, rho = inc / (inc + dec).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from powerlens.analysis.decisions import CHUNK
from powerlens.analysis.nulls import random_subspaces, subspace_alignments
from powerlens.core.scratch import scratch

# probe -> (state before, state after); states: "x" (x(t)), "x1" (x(t+1)), "mid" (after attention), "xL" (x(L));
# ``layer_M`` and ``layer_Ft``: the whole layer against the leads of M = I + F and of the folded F~
PROBES = {"layer": ("x", "x1"), "layer_M": ("x", "x1"), "layer_Ft": ("x", "x1"), "attn": ("x", "mid"),
          "ffn": ("mid", "x1"), "first": (None, "xL")}
QUANTITIES = ("out", "tilt", "inc", "dec")


@dataclass
class States:
    """The counted tokens' states of one run, in the run's dtype: ``x[t]`` (n, d) for t = 0..S (x[t + 1] is
    depth t's output), ``mid[t]`` after depth t's attention sublayer (real forward pass; None in the law),
    ``prompt`` (n,) each token's prompt index."""

    x: list[torch.Tensor]
    mid: list[torch.Tensor] | None
    prompt: np.ndarray

    @property
    def depths(self) -> int:
        return len(self.x) - 1

    def probes(self) -> tuple[str, ...]:
        both = ("layer", "layer_M", "layer_Ft", "first")
        return both + ("attn", "ffn") if self.mid is not None else both

    def key(self, name: str, t: int) -> tuple[str, int]:
        """The state a probe's ``name`` at depth t reads, as one key (a projection cache's): depth t's output
        x(t + 1) is depth t + 1's input and, at the last depth, x(L), so one projection serves all three."""
        return {"x": ("x", t), "x1": ("x", t + 1), "xL": ("x", self.depths), "mid": ("mid", t)}[name]

    def state(self, name: str, t: int) -> torch.Tensor:
        """The state a probe's ``name`` reads at depth t, in float64. Inside
        :func:`~powerlens.core.scratch.reusing_scratch` a float32 state is widened into a kept buffer (exact,
        the same values): the result is valid until the next call."""
        s = {"x": self.x[t], "x1": self.x[t + 1], "xL": self.x[-1],
             "mid": None if self.mid is None else self.mid[t]}[name]
        work = scratch()
        if work is None or s.dtype == torch.float64:
            return s.to(torch.float64)
        return work.torch("state", tuple(s.shape)).copy_(s)


def subset_weights(prompt: np.ndarray, subsets: list[str]) -> torch.Tensor:
    """(k, n) float64 rows selecting each subset's tokens: ``all``, or ``third<j>`` (prompts j, j + 3, ...:
    interleaved thirds of the corpus, so each spans it, our choice)."""
    rows = []
    for s in subsets:
        rows.append(np.ones(len(prompt)) if s == "all" else (prompt % 3 == int(s[-1])).astype(float))
    return torch.as_tensor(np.stack(rows), dtype=torch.float64)


def subset_counts(W: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    """``W @ flags.double()`` for W's 0/1 token-subset rows (:func:`subset_weights`) and boolean flags (n, K):
    per subset and column the number of flagged tokens, as float64. Counted in float32, which is exact here
    (every partial sum is an integer below 2^24), so equal to the float64 product bit for bit at half the
    memory traffic. ``flags`` may already be 0/1 float32 (:func:`_compared`)."""
    if W.shape[1] >= 2 ** 24:
        return W @ flags.double()
    return (W.float() @ flags.float()).double()


def _compared(op, a1: torch.Tensor, a0: torch.Tensor) -> torch.Tensor:
    """``op(a1, a0)`` (a comparison, bool), inside :func:`powerlens.core.scratch.reusing_scratch` as 0/1 float32
    in kept buffers (no new (n, K) block per chunk). Compared into a bool buffer, then copied: a float32 ``out=``
    makes torch allocate a temporary of the inputs' dtype (measured 38 ms a (2540, 4000) call, against 10 ms)."""
    work = scratch()
    if work is None:
        return op(a1, a0)
    flags = op(a1, a0, out=work.torch("flags", a1.shape, torch.bool))
    return work.torch("flags", a1.shape, torch.float32).copy_(flags)


def probe_sums(states: States, t: int, probes: tuple[str, ...], blocks: dict[str, list[tuple[torch.Tensor, int]]],
               W: torch.Tensor, shared: dict | None = None) -> dict[tuple[str, str], np.ndarray]:
    """Per probe and quantity, the sums (k subsets, K directions) of the direction blocks at depth t.

    ``blocks`` maps a probe to its direction blocks [(U (d, K_b r_b), r_b), ...] (concatenated in order); probes
    with the same blocks share their alignments (each state projected once). ``shared``: a cache the caller
    keeps across depths for the same blocks (keyed by :meth:`States.key` and the blocks' ``id``), so a state that
    is one depth's output and the next depth's input is projected once."""
    cache: dict = {} if shared is None else shared
    out: dict[tuple[str, str], np.ndarray] = {}

    def aligned(state: str, key: int) -> torch.Tensor:
        k = (states.key(state, t), key)
        if k not in cache:
            X = states.state(state, t)
            parts = [subspace_alignments(X, U, r) for U, r in blocks_by_id[key]]
            cache[k] = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        return cache[k]

    def summed(after: str, before: str | None, key: int) -> dict[str, np.ndarray]:
        """The four sums of one (before, after) pair of states on one block: probes that read the same pair
        (``layer``, ``layer_M``, ``layer_Ft`` on the null's shared draws) share them."""
        k = (states.key(after, t), "sums", None if before is None else states.key(before, t), key)
        if k not in cache:
            a1 = aligned(after, key)  # (n, K)
            got = {"out": (W @ a1).numpy()}
            if before is not None:
                a0 = aligned(before, key)
                work = scratch()
                diff = a1 - a0 if work is None else torch.sub(a1, a0, out=work.torch("diff", a1.shape))
                got["tilt"] = (W @ diff).numpy()
                got["inc"] = subset_counts(W, _compared(torch.gt, a1, a0)).numpy()
                got["dec"] = subset_counts(W, _compared(torch.lt, a1, a0)).numpy()
            cache[k] = got
        return cache[k]

    blocks_by_id = {id(b): b for b in blocks.values()}
    for p in probes:
        before, after = PROBES[p]
        for q, v in summed(after, before, id(blocks[p])).items():
            out[(p, q)] = v
    return out


def stream_rng(seed: int, r: int, key: int = 0) -> np.random.Generator:
    """The generator of one stream of random r-dimensional subspaces: ``key`` 0 the main stream (the Monte Carlo
    null of every lead, and the Accumulator's draws, :func:`~powerlens.analysis.dynamics.runs.null_sets`), key
    k > 0 the k-th robustness stream. The one place the streams' seeds are spelled."""
    return np.random.default_rng([seed, 9, r] if key == 0 else [seed, 9, r, key])


class Stream:
    """One seeded stream of random r-dimensional subspaces of R^d (Haar), read in order: draws [0, R) are the
    same however they are taken, so a test extended from R to 10 R keeps its first R draws. ``key`` 0 is the
    main stream (the Monte Carlo null of every lead); key k > 0 the k-th robustness stream
    (:func:`stream_rng`). Chunks are made as they are read and not kept; a
    read that starts before the stream's position starts the stream again."""

    def __init__(self, d: int, r: int, seed: int, key: int = 0):
        self.d, self.r, self.seed, self.key = d, r, seed, key
        self._restart()

    def _restart(self) -> None:
        self.rng = stream_rng(self.seed, self.r, self.key)
        self.pos = 0

    def chunks(self, start: int, stop: int):
        """(lo, hi, U) for consecutive chunks covering draws [start, stop): U (d, (hi - lo) r) float64."""
        if start < self.pos:
            self._restart()
        while self.pos < start:  # skip to start, in chunks (the same numbers as one draw of that many)
            n = min(CHUNK, start - self.pos)
            random_subspaces(self.d, self.r, n, self.rng)
            self.pos += n
        while self.pos < stop:
            lo, hi = self.pos, min(stop, self.pos + CHUNK)
            U = random_subspaces(self.d, self.r, hi - lo, self.rng)
            self.pos = hi
            yield lo, hi, torch.as_tensor(U, dtype=torch.float64)


def _release(cache: dict, keys: list) -> None:
    """Drop ``keys`` from a projection cache of :func:`probe_sums`, handing its alignment blocks back to the open
    scratch (:meth:`~powerlens.core.scratch.Scratch.give`) for the next chunk's alignments."""
    work = scratch()
    for k in keys:
        v = cache.pop(k)
        if work is not None and isinstance(v, torch.Tensor):
            work.give(v)


def null_sums(states: States, need: dict[int, dict[str, tuple[int, int]]], dims: dict[int, dict[str, int]],
              stream_of, W: torch.Tensor) -> dict[int, dict[tuple[str, str], np.ndarray]]:
    """Random directions of each probe's dimension, for every depth t and probe p in ``need`` its draws
    ``need[t][p]`` = [start, stop): per depth, per probe and quantity, sums (k subsets, stop - start).
    ``dims[t]``: probe -> r; ``stream_of(r)``: the :class:`Stream` of dimension r. Each chunk of a stream is made
    once and projected for every (depth, probe) that needs it; probes of one depth that need the same draws
    share their projections."""
    parts: dict[int, dict[tuple[str, str], list[np.ndarray]]] = {t: {} for t in need}
    for r in sorted({dims[t][p] for t in need for p in need[t]}):
        want = [(t, p, a, b) for t in need for p, (a, b) in need[t].items() if dims[t][p] == r and b > a]
        if not want:
            continue
        lo_all, hi_all = min(w[2] for w in want), max(w[3] for w in want)
        for lo, hi, U in stream_of(r).chunks(lo_all, hi_all):
            groups: dict[tuple[int, int, int], list[str]] = {}
            for t, p, a0, b0 in want:
                a, b = max(lo, a0), min(hi, b0)
                if a < b:
                    groups.setdefault((t, a, b), []).append(p)
            blks: dict[tuple[int, int], list] = {}
            shared: dict[tuple[int, int], dict] = {}
            for (t, a, b), probes in sorted(groups.items()):  # depth order: x(t + 1) is reused at t + 1
                blk = blks.setdefault((a, b), [(U[:, (a - lo) * r:(b - lo) * r], r)])
                cache = shared.setdefault((a, b), {})
                _release(cache, [k for k in cache if k[0][1] < t])  # states of earlier depths are not read again
                got = probe_sums(states, t, tuple(probes), {p: blk for p in probes}, W, shared=cache)
                for k, v in got.items():
                    parts[t].setdefault(k, []).append(v)
            for cache in shared.values():
                _release(cache, list(cache))
    return {t: {k: np.concatenate(v, axis=1) for k, v in ps.items()} for t, ps in parts.items()}

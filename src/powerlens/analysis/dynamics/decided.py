"""The verdict statistics, decided without hanging on noise (paper.md sections 4b, 4c and 4d, revision 5).

For every depth t of the model and every test of :data:`powerlens.analysis.verdict_tests.TESTS`, the lead's
statistic (F_t's leading direction, the paper's v_{1,t}) is measured on the same tokens as

* the Monte Carlo null of R random subspaces of the lead's dimension (seeded stream, :class:`probes.Stream`;
  :class:`powerlens.analysis.nulls.RandomDirections`): p = (#{null beyond lead} + U (1 + #{null == lead})) /
  (1 + R), U a seeded tie-break, with its 99% interval; Holm across the depth gives each layer's mark in the
  figures (column ``<test>_sig``: Holm yes, the side condition tilt > 0 / rho > 0.5 holds, not saturated);
* all of F_t's other eigen-directions of the lead's kind (|lambda| > 1e-9 |lambda_1|, the spectra step's
  ``eig_null_*`` arrays; :class:`powerlens.analysis.nulls.EigenDirections`), enumerated: the lead's rank among
  them (``<test>_eig_*``), which the claims sum across the model (the specificity p, section 4d).

A claim reads these per-layer tests through one p (the partial conjunction, :mod:`powerlens.analysis.parts`).
Draws are spent only where they can change a verdict (section 4d): R0 is the smallest count at which every rule
read in the mode can reach significance (at least the configured ``null_draws``); a test no criterion reads in
the mode is never extended; a criterion already decided (any part "no", or every part "yes") is not extended;
otherwise only the layers whose intervals straddle the value that decides the part are extended, in turn,
R0 -> 10 R0 -> 100 R0 (at most the cap, config ``dynamics.null_draws_cap``), unless the tie-break alone spans it
(ties with the lead, which more draws do not narrow).

Variants (table_robustness): ``main`` (the whole corpus, the main stream), ``seed1``..``seed3`` (the whole
corpus, three other streams and tie-breaks), ``third0``..``third2`` (interleaved thirds of the prompts, the main
stream, each with its own Holm).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from powerlens.analysis import decisions as dc
from powerlens.analysis import parts as pt
from powerlens.analysis.dynamics.probes import States, Stream, null_sums, probe_sums, subset_weights
from powerlens.analysis.nulls import RANKING, SATURATED_TIES, random_direction_test, tie_uniform
from powerlens.analysis.tracking import chain_test, track
from powerlens.analysis.verdict_tests import TESTS, Field, TestSpec, first_draws, layer_tests, read_tests, readings
from powerlens.core.runtime import fixed_mmap_threshold

VARIANTS = ("main", "seed1", "seed2", "seed3", "third0", "third1", "third2")


@dataclass
class Sums:
    """One stream's sums at every depth: the lead's (k subsets, 1), each ranking null's members' (k, M; by the
    null's key) and the random draws' (k, R so far), per (probe, quantity)."""

    lead: dict[int, dict]
    ranked: dict[str, dict[int, dict]]
    null: dict[int, dict] = field(default_factory=dict)

    def drawn(self, t: int, probe: str) -> int:
        v = self.null.get(t, {}).get((probe, "out"))
        return 0 if v is None else v.shape[1]


def _value(sums: dict, probe: str, stat: str, row: int, n: float) -> np.ndarray:
    if stat == "rho":
        inc, dec = sums[(probe, "inc")][row], sums[(probe, "dec")][row]
        tot = inc + dec
        return np.where(tot > 0, inc / np.maximum(tot, 1), np.nan)
    return sums[(probe, "out" if stat == "gamma" else "tilt")][row] / n


def _family(recs: list[dict], values: np.ndarray, spec: TestSpec, alpha: float) -> list[dict]:
    """Holm across the depths of one test (the random-direction null), then each depth's side condition and
    per-layer mark."""
    from powerlens.analysis.stats import holm

    out = [dict(r) for r in recs]
    p = np.array([r[Field.P] for r in recs], dtype=float)
    lo, hi = dc.holm_interval([r[Field.P_LO] for r in recs], [r[Field.P_HI] for r in recs])
    for r, a, b, c in zip(out, holm(p), lo, hi):
        r[Field.P_HOLM], r[Field.P_HOLM_LO], r[Field.P_HOLM_HI] = float(a), float(b), float(c)
        r[Field.MC_SIG] = dc.decide(b, c, alpha)
    t_lo, t_hi = dc.holm_interval([r["tie_lo"] for r in recs], [r["tie_hi"] for r in recs])
    for r, b, c in zip(out, t_lo, t_hi):  # undecided by the tie-break itself: extending cannot help
        r[Field.TIE_BOUND] = dc.decide(b, c, alpha) == dc.UNDECIDED
    thr = spec.threshold
    for r, v in zip(out, values):
        side = dc.YES if thr is None else dc.compare(float(v), thr, above=(spec.tail == "upper"))
        saturated = bool(r[Field.TIES] >= SATURATED_TIES) if not np.isnan(r[Field.TIES]) else False
        r[Field.SIDE], r[Field.SATURATED] = side, saturated
        r[Field.SIG] = dc.NO if saturated else dc.both(r[Field.MC_SIG], side)
    return out


@dataclass(frozen=True)
class Variant:
    name: str
    stream: int  # 0: the main stream; k: the k-th robustness stream
    row: int  # the token subset's row in the stream's sums (0: all tokens)
    tag: str  # added to the tie-break key ("" for main)


def variants_of(names: tuple[str, ...]) -> list[Variant]:
    out = []
    for v in names:
        if v == "main":
            out.append(Variant("main", 0, 0, ""))
        elif v.startswith("seed"):
            out.append(Variant(v, int(v[4:]), 0, v))
        elif v.startswith("third"):
            out.append(Variant(v, 0, 1 + int(v[5:]), v))
        else:
            raise ValueError(f"unknown robustness variant {v!r}")
    return out


def _depths(probe: str, S: int) -> range:
    return range(S - 1, S) if probe == "first" else range(S)


def layer_columns(spec: TestSpec, values, nulls, members, us, ues, alpha: float, chains=None) -> list[dict]:
    """One test at every depth, as the dynamics table's columns: per depth the lead's value ``values[t]``
    against the random draws ``nulls[t]`` (tie-break ``us[t]``) and, for a test with ``ranked``, its rank among each
    ranking null's members ``members[key][t]`` (tie-break ``ues[key][t]``, :data:`~powerlens.analysis.nulls.
    RANKING`) and the lead's rank sum among the members' chains ``chains[key]`` (per depth the member each chain
    stands on, :func:`powerlens.analysis.tracking.track`; None: not tracked); Holm across the depths, side
    conditions and per-layer marks. The one path from statistics to columns (the unit tests plant effects
    through it)."""
    recs = []
    for t, v in enumerate(values):
        rec = random_direction_test(float(v), nulls[t], us[t], spec.tail)
        for key, null in RANKING.items() if spec.ranked else ():
            rec.update(null.columns(float(v), np.asarray(members[key][t], dtype=float), ues[key][t], spec.tail))
        recs.append(rec)
    for key, null in RANKING.items() if spec.ranked else ():
        _, beaten, tied, rank = null.fields[:4]
        got = [np.array([float(r[f]) for r in recs]) for f in (rank, beaten, tied)]
        test = (chain_test([np.asarray(m, dtype=float) for m in members[key]], [float(v) for v in values],
                           chains[key], *got, spec.tail) if chains and chains.get(key) else None)
        for r in recs:
            r.update(null.chain_columns(test))
    out = []
    for v, r in zip(values, _family(recs, np.asarray(values, dtype=float), spec, alpha)):
        out.append({spec.value: float(v), **{spec.col(f): r[f] for f in spec.fields},
                    # the range the tie-break alone spans: the planner's, dropped from the written table
                    spec.col("tie_lo"): r["tie_lo"], spec.col("tie_hi"): r["tie_hi"]})
    return out


def _evaluate(v: Variant, sums: Sums, n: float, S: int, probes, R_of: dict, seed: int, alpha: float,
              chains: dict | None = None) -> list[dict]:
    """One variant's tests at every depth: per-depth column dicts (``<test>_tie_lo`` / ``_tie_hi`` included, for
    the planner; dropped from the written table). ``chains``: per ranking null the members' chains through the
    depths (:func:`powerlens.analysis.tracking.track`)."""
    rows: list[dict] = [{} for _ in range(S)]
    for spec in TESTS:
        if spec.probe not in probes:
            continue
        ts = list(_depths(spec.probe, S))
        values = [float(_value(sums.lead[t], spec.probe, spec.stat, v.row, n)[0]) for t in ts]
        nulls = [_value(sums.null[t], spec.probe, spec.stat, v.row, n)[:R_of[(v.name, spec.prefix, t)]] for t in ts]
        members = ({k: [_value(sums.ranked[k][t], spec.probe, spec.stat, v.row, n) for t in ts] for k in sums.ranked}
                   if spec.ranked else {})
        us = [tie_uniform(seed, t, spec.prefix + v.tag) for t in ts]
        ues = {k: [tie_uniform(seed, t, f"{spec.prefix}_{k}{v.tag}") for t in ts] for k in sums.ranked}
        mine = {k: [c[t] for t in ts] for k, c in (chains or {}).items()} if spec.ranked else None
        for t, cols in zip(ts, layer_columns(spec, values, nulls, members, us, ues, alpha, mine)):
            rows[t].update(cols)
    return rows


def _frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame([{"layer": t, **r} for t, r in enumerate(rows)])


def _plan(v: Variant, rows: list[dict], mode: str, crit: dict, R_of: dict) -> dict:
    """Where more draws can change a verdict (paper.md section 4d): per criterion read in ``mode``, the layers
    :func:`powerlens.analysis.parts.to_extend` names that are below the cap and not decided by their ties.
    Returns (variant, test prefix, depth) -> the next draw count."""
    df = _frame(rows)
    lts = {r.test: layer_tests(df, r.test) for r in readings(mode)}
    r_cap = int(crit["null_draws_cap"])

    def extendable(part: pt.Part, i: int) -> bool:
        spec, lt = part.reading.test, lts[part.reading.test]
        t = int(lt.layers[i])
        if R_of[(v.name, spec.prefix, t)] >= r_cap:
            return False
        if part.tau is not None:  # the tie-break alone straddles the part's per-layer threshold
            lo, hi = df.loc[t, spec.col("tie_lo")], df.loc[t, spec.col("tie_hi")]
            return not (lo < part.tau <= hi)
        return not bool(df.loc[t, spec.col(Field.TIE_BOUND)])

    need = {}
    for claim in dict.fromkeys(r.claim for r in readings(mode)):
        parts = [pt.evaluate(r, lts[r.test], crit) for r in readings(mode, claim)]
        for part, i in pt.to_extend(parts, extendable):
            spec = part.reading.test
            t = int(lts[spec].layers[i])
            cur = R_of[(v.name, spec.prefix, t)]
            need[(v.name, spec.prefix, t)] = next(x for x in dc.extension_steps(cur, r_cap) if x > cur)
    return need


def _chains(dirs, layer_of, S: int) -> dict[str, list]:
    """Per ranking null, its members followed through the depths (:func:`powerlens.analysis.tracking.track`)."""
    r = [dirs[layer_of(t)].lead.shape[1] for t in range(S)]
    return {k: track([n.members(dirs[layer_of(t)], r[t]) for t in range(S)], r) for k, n in RANKING.items()}


def _directions(dirs, layer_of, S: int, probes) -> tuple[dict, dict, dict]:
    """Per depth: each probe's direction block, each ranking null's members of the lead's kind (by the null's
    key) and each probe's dimension."""
    own = {"layer": "lead", "layer_M": "lead_M", "layer_Ft": "lead_Ft", "attn": "lead", "ffn": "lead"}
    T = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    lead, ranked, dims = {}, {k: {} for k in RANKING}, {}
    for t in range(S):
        d, r = dirs[layer_of(t)], dirs[layer_of(t)].lead.shape[1]
        blocks = {k: n.members(d, r) for k, n in RANKING.items()}  # members of the lead's own kind (section 4d)
        lead[t], dims[t] = {}, {}
        for k in ranked:
            ranked[k][t] = {}
        for p in probes:
            D = dirs[layer_of(0)].lead if p == "first" else getattr(d, own[p])
            if D is None or (p == "first" and t != S - 1):
                continue
            lead[t][p] = [(T(D), D.shape[1])]
            dims[t][p] = D.shape[1]
            for k, B in blocks.items() if p in ("layer", "attn", "ffn") else ():
                ranked[k][t][p] = [(T(B), r)] if B is not None and B.shape[1] else []
    return lead, ranked, dims


def decide_run(states: States, dirs, layer_of, *, mode: str, crit: dict, seed: int, r0: int,
               variants: tuple[str, ...] = ("main",), extend: bool = True
               ) -> tuple[dict[str, "object"], dict[str, np.ndarray]]:
    """Every test of :data:`~powerlens.analysis.verdict_tests.TESTS` at every depth, for each variant: per variant
    a DataFrame (one row per depth), and the main variant's first R0 draws per depth (the .npz's
    ``null_<q>_lead``, so a reader can recompute each p) with R0 itself (``null_R0``). ``mode``: which criteria
read the run (:data:`~powerlens.analysis.verdict_tests.READINGS`); ``crit``: the decision rule
    (:func:`~powerlens.analysis.verdict_tests.decision_rule`: the claims' numbers, alpha and the most draws a test
    is extended to); ``r0``: the configured ``null_draws`` (R0 is raised to what the rules need). ``extend`` False: no
    test goes past R0 draws (random weights of the paper's architectures, never evidence)."""
    fixed_mmap_threshold()  # the null's (tokens, draws) blocks otherwise fragment glibc's heap (API callers too)
    S, probes = states.depths, states.probes()
    vs = variants_of(variants)
    subsets = ["all"] + [f"third{j}" for j in range(3)] if any(v.row for v in vs) else ["all"]
    W = subset_weights(states.prompt, subsets)
    n_row = W.sum(1).numpy()
    lead_b, ranked_b, dims = _directions(dirs, layer_of, S, probes)
    probes = tuple(p for p in probes if p in lead_b[S - 1])  # a lead that exists (F~: pre-norm models only)
    lead = {t: probe_sums(states, t, tuple(lead_b[t]), lead_b[t], W) for t in range(S)}
    ranked = {k: {t: probe_sums(states, t, tuple(b[t]), b[t], W) if any(b[t].values()) else
                  {(p, q): np.zeros((len(subsets), 0)) for p in b[t] for q in ("out", "tilt", "inc", "dec")}
                  for t in range(S)} for k, b in ranked_b.items()}
    R0 = first_draws(mode, S, crit, r0)
    chains = _chains(dirs, layer_of, S)
    frames, arrays = {}, {}
    for key in sorted({v.stream for v in vs}):
        mine = [v for v in vs if v.stream == key]
        run = _Stream(states=states, dims=dims, W=W, n_row=n_row, probes=probes, seed=seed, mode=mode, crit=crit,
                      extend=extend, chains=chains)
        results, sums = run.decide(mine, key, Sums(lead=lead, ranked=ranked), R0)
        for v in mine:
            f = _frame(results[v.name])
            frames[v.name] = f[[c for c in f.columns if not c.endswith(("_tie_lo", "_tie_hi"))]]
        if key == 0:
            for q in ("out", "tilt", "inc", "dec"):
                arrays[f"null_{q}_lead"] = np.stack([sums.null[t][("layer", q)][0, :R0] for t in range(S)])
            arrays["null_R0"] = np.array(R0)
    return frames, arrays


@dataclass
class _Stream:
    """One stream of random draws decided for its variants: draw R0 for every probe, evaluate, extend where
    :func:`_plan` says a verdict can move, until nothing is left to extend."""

    states: States
    dims: dict
    W: torch.Tensor
    n_row: np.ndarray
    probes: tuple
    seed: int
    mode: str
    crit: dict
    extend: bool
    chains: dict

    def decide(self, mine: list[Variant], key: int, sums: Sums, R0: int) -> tuple[dict, Sums]:
        S = self.states.depths
        d = int(self.states.x[0].shape[-1])
        streams: dict[int, Stream] = {}
        read = {s.prefix for s in read_tests(self.mode)}
        probe_of = {s.prefix: s.probe for s in TESTS}
        R_of = {(v.name, s.prefix, t): R0 for v in mine for s in TESTS for t in _depths(s.probe, S)}
        need_t = {t: {p: (0, R0) for p in self.dims[t]} for t in range(S)}
        while True:
            got = null_sums(self.states, need_t, self.dims,
                            lambda r: streams.setdefault(r, Stream(d, r, self.seed, key)), self.W)
            for t, part in got.items():
                old = sums.null.setdefault(t, {})
                for k, x in part.items():
                    old[k] = x if k not in old else np.concatenate([old[k], x], axis=1)
            results = {v.name: _evaluate(v, sums, float(self.n_row[v.row]), S, self.probes, R_of, self.seed,
                                         self.crit["alpha"], self.chains) for v in mine}
            need = {}
            if self.extend:
                for v in mine:
                    need.update({k: R for k, R in _plan(v, results[v.name], self.mode, self.crit, R_of).items()
                                 if k[1] in read})
            if not need:
                return results, sums
            R_of.update(need)  # every key strictly grows towards the cap: the loop ends
            need_t = {}
            for (_, prefix, t), R in need.items():
                p = probe_of[prefix]
                have = sums.drawn(t, p)
                if R > have:
                    start, stop = need_t.setdefault(t, {}).get(p, (have, R))
                    need_t[t][p] = (start, max(stop, R))

"""The verdict statistics, decided without hanging on noise (paper.md sections 4b and 4c, revision 4).

For every depth t of the model and every test below, the lead's statistic (F_t's leading direction, the
paper's v_{1,t}) is compared with two nulls measured on the same tokens in the same pass:

* the Monte Carlo null of R random subspaces of the lead's dimension (seeded stream, :class:`probes.Stream`);
  p = (#{null beyond lead} + U (1 + #{null == lead})) / (1 + R), U a seeded tie-break;
* the eigen-direction null: *all* of F_t's other eigen-directions with |lambda| > 1e-9 |lambda_1| (the
  spectra step's ``eig_null_*`` arrays), enumerated, so it has no Monte Carlo error. A power step favours the
  leading eigenvector over F's other eigenvectors; a common drift of the corpus favours whatever direction it
  points along (section 4c).

Each test's p is an interval (:mod:`powerlens.analysis.decisions`), Holm across the model's depth per test and
null, and the decision is "yes", "no" or "undecided"; a layer counts as significant only when both nulls say
yes, the statistic is on the claimed side of its threshold (tilt > 0, rho > 0.5; tilt < 0 for the negative
tests) and the layer is not saturated (half or more of the draws tie with the lead, section 4). A Monte Carlo
test that stays undecided is extended along its stream, the layers and statistics that need it only, R0 ->
10 R0 -> 100 R0 (capped at 200000), unless the tie-break alone spans alpha (column ``<test>_tie_bound``: ties
with the lead, which more draws do not narrow, decide it; it stays undecided).

Variants (table_robustness): ``main`` (the whole corpus, the main stream), ``seed1``..``seed3`` (the whole
corpus, three other streams and tie-breaks), ``third0``..``third2`` (interleaved thirds of the prompts, the main
stream, each with its own Holm).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from powerlens.analysis import decisions as dc
from powerlens.analysis.dynamics.probes import States, Stream, null_sums, probe_sums, subset_weights
from powerlens.analysis.nulls import SATURATED_TIES, tie_uniform
from powerlens.core.runtime import fixed_mmap_threshold

# (probe, statistic, tail, tested against the eigen-direction null too, extended when undecided)
TESTS = (("layer", "gamma", "upper", False, True), ("layer", "rho", "upper", True, True),
         ("layer", "tilt", "upper", True, True), ("attn", "tilt", "upper", True, True),
         ("attn", "tilt", "lower", True, True), ("ffn", "tilt", "upper", True, True),
         ("ffn", "tilt", "lower", True, True), ("first", "gamma", "upper", False, True),
         *((p, s, "upper", False, False) for p in ("layer_M", "layer_Ft") for s in ("gamma", "rho", "tilt")))
THRESHOLD = {"gamma": None, "rho": 0.5, "tilt": 0.0}
VARIANTS = ("main", "seed1", "seed2", "seed3", "third0", "third1", "third2")


def column(probe: str, stat: str, tail: str = "upper") -> str:
    """The column prefix of a test: ``tilt``, ``rho_M``, ``attn_tilt_neg``, ``first_lead_gamma``..."""
    base = {"layer": stat, "layer_M": f"{stat}_M", "layer_Ft": f"{stat}_Ft", "attn": f"attn_{stat}",
            "ffn": f"ffn_{stat}", "first": f"first_lead_{stat}"}[probe]
    return base + ("_neg" if tail == "lower" else "")


@dataclass
class Sums:
    """One stream's sums at every depth: the lead's (k subsets, 1), the eigen members' (k, M) and the random
    draws' (k, R so far), per (probe, quantity)."""

    lead: dict[int, dict]
    eig: dict[int, dict]
    null: dict[int, dict] = field(default_factory=dict)

    def drawn(self, t: int) -> int:
        v = next(iter(self.null[t].values()), None) if t in self.null else None
        return 0 if v is None else v.shape[1]


def _value(sums: dict, probe: str, stat: str, row: int, n: float) -> np.ndarray:
    if stat == "rho":
        inc, dec = sums[(probe, "inc")][row], sums[(probe, "dec")][row]
        tot = inc + dec
        return np.where(tot > 0, inc / np.maximum(tot, 1), np.nan)
    return sums[(probe, "out" if stat == "gamma" else "tilt")][row] / n


def _beyond(null: np.ndarray, v: float, tail: str) -> tuple[int, int]:
    return int(np.sum(null > v if tail == "upper" else null < v)), int(np.sum(null == v))


def _one_test(v: float, null: np.ndarray, eig: np.ndarray | None, tail: str, u: float, ue: float) -> dict:
    """One depth's test of the lead value v against the random draws and (if given) the eigen members."""
    null = null[~np.isnan(null)]
    R = len(null)
    above, tied = _beyond(null, v, tail)
    lo, hi = dc.mc_interval(above, tied, R) if R and not np.isnan(v) else (np.nan, np.nan)
    rec = {"p": (above + u * (1 + tied)) / (1 + R) if R and not np.isnan(v) else np.nan, "R": R,
           "ties": tied / R if R else np.nan, "p_lo": lo, "p_hi": hi,
           # the range the tie-break alone spans (no Monte Carlo error): more draws cannot narrow it
           "tie_lo": above / R if R and not np.isnan(v) else np.nan,
           "tie_hi": (above + tied) / R if R and not np.isnan(v) else np.nan,
           "null_median": float(np.median(null)) if R else np.nan,
           "null_q95": float(np.quantile(null, 0.95)) if R else np.nan,
           "pct": float(100.0 * np.mean(null < v)) if R else np.nan}
    if eig is not None:
        eig = eig[~np.isnan(eig)]
        M = len(eig)
        ea, et = _beyond(eig, v, tail)
        # no member (a rank-1 F): the test has no power, it cannot decide (interval [0, 1])
        elo, ehi = (np.nan, np.nan) if np.isnan(v) else dc.exact_interval(ea, et, M) if M else (0.0, 1.0)
        rec.update({"eig_p": (ea + ue * (1 + et)) / (1 + M) if M and not np.isnan(v) else np.nan, "eig_M": M,
                    "eig_p_lo": elo, "eig_p_hi": ehi})
    return rec


def _family(recs: list[dict], values: np.ndarray, stat: str, tail: str, alpha: float, eigen: bool) -> list[dict]:
    """Holm across the depths of one test (each null apart), then each depth's decision."""
    from powerlens.analysis.stats import holm

    out = [dict(r) for r in recs]
    for pre in ("", "eig_") if eigen else ("",):
        p = np.array([r.get(pre + "p", np.nan) for r in recs], dtype=float)
        lo, hi = dc.holm_interval([r.get(pre + "p_lo", np.nan) for r in recs],
                                  [r.get(pre + "p_hi", np.nan) for r in recs])
        for r, a, b, c in zip(out, holm(p), lo, hi):
            r[pre + "p_holm"], r[pre + "p_holm_lo"], r[pre + "p_holm_hi"] = float(a), float(b), float(c)
            r[pre + "sig"] = dc.decide(b, c, alpha)
    t_lo, t_hi = dc.holm_interval([r["tie_lo"] for r in recs], [r["tie_hi"] for r in recs])
    for r, b, c in zip(out, t_lo, t_hi):  # undecided by the tie-break itself: extending cannot help
        r["tie_bound"] = dc.decide(b, c, alpha) == dc.UNDECIDED
        del r["tie_lo"], r["tie_hi"]
    thr = THRESHOLD[stat]
    for r, v in zip(out, values):
        side = dc.YES if thr is None else dc.compare(float(v), thr, above=(tail == "upper"))
        saturated = bool(r["ties"] >= SATURATED_TIES) if not np.isnan(r["ties"]) else False
        r["saturated"] = saturated
        r["mc_sig"] = r.pop("sig")
        parts = [r["mc_sig"], side] + ([r["eig_sig"]] if eigen else [])
        r["sig"] = dc.NO if saturated else dc.both(*parts)
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


def _evaluate(v: Variant, sums: Sums, n: float, S: int, probes, R_of: dict, seed: int, alpha: float
              ) -> tuple[list[dict], dict]:
    """One variant's tests at every depth: per-depth column dicts, and the tests to extend (key -> next R)."""
    rows: list[dict] = [{} for _ in range(S)]
    need = {}
    for probe, stat, tail, eigen, extend in TESTS:
        if probe not in probes:
            continue
        col, ts = column(probe, stat, tail), _depths(probe, S)
        recs, values = [], []
        for t in ts:
            val = float(_value(sums.lead[t], probe, stat, v.row, n)[0])
            R = R_of[(v.name, col, t)]
            null = _value(sums.null[t], probe, stat, v.row, n)[:R]
            eig = _value(sums.eig[t], probe, stat, v.row, n) if eigen else None
            recs.append(_one_test(val, null, eig, tail, tie_uniform(seed, t, col + v.tag),
                                  tie_uniform(seed, t, col + "_eig" + v.tag)))
            values.append(val)
        for t, val, r in zip(ts, values, _family(recs, np.array(values), stat, tail, alpha, eigen)):
            rows[t][column(probe, stat)] = val
            rows[t].update({f"{col}_{k}": x for k, x in r.items() if not (tail == "lower" and k in
                                                                           ("null_median", "null_q95"))})
            cur = R_of[(v.name, col, t)]
            nxt = [x for x in dc.extension_steps(cur) if x > cur]
            if extend and r["sig"] == dc.UNDECIDED and r["mc_sig"] == dc.UNDECIDED and not r["tie_bound"] and nxt:
                need[(v.name, col, t)] = nxt[0]
    return rows, need


def _directions(dirs, layer_of, S: int, probes) -> tuple[dict, dict, dict]:
    """Per depth: each probe's direction block, the eigen members' blocks and each probe's dimension."""
    own = {"layer": "lead", "layer_M": "lead_M", "layer_Ft": "lead_Ft", "attn": "lead", "ffn": "lead"}
    T = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    lead, eig, dims = {}, {}, {}
    for t in range(S):
        d = dirs[layer_of(t)]
        members = [(T(B), r) for B, r in ((d.eig_r1, 1), (d.eig_r2, 2)) if B is not None and B.shape[1]]
        lead[t], eig[t], dims[t] = {}, {}, {}
        for p in probes:
            D = dirs[layer_of(0)].lead if p == "first" else getattr(d, own[p])
            if D is None or (p == "first" and t != S - 1):
                continue
            lead[t][p] = [(T(D), D.shape[1])]
            dims[t][p] = D.shape[1]
            if p in ("layer", "attn", "ffn"):
                eig[t][p] = members
    return lead, eig, dims


def decide_run(states: States, dirs, layer_of, *, alpha: float, seed: int, r0: int,
               variants: tuple[str, ...] = ("main",), extend: bool = True
               ) -> tuple[dict[str, "object"], dict[str, np.ndarray]]:
    """Every test of :data:`TESTS` at every depth, for each variant: per variant a DataFrame (one row per
    depth), and the main variant's first R0 draws per depth (the .npz's ``null_<q>_lead``, so a reader can
    recompute each p). ``extend`` False: no test goes past R0 draws (random-weight models, never evidence: an
    undecided layer stays undecided)."""
    import pandas as pd

    fixed_mmap_threshold()  # the null's (tokens, draws) blocks otherwise fragment glibc's heap (API callers too)
    S, probes = states.depths, states.probes()
    vs = variants_of(variants)
    subsets = ["all"] + [f"third{j}" for j in range(3)] if any(v.row for v in vs) else ["all"]
    W = subset_weights(states.prompt, subsets)
    n_row = W.sum(1).numpy()
    lead_b, eig_b, dims = _directions(dirs, layer_of, S, probes)
    probes = tuple(p for p in probes if p in lead_b[S - 1])  # a lead that exists (F~: pre-norm models only)
    lead = {t: probe_sums(states, t, tuple(lead_b[t]), lead_b[t], W) for t in range(S)}
    eig = {t: probe_sums(states, t, tuple(eig_b[t]), eig_b[t], W) if any(eig_b[t].values()) else
           {(p, q): np.zeros((len(subsets), 0)) for p in eig_b[t] for q in ("out", "tilt", "inc", "dec")}
           for t in range(S)}
    frames, arrays = {}, {}
    d = int(states.x[0].shape[-1])
    for key in sorted({v.stream for v in vs}):
        mine = [v for v in vs if v.stream == key]
        streams: dict[int, Stream] = {}
        sums = Sums(lead=lead, eig=eig)
        R_of = {(v.name, column(p, s, tl), t): r0 for v in mine for p, s, tl, *_ in TESTS for t in _depths(p, S)}
        need_t = {t: (0, r0) for t in range(S)}
        while True:
            got = null_sums(states, need_t, dims, lambda r: streams.setdefault(r, Stream(d, r, seed, key)), W)
            for t, part in got.items():
                sums.null[t] = part if t not in sums.null else {k: np.concatenate([sums.null[t][k], x], axis=1)
                                                                for k, x in part.items()}
            results, need = {}, {}
            for v in mine:
                results[v.name], nd = _evaluate(v, sums, float(n_row[v.row]), S, probes, R_of, seed, alpha)
                need.update(nd)
            if not need or not extend:
                break
            R_of.update(need)  # every key strictly grows towards the cap: the loop ends
            need_t = {}
            for (_, _, t), R in need.items():
                if R > sums.drawn(t):
                    need_t[t] = (sums.drawn(t), max(R, need_t.get(t, (0, 0))[1]))
        for v in mine:
            frames[v.name] = pd.DataFrame([{"layer": t, **r} for t, r in enumerate(results[v.name])])
        if key == 0:
            for q in ("out", "tilt", "inc", "dec"):
                arrays[f"null_{q}_lead"] = np.stack([sums.null[t][("layer", q)][0, :r0] for t in range(S)])
    return frames, arrays

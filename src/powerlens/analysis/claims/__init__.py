"""The claims audit: each claim C1-C10 of paper.md (:data:`CLAIMS`, one object each), judged by the
pre-registered criteria of paper.md sections 4b and 4d (numbers from the config's ``claims:`` block, fixed
before any run), with the measured value, the null it was judged against, the claim's one p beside the smallest
p its rule could reach at this resolution, and a verdict.

Verdicts (paper.md sections 4b and 4d, revision 5): "reproduced", "not reproduced", "inconclusive" (the outcome
rests on tests left undecided after the Monte Carlo extension, or it changes with the Monte Carlo seed),
"underpowered" (the criterion could not have passed at this resolution, or its pass rests on a clause that could
not have failed), "not judged" (no trained model of the family ran). A family's verdict uses trained models only
(every trained model of the family must pass); a family represented by random-weight twins only is "not judged"
(its numbers are shown, labelled): random weights are never evidence. Each trained model's matched controls (the
trained model with random attention weights rescaled to the trained |lambda_1| and score scale, several seeds,
paper.md section 4e) are judged by the same criterion and shown beside it ("passes in k of n seeds": ``controls``),
with the training comparison beside the verdict (``training``).
Each criterion is a small function of one model's tables (``criteria``: the synthetic-layer and C5 criteria;
``c9``: C9's; ``layer_criteria``: those read from the per-layer tests), so it can be tested on constructed cases;
``registry`` holds the claims (:data:`CLAIMS`) and their criteria; ``flip`` says what would flip a verdict;
``robustness`` judges every verdict again under the robustness variants; ``view`` makes the verdict view a reader
scans.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from powerlens.analysis.claims.c9 import c9
from powerlens.analysis.claims.controls import ControlSeeds
from powerlens.analysis.claims.criteria import (
    CONTROL_SENTENCE,
    FIG,
    INCONCLUSIVE,
    NOT_JUDGED,
    NOT_REPRODUCED,
    REPRODUCED,
    TEXT,
    UNDERPOWERED,
    Beside,
    Verdict,
    albert_size,
    c4,
    c5,
    theory_verdicts,
)
from powerlens.analysis.claims.layer_criteria import c1, c6, c7, c8, c10, count, n_saturated, parts, share_significant
from powerlens.analysis.claims.registry import BY_ID, CLAIMS, Claim, Criterion, Family
from powerlens.analysis.claims.training import Training, training
from powerlens.analysis.claims.view import (
    VIEW_MISSING,
    VIEW_NOT_APPLICABLE,
    is_twin_row,
    verdict_class,
    verdict_column_class,
    verdict_view,
)
from powerlens.analysis.verdict_tests import AT_LEAST, readings
from powerlens.core.fmt import weights_text
from powerlens.models.adapters import ADAPTERS


def family_of(arch: str, weights_labels: list[str] | None = None) -> str:
    """Display name of an architecture's family (its adapter's), with the weights of its trained models when
    they all share one kind: "BERT (trained)", "Llama (trained, 4-bit)"; a family of twins only: "BERT"."""
    fam = getattr(ADAPTERS.get(arch), "family", arch)
    q = {lab.split(" (")[0].replace("trained weights", "trained") for lab in (weights_labels or [])
         if lab.startswith("trained")}
    return f"{fam} ({q.pop()})" if len(q) == 1 and all(lab.startswith("trained") for lab in weights_labels) else fam


TWINS_ONLY = "random weights only: twins are never evidence"


CONTROL_LABEL = "random attention weights"  # what a matched control's weights are, everywhere a reader sees it


#: table_claims' columns that hold one number or one word each, what every output reads instead of the words
#: ("p value": the claim's p; a family's is its trained models' largest, as each must pass).
NUMBERS = ("outcome", "p value", "attainable p value", "specificity p value", "first failed part",
           "control outcome", "control p value", "control seeds passing", "control seeds", "control seeds undecided")
#: Where the claim is judged (:attr:`Claim.judged_in`), and the same criterion in its other mode
#: (:class:`~powerlens.analysis.claims.criteria.Beside`, beside the verdict, never part of it): the mode, the word
#: and the p, one column each
JUDGED_IN, OTHER = "judged in", ("other reading", "other reading outcome", "other reading p value")
#: Beside the verdict, never part of it (paper.md section 4e): the training comparison in words and its p (a
#: family's: its trained models' largest)
TRAINING, TRAINING_P = "training comparison", "training p value"


def row(claim: str, family: str, models: str, criterion: str, v: Verdict, tested: bool = True,
        control: str = "-", cv: ControlSeeds | None = None, labels: dict[str, str] | None = None,
        trained: dict[str, Training] | None = None) -> dict:
    """One row of the claims table from a (possibly combined) verdict, with the matched controls' words (``cv``:
    every control seed's verdict), then the same in numbers (:data:`NUMBERS`)."""
    verdict = v.word if tested else f"{NOT_JUDGED} ({TWINS_ONLY})"
    nan = float("nan")
    return {"claim": claim, "statement": BY_ID[claim].statement, "family": family, "models": models,
            "criterion": criterion,
            "measured": v.measured, "null": v.null, "claim p": v.claim_p, "attainable p": v.attainable,
            "specificity p": v.specificity, "verdict": verdict,
            "failed part": (v.failed or "-") if tested and not v.ok else "-",
            "would flip if": (v.flip or "-") if tested else "-", "matched control": control,
            "control verdict": "-" if cv is None else cv.text(labels or {}),
            "p": v.p_short, "figure": BY_ID[claim].figure,
            **dict(zip(NUMBERS, (v.word if tested else NOT_JUDGED, v.p, v.p_floor, v.p_spec,
                                 (v.first_failed or None) if tested else None,
                                 None if cv is None else cv.outcome, nan if cv is None else cv.p,
                                 None if cv is None else cv.k, None if cv is None else cv.n,
                                 None if cv is None else cv.undecided))),
            JUDGED_IN: BY_ID[claim].judged_in,
            **dict(zip(OTHER, ("-", "-", nan) if v.beside is None or not tested else v.beside)),
            **_training_columns(trained or {}, labels or {})}


def _training_columns(trained: dict[str, Training], labels: dict[str, str]) -> dict:
    """:data:`TRAINING` and :data:`TRAINING_P` of a family's row ("-" and NaN where no control ran)."""
    if not trained:
        return {TRAINING: "-", TRAINING_P: float("nan")}
    text = (next(iter(trained.values())).text() if len(trained) == 1 else
            "; ".join(f"{labels.get(m, m)}: {t.text()}" for m, t in trained.items()))
    return {TRAINING: text, TRAINING_P: _largest(t.p for t in trained.values())}


def training_of(fam: Family, claim: str, models, seed: int = 0) -> dict[str, Training]:
    """The training comparison of each of ``models`` with its controls, on the claim's first reading "in at
    least u layers" (claims judged by random directions; none for the others). ``seed``: of the sign flips past
    20 layers (a fixed stream: the p is a property of the tables, not of the run's seed)."""
    r = next((x for x in readings(claim=claim) if x.rule == AT_LEAST), None)
    if r is None:
        return {}
    out = {}
    for m in models:
        ctl = [fam.dynamics(x, r.mode) for x in fam.controls.get(m, [])]
        t = training(fam.dynamics(m, r.mode), ctl, r.test, seed) if ctl else None
        if t is not None:
            out[m] = t
    return out


#: Each claim's p with Holm's adjustment across the trained families that judged it (two or more; paper.md
#: section 4e): one line beside the per-family verdicts, which stay unadjusted.
HOLM_ACROSS = "p value, Holm across families"


def across_families(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (table_claims' rows) with :data:`HOLM_ACROSS`: per claim, Holm's adjusted p over the trained
    families' claim p (:func:`powerlens.analysis.stats.holm`) where two or more have one; NaN elsewhere (the
    synthetic layers, twins, one family)."""
    from powerlens.analysis.stats import holm

    df = df.copy()
    df[HOLM_ACROSS] = np.nan
    if not len(df):
        return df
    own = (df["outcome"] != NOT_JUDGED) & ~df["family"].isin(["synthetic", "-"]) & df["p value"].notna()
    for _, idx in df[own].groupby("claim").groups.items():
        if len(idx) >= 2:
            df.loc[idx, HOLM_ACROSS] = holm(df.loc[idx, "p value"].to_numpy(dtype=float))
    return df


def _largest(ps) -> float:
    """A family's p from its models' (every model must pass: the largest; NaN where any has none)."""
    ps = [float(p) for p in ps]
    return float("nan") if not ps or any(np.isnan(ps)) else max(ps)


def combine(results: dict[str, Verdict], labels: dict[str, str]) -> Verdict:
    """A family's verdict: every model must pass; one model failing outright fails it, else one underpowered
    model makes it underpowered (it could not pass), else one inconclusive model makes it inconclusive.
    Measured values, nulls, p values and failed parts listed by model."""
    name = lambda m: labels.get(m, m)  # noqa: E731
    fails = [m for m, r in results.items() if r.failed_outright]
    weak = [m for m, r in results.items() if r.underpowered] if not fails else []
    incon = [m for m, r in results.items() if r.inconclusive] if not fails and not weak else []
    movers_keys = fails or weak or incon
    bad = [(m, results[m].failed) for m in movers_keys]
    failed = "" if not bad else bad[0][1] if len(results) == 1 else "; ".join(f"{name(m)}: {x}" for m, x in bad)
    ok = all(r.ok for r in results.values())
    movers = results if ok else {m: results[m] for m in movers_keys}
    flip = (next(iter(movers.values())).flip if len(results) == 1 else
            ("any one of: " if ok else "each of: ") + "; ".join(f"{name(m)}: {r.flip}" for m, r in movers.items()))
    each = lambda f: (getattr(next(iter(results.values())), f) if len(results) == 1 else  # noqa: E731
                      "; ".join(f"{name(m)}: {getattr(r, f)}" for m, r in results.items()))
    own = {m: results[m].failed_parts or (results[m].failed,) for m, _ in bad}
    parts = tuple(x if len(results) == 1 else f"{name(m)}: {x}" for m, xs in own.items() for x in xs)
    return Verdict(ok, each("measured"), each("null"), failed, inconclusive=bool(incon), flip=flip,
                   beside=_beside(results),
                   underpowered="; ".join(f"{name(m)}: {results[m].underpowered}" for m in weak)
                   if len(results) > 1 else (results[weak[0]].underpowered if weak else ""),
                   claim_p=each("claim_p"), p_short=each("p_short"), attainable=each("attainable"),
                   specificity=each("specificity"), failed_parts=parts,
                   **{k: _largest(getattr(r, k) for r in results.values()) for k in ("p", "p_floor", "p_spec")})


def _beside(results: dict[str, Verdict]) -> Beside | None:
    """A family's other reading (:class:`Beside`), combined as its verdict is: every model must pass there; one
    model failing outright fails it, else an underpowered one, else an inconclusive one decides the word; the
    largest p. None unless every model has one."""
    bs = [r.beside for r in results.values()]
    if not bs or any(b is None for b in bs):
        return None
    word = next((w for w in (NOT_REPRODUCED, UNDERPOWERED, INCONCLUSIVE) if any(b.word == w for b in bs)),
                REPRODUCED)
    return Beside(bs[0].where, word, _largest(b.p for b in bs))


def control_text(results: dict[str, Verdict], labels: dict[str, str]) -> str:
    """The matched controls' verdicts in words, one per trained model: "<control>: <word> (claim p ...)"."""
    if not results:
        return "-"
    return "; ".join(f"{labels.get(c, c)} ({CONTROL_LABEL}): {v.word}" + (f" (claim p {v.p_short})"
                                                                          if v.p_short != "-" else "")
                     for c, v in results.items())


def families(meta: dict[str, dict]) -> dict[str, list[str]]:
    """Family display name -> its models (an architecture's, with the precision of quantized weights)."""
    by_arch: dict[str, list[str]] = {}
    for m, x in meta.items():
        by_arch.setdefault(x["arch"], []).append(m)
    fams: dict[str, list[str]] = {}
    for arch, ms in by_arch.items():
        fams.setdefault(family_of(arch, [meta[m]["weights_label"] for m in ms if not meta[m]["random_weights"]]),
                        []).extend(ms)
    return fams


def controls_of(meta: dict[str, dict]) -> dict[str, list[str]]:
    """Trained model -> its matched controls (the models whose weights.json says ``control_of`` it), in seed
    order."""
    out: dict[str, list[str]] = {}
    for m, x in sorted(meta.items(), key=lambda kv: (kv[1].get("seed") or 0, kv[0])):
        if x.get("control_of") in meta:
            out.setdefault(x["control_of"], []).append(m)
    return out


def evaluate(criteria: dict, meta: dict[str, dict], spectra: pd.DataFrame, dyn: pd.DataFrame,
             theory: list[dict], steer: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per claim (and per family where the claim is measured on models): every claim of :data:`CLAIMS`
    with a criterion on every family, each trained model's matched control judged the same way beside it, then
    the synthetic-layer claims of :func:`theory_verdicts`."""
    labels = labels or {}
    ctrl = controls_of(meta)
    rows = []
    for name, ms in sorted(families(meta).items()):
        trained = [m for m in ms if not meta[m]["random_weights"]]
        twins = [m for m in ms if meta[m]["random_weights"] and not meta[m].get("control_of")]
        if not trained and not twins:
            continue
        fam = Family(name=name, models=trained or twins, tested=bool(trained), meta=meta, spectra=spectra, dyn=dyn,
                     steer=steer, criteria=criteria, twins=twins, controls={m: ctrl[m] for m in trained if m in ctrl})
        for claim in CLAIMS:
            c = claim.criterion
            if c is None:
                continue
            results = {m: c.judge(fam, m) for m in c.applies(fam)}
            results = {m: r for m, r in results.items() if r is not None}
            if results:
                shown = ", ".join(f"{labels.get(m, m)} ({weights_text(meta[m]['weights_label'])})" for m in results)
                ctl = [x for m in results for x in fam.controls.get(m, [])]
                judged = {x: c.judge(fam, x) for x in ctl if x in c.applies(_as_models(fam, [x]))}
                cv = ControlSeeds({k: v for k, v in judged.items() if v is not None})
                v = combine(results, labels)
                if claim.id == "C1" and cv.everywhere and fam.tested:
                    v = v._replace(measured=f"{v.measured}; {CONTROL_SENTENCE}")
                rows.append(row(claim.id, name, shown, c.wording(criteria), v, fam.tested,
                                control_text(cv.verdicts, labels), cv if cv.n else None, labels,
                                training_of(fam, claim.id, results)))
    for claim, (criterion, v) in theory_verdicts(theory, criteria).items():  # synthetic layers, no family
        rows.append(row(claim, "synthetic", "synthetic layers" + (" (softmax attention)" if claim == "C4" else ""),
                        criterion, v))
    return _with_untested(across_families(pd.DataFrame(rows)))


def _as_models(fam: Family, models: list[str]) -> Family:
    """The family with ``models`` in place of its judged models (a control passes through the claim's own
    ``applies``: it has the steps the claim needs)."""
    from dataclasses import replace

    return replace(fam, models=models)


def _with_untested(df: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by claim then family, and a "not tested" row for every claim no model exercised."""
    order = {c.id: i for i, c in enumerate(CLAIMS)}
    if len(df):
        df = df.sort_values(["claim", "family"], key=lambda s: s.map(order) if s.name == "claim" else s,
                            kind="stable").reset_index(drop=True)
    for c in (c.id for c in CLAIMS):
        if c not in set(df.get("claim", [])):
            df = pd.concat([df, pd.DataFrame([{"claim": c, "statement": BY_ID[c].statement, "family": "-",
                                               "models": "-",
                                               "criterion": "-", "measured": "no model in this run exercises it",
                                               "null": "-", "claim p": "-", "attainable p": "-",
                                               "specificity p": "-", "verdict": NOT_JUDGED, "failed part": "-",
                                               "would flip if": "-", "matched control": "-",
                                               "control verdict": "-", "p": "-", "figure": BY_ID[c].figure,
                                               "outcome": NOT_JUDGED, JUDGED_IN: BY_ID[c].judged_in}])])
    return df.reset_index(drop=True)


__all__ = ['Verdict', 'FIG', 'TEXT', 'CONTROL_SENTENCE', 'CONTROL_LABEL', 'share_significant', 'n_saturated',
           'count', 'parts', 'REPRODUCED', 'NOT_REPRODUCED', 'INCONCLUSIVE', 'NOT_JUDGED', 'UNDERPOWERED', 'c1', 'c5',
           'c6', 'c7', 'c10', 'c8', 'c9', 'c4', 'theory_verdicts', 'albert_size', 'VIEW_MISSING',
           'VIEW_NOT_APPLICABLE', 'is_twin_row', 'verdict_view', 'verdict_class', 'verdict_column_class', 'Family',
           'Criterion', 'Claim', 'CLAIMS', 'BY_ID', 'evaluate', 'family_of', 'combine', 'families', 'row',
           'controls_of', 'control_text', 'NUMBERS', 'HOLM_ACROSS', 'across_families', 'ControlSeeds', 'Training',
           'TRAINING', 'TRAINING_P', 'training_of', 'Beside', 'JUDGED_IN', 'OTHER']

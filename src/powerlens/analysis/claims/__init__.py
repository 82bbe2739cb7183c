"""The claims audit: each claim C1-C10 of paper.md, judged by the pre-registered criteria of paper.md
section 4b (numbers from the config's ``claims:`` block, fixed before any run), with the measured value, the
null it was judged against, and a verdict.

Verdicts (paper.md section 4b, revision 4): "reproduced", "not reproduced", "inconclusive" (the outcome rests
on tests left undecided after the Monte Carlo extension, or it changes with the Monte Carlo seed), "not judged"
(no trained model of the family ran). A family's verdict uses trained models only (every trained model of the
family must pass); a family represented by random-weight twins only is "not judged" (its numbers are shown,
labelled): random weights are never evidence, though C1's row shows the twin's result as a control.
Each criterion is a small function of one model's tables (``criteria``), so it can be tested on constructed
cases; :data:`CRITERIA` is the table of claims measured on models, which :func:`evaluate` runs on every
family; ``view`` makes the verdict view a reader scans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from powerlens.analysis.claims.criteria import (
    FIG,
    INCONCLUSIVE,
    NOT_JUDGED,
    NOT_REPRODUCED,
    REPRODUCED,
    TEXT,
    TWIN_SENTENCE,
    Verdict,
    albert_size,
    c1,
    c4,
    c5,
    c6,
    c7,
    c8,
    c9,
    c10,
    count,
    n_saturated,
    share_significant,
    theory_verdicts,
)
from powerlens.analysis.claims.view import (
    VIEW_MISSING,
    VIEW_NOT_APPLICABLE,
    is_twin_row,
    verdict_class,
    verdict_column_class,
    verdict_view,
)
from powerlens.core.fmt import weights_text
from powerlens.models.adapters import ADAPTERS


def family_of(arch: str, weights_labels: list[str] | None = None) -> str:
    """Display name of an architecture's family (its adapter's), with the weights of its trained models when
    they all share one kind: "BERT (trained)", "Llama (trained, 4-bit)"; a family of twins only: "BERT"."""
    fam = getattr(ADAPTERS.get(arch), "family", arch)
    q = {lab.split(" (")[0].replace("trained weights", "trained") for lab in (weights_labels or [])
         if lab.startswith("trained")}
    return f"{fam} ({q.pop()})" if len(q) == 1 and all(lab.startswith("trained") for lab in weights_labels) else fam


@dataclass(frozen=True, kw_only=True)
class Family:
    """One family's models and the run's tables, as the criteria read them."""

    name: str
    models: list[str]  # the models judged: trained ones, or the twins when the family has no trained model
    tested: bool  # False: twins only (their numbers are shown, the verdict is "not judged")
    twins: list[str]  # the family's random-weight twins (C1's control)
    meta: dict[str, dict]
    spectra: pd.DataFrame
    dyn: pd.DataFrame
    steer: pd.DataFrame
    criteria: dict

    @property
    def alpha(self) -> float:
        return self.criteria["alpha"]

    def dynamics(self, m: str, mode: str) -> pd.DataFrame:
        return self.dyn[(self.dyn["model"] == m) & (self.dyn["mode"] == mode)].sort_values("layer")

    def has(self, m: str, mode: str) -> bool:
        return len(self.dynamics(m, mode)) > 0

    def twin_law(self) -> pd.DataFrame | None:
        """The first twin's attention-only law that ran (C1's random-weight control), when the family is judged."""
        ok = [t for t in self.twins if self.has(t, "attention-only")] if self.tested else []
        return self.dynamics(ok[0], "attention-only") if ok else None

    def layer_varying(self) -> list[str]:
        return [m for m in self.models if not self.meta[m]["shared_weights"]]


@dataclass(frozen=True, kw_only=True)
class Criterion:
    """A claim measured on models: which of a family's models it applies to, one model's verdict, and the
    criterion in words (from the config's ``claims:`` numbers)."""

    claim: str
    applies: Callable[[Family], list[str]]
    judge: Callable[[Family, str], Verdict | None]
    wording: Callable[[dict], str]


def _c5(f: Family, m: str) -> Verdict:
    lead = f.spectra[f.spectra["model"] == m]["leading_type"].iloc[0]
    return c5(f.dynamics(m, "attention-only").iloc[-1], lead, albert_size(f.meta[m]), f.criteria)


CRITERIA: tuple[Criterion, ...] = (
    Criterion(claim="C1", applies=lambda f: [m for m in f.models if f.has(m, "attention-only")],
              judge=lambda f, m: c1(f.dynamics(m, "attention-only"), f.dynamics(m, "model"), f.twin_law(), f.criteria),
              wording=lambda c: f"attention-only law (the claim drops the FFN): tilt a(t+1) - a(t) against v_1 > 0, "
              f"beating both nulls (random directions; F's other eigen-directions), decided Monte Carlo tests, Holm "
              f"< {c['alpha']}, in >= {c['C1_share_layers']:.0%} of layers; shown beside it: the real forward pass "
              "and the random-weight twin, same test"),
    Criterion(claim="C5", applies=lambda f: [m for m in f.models if f.meta[m]["shared_weights"]
                                             and f.has(m, "attention-only")], judge=_c5,
              wording=lambda c: f"(a) final mean pairwise |cos| >= {c['C5_consensus_abs_cos']}; (b) alignment with "
              f"M's span(v_1, v_2) or leading plane above the random-subspace null's "
              f"q{c['C5_null_quantile'] * 100:.0f}; "
              "(c) leading type: base/large real, xlarge/xxlarge complex (size from the configuration)"),
    Criterion(claim="C6", applies=lambda f: [m for m in f.layer_varying() if f.has(m, "model")],
              judge=lambda f, m: c6(f.dynamics(m, "model"), f.criteria),
              wording=lambda c: f"model mode: (a) gamma above the random-direction null, decided Monte Carlo test "
              f"(Holm) < {c['alpha']}, in >= 1 layer, (b) gamma < {c['C6_weak_below']} in every layer, (c) last "
              "output vs first layer's v_1 not beyond the null"),
    # C7 is general: every model with the real forward pass, shared-weight ones over their own depth
    Criterion(claim="C7", applies=lambda f: [m for m in f.models if f.has(m, "model")],
              judge=lambda f, m: c7(f.dynamics(m, "model"), f.criteria),
              wording=lambda c: f"model mode: rho > 0.5 beating both nulls (decided tests, Holm < {c['alpha']}) in "
              f">= {c['C7_share_layers']:.0%} of layers (saturated layers not counted)"),
    Criterion(claim="C8", applies=lambda f: [m for m in f.layer_varying() if f.has(m, "model")],
              judge=lambda f, m: c8(f.spectra[f.spectra["model"] == m], f.dynamics(m, "model"), f.alpha),
              wording=lambda c: f"model mode: Spearman(1 - |lambda_next|/|lambda_1|, gamma - null median) across "
              f"layers > 0 with p < {c['alpha']} (lambda_next: first eigenvalue beyond the lead's pair)"),
    Criterion(claim="C10", applies=lambda f: [m for m in f.models if f.has(m, "model")],
              judge=lambda f, m: c10(f.dynamics(m, "model"), f.dynamics(m, "attention-only"), f.criteria),
              wording=lambda c: f"real forward pass, split at the sublayers: the attention sublayer's tilt towards "
              f"v_1 > 0 beating both nulls (Holm < {c['alpha']}) in >= {c['C1_share_layers']:.0%} of layers, AND the "
              f"FFN sublayer's tilt significantly negative in < {c['C10_ffn_negative_below']:.0%} of them"),
    Criterion(claim="C9", applies=lambda f: [m for m in f.models if len(f.steer[f.steer["model"] == m])],
              judge=lambda f, m: c9(f.steer[(f.steer["model"] == m) & (f.steer["kappa"] >= 0)], f.criteria),
              wording=lambda c: f"largest kappa: min over targets of mean |cos(x, u)| >= {c['C9_alignment']}, u "
              "principal, and not below activation addition at matched norm of change"),
)


TWINS_ONLY = "random weights only: twins are never evidence"


def row(claim: str, family: str, models: str, criterion: str, v: Verdict, tested: bool = True) -> dict:
    """One row of the claims table from a (possibly combined) verdict."""
    verdict = v.word if tested else f"{NOT_JUDGED} ({TWINS_ONLY})"
    return {"claim": claim, "statement": TEXT[claim], "family": family, "models": models, "criterion": criterion,
            "measured": v.measured, "null": v.null, "verdict": verdict,
            "failed part": (v.failed or "-") if tested and not v.ok else "-",
            "would flip if": (v.flip or "-") if tested else "-", "figure": FIG[claim]}


def combine(results: dict[str, Verdict], labels: dict[str, str]) -> Verdict:
    """A family's verdict: every model must pass; one model failing outright fails it, else one inconclusive
    model makes it inconclusive. Measured values, nulls and failed parts listed by model."""
    name = lambda m: labels.get(m, m)  # noqa: E731
    fails = [m for m, r in results.items() if not r.ok and not r.inconclusive]
    bad = [(m, r.failed) for m, r in results.items() if (m in fails) or (not fails and r.inconclusive)]
    failed = "" if not bad else bad[0][1] if len(results) == 1 else "; ".join(f"{name(m)}: {x}" for m, x in bad)
    ok = all(r.ok for r in results.values())
    movers = results if ok else {m: r for m, r in results.items() if (m in fails) or (not fails and r.inconclusive)}
    flip = (next(iter(movers.values())).flip if len(results) == 1 else
            ("any one of: " if ok else "each of: ") + "; ".join(f"{name(m)}: {r.flip}" for m, r in movers.items()))
    return Verdict(ok, "; ".join(f"{name(m)}: {r.measured}" for m, r in results.items()),
                   "; ".join(f"{name(m)}: {r.null}" for m, r in results.items()), failed,
                   inconclusive=not fails and any(r.inconclusive for r in results.values()), flip=flip)


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


def evaluate(criteria: dict, meta: dict[str, dict], spectra: pd.DataFrame, dyn: pd.DataFrame,
             theory: list[dict], steer: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per claim (and per family where the claim is measured on models): every criterion of
    :data:`CRITERIA` on every family, then the synthetic-layer claims of :func:`theory_verdicts`."""
    labels = labels or {}
    rows = []
    for name, ms in sorted(families(meta).items()):
        trained = [m for m in ms if not meta[m]["random_weights"]]
        fam = Family(name=name, models=trained or ms, tested=bool(trained), meta=meta, spectra=spectra, dyn=dyn,
                     steer=steer, criteria=criteria, twins=[m for m in ms if meta[m]["random_weights"]])
        for c in CRITERIA:
            results = {m: c.judge(fam, m) for m in c.applies(fam)}
            results = {m: r for m, r in results.items() if r is not None}
            if results:
                shown = ", ".join(f"{labels.get(m, m)} ({weights_text(meta[m]['weights_label'])})" for m in results)
                rows.append(row(c.claim, name, shown, c.wording(criteria), combine(results, labels), fam.tested))
    for claim, (criterion, v) in theory_verdicts(theory, criteria["alpha"]).items():  # synthetic layers, no family
        rows.append(row(claim, "synthetic", "synthetic layers" + (" (softmax attention)" if claim == "C4" else ""),
                        criterion, v))
    return _with_untested(pd.DataFrame(rows))


def _with_untested(df: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by claim then family, and a "not tested" row for every claim no model exercised."""
    order = {c: i for i, c in enumerate(TEXT)}
    if len(df):
        df = df.sort_values(["claim", "family"], key=lambda s: s.map(order) if s.name == "claim" else s,
                            kind="stable").reset_index(drop=True)
    for c in TEXT:
        if c not in set(df.get("claim", [])):
            df = pd.concat([df, pd.DataFrame([{"claim": c, "statement": TEXT[c], "family": "-", "models": "-",
                                               "criterion": "-", "measured": "no model in this run exercises it",
                                               "null": "-", "verdict": NOT_JUDGED,
                                               "failed part": "-", "would flip if": "-", "figure": FIG[c]}])])
    return df.reset_index(drop=True)


__all__ = ['Verdict', 'FIG', 'TEXT', 'TWIN_SENTENCE', 'share_significant', 'n_saturated', 'count', 'REPRODUCED',
           'NOT_REPRODUCED', 'INCONCLUSIVE', 'NOT_JUDGED', 'c1', 'c5', 'c6', 'c7', 'c10', 'c8', 'c9', 'c4',
           'theory_verdicts', 'albert_size', 'VIEW_MISSING', 'VIEW_NOT_APPLICABLE', 'is_twin_row', 'verdict_view',
           'verdict_class', 'verdict_column_class', 'Family', 'Criterion', 'CRITERIA', 'evaluate', 'family_of',
           'combine', 'families', 'row']

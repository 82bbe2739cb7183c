"""The claims C1-C10, one object each (:class:`Claim`): the statement, where it is judged, the criterion (for the
claims measured on models: which models it applies to, one model's verdict and the criterion in words), how
its power is computed, the figure that shows its evidence and a sentence of prose for a reader. Every table,
view and article reads a claim from :data:`CLAIMS`; nothing else spells a claim's words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from powerlens.analysis.claims.c9 import c9
from powerlens.analysis.claims.criteria import FIG, LAW, REAL_PASS, SYNTHETIC, TEXT, Verdict, albert_size, c5
from powerlens.analysis.claims.layer_criteria import c1, c6, c7, c8, c10
from powerlens.analysis.verdict_tests import Reading, readings
from powerlens.models.adapters import ADAPTERS


@dataclass(frozen=True, kw_only=True)
class Family:
    """One family's models and the run's tables, as the criteria read them."""

    name: str
    models: list[str]  # the models judged: trained ones, or the twins when the family has no trained model
    tested: bool  # False: twins only (their numbers are shown, the verdict is "not judged")
    twins: list[str]  # the family's random-weight twins of the paper's architectures (coverage, not controls)
    meta: dict[str, dict]
    spectra: pd.DataFrame
    dyn: pd.DataFrame
    steer: pd.DataFrame
    criteria: dict
    controls: dict[str, list[str]] = field(default_factory=dict)  # trained model -> its matched controls (seeds)

    @property
    def alpha(self) -> float:
        return self.criteria["alpha"]

    def dynamics(self, m: str, mode: str) -> pd.DataFrame:
        return self.dyn[(self.dyn["model"] == m) & (self.dyn["mode"] == mode)].sort_values("layer")

    def has(self, m: str, mode: str) -> bool:
        return len(self.dynamics(m, mode)) > 0

    def layer_varying(self) -> list[str]:
        return [m for m in self.models if not self.meta[m]["shared_weights"]]


@dataclass(frozen=True, kw_only=True)
class Criterion:
    """A claim measured on models: which of a family's models it applies to, one model's verdict (a trained
    model's or its matched control's: the same function), and the criterion in words (from the config's
    ``claims:`` numbers)."""

    applies: Callable[[Family], list[str]]
    judge: Callable[[Family, str], Verdict | None]
    wording: Callable[[dict], str]


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim of paper.md: its statement, where it is judged (shown in the verdict view), its criterion
    (None: judged on synthetic layers, :func:`powerlens.analysis.claims.criteria.theory_verdicts`), how its power
    is computed, its figure, and a sentence of prose for a reader."""

    id: str
    statement: str
    where: str
    figure: str
    prose: str
    power: str
    criterion: Criterion | None = None
    gist: str = ""  # a few words (the full statement is in the claim's own section)
    robust_mode: str | None = None  # the dynamics mode the robustness variants judge it again in (None: not varied)
    #: where the verdict is judged: the attention-only law (LAW), the real forward pass (REAL_PASS) or the synthetic
    #: layers (SYNTHETIC); the article counts the verdicts by it
    judged_in: str = REAL_PASS
    #: the statistical method that decides it, in the words the modelling choices use (a unit test finds it there)
    method: str = ""

    @property
    def readings(self) -> tuple[Reading, ...]:
        """The per-layer tests its criterion reads (:data:`powerlens.analysis.verdict_tests.READINGS`)."""
        return readings(claim=self.id)


def _c5(f: Family, m: str) -> Verdict:
    lead = f.spectra[f.spectra["model"] == m]["leading_type"].iloc[0]
    types = getattr(ADAPTERS.get(f.meta[m]["arch"]), "paper_leading_types", {})
    return c5(f.dynamics(m, "attention-only").iloc[-1], lead, albert_size(f.meta[m]), f.criteria, types)


CONJUNCTION_POWER = ("partial conjunction: (L - k + 1) x the upper bound of zero exceedances at the draw cap "
                     "(dynamics.null_draws_cap), each layer's at level 1 - 0.01/L; "
                     "specificity: prod_t 1 / (M_t + 1) over the layers' eigen-directions of the lead's kind")

CLAIMS: list[Claim] = [
    Claim(id="C1", judged_in=LAW, method="partial conjunction",
          statement=TEXT["C1"], figure=FIG["C1"], power=CONJUNCTION_POWER,
          gist="attention tilts tokens to v_1", robust_mode="attention-only",
          where=" [judged in the attention-only law, FFN removed; the claims table shows the real forward pass beside "
                "it, and the matched controls where the run has them]",
          prose="In the paper's attention-only law, each layer should move tokens towards its F's leading "
                "eigenvector more than towards a random direction, and more than towards F's other eigenvectors.",
          criterion=Criterion(
              applies=lambda f: [m for m in f.models if f.has(m, "attention-only")],
              judge=lambda f, m: c1(f.dynamics(m, "attention-only"), f.dynamics(m, "model"), f.criteria),
              wording=lambda c: f"attention-only law (the claim drops the FFN): the tilt a(t+1) - a(t) against v_1 "
              f"> 0 and beating random directions in at least {c['C1_share_layers']:.0%} of the layers (one p: the "
              f"partial conjunction over layers, simultaneous 99% interval, < {c['alpha']}) AND the lead beating F's "
              f"other eigen-directions across the model (specificity p < {c['alpha']}, against independent layers "
              "and among its members' chains across layers: our choice); shown beside it: the real forward pass, "
              "same test")),
    Claim(id="C2", judged_in=SYNTHETIC, method="share of seeds",
          statement=TEXT["C2"], figure=FIG["C2"],
          gist="shared weights: consensus on v_1",
          where=" [synthetic layers, softmax attention over a sweep of sharpness and weight seeds]",
          power="a share of seeds at every sharpness; the uniform-attention control shows the code sees the rate",
          prose="With one shared layer and a real dominant eigenvalue, tokens starting in a hemisphere should "
                "converge to one direction, whatever the attention's sharpness."),
    Claim(id="C3", judged_in=SYNTHETIC, method="share of seeds",
          statement=TEXT["C3"], figure=FIG["C3"],
          gist="complex lead: limit cycle",
          where=" [synthetic layers, softmax attention over a sweep of sharpness and weight seeds]",
          power="a share of seeds at every sharpness; the uniform-attention control shows the code sees the angle",
          prose="With a complex dominant pair, tokens should settle on a closed orbit in its plane."),
    Claim(id="C4", judged_in=SYNTHETIC, method="exact conditional test over strata",
          statement=TEXT["C4"], figure=FIG["C4"],
          gist="bipartite consensus unstable",
          where=" [synthetic layers, linearised, stratified by configured sharpness x (size, seed) block]",
          power="one-sided exact stratified test: its smallest p from the strata's cell counts",
          prose="Two antipodal groups of tokens can be an equilibrium, but with several heads it should be "
                "unstable more often than with one, and random starts should rarely end there."),
    Claim(id="C5", judged_in=LAW, method="random-subspace null",
          statement=TEXT["C5"], figure=FIG["C5"], where=" [attention-only law, long runs]",
          gist="ALBERT: fast consensus",
          power="thresholds and the random-subspace null's 99th percentile",
          prose="ALBERT's shared layer should drive tokens to consensus, with the leading eigenvalue's type "
                "depending on the model size.",
          criterion=Criterion(
              applies=lambda f: [m for m in f.models if f.meta[m]["shared_weights"] and f.has(m, "attention-only")],
              judge=_c5,
              wording=lambda c: f"(a) final mean pairwise |cos| >= {c['C5_consensus_abs_cos']}; (b) alignment with "
              f"M's span(v_1, v_2) or leading plane above the random-subspace null's "
              f"q{c['C5_null_quantile'] * 100:.0f}; "
              "(c) leading type: base/large real, xlarge/xxlarge complex (size from the configuration)")),
    Claim(id="C6", method="partial conjunction",
          statement=TEXT["C6"], figure=FIG["C6"], where=" [real forward pass]",
          gist="gamma positive but weak", robust_mode="model",
          power="(a) L x the upper bound of zero exceedances at the draw cap (dynamics.null_draws_cap) at level "
                "1 - 0.01/L; (c) "
                "whether one test could be significant",
          prose="Tokens should be aligned with each layer's leading eigenvector beyond chance, but weakly, and "
                "not accumulate towards one global direction.",
          criterion=Criterion(
              applies=lambda f: [m for m in f.layer_varying() if f.has(m, "model")],
              judge=lambda f, m: c6(f.dynamics(m, "model"), f.criteria),
              wording=lambda c: f"model mode: (a) gamma above the random-direction null in at least one layer (one "
              f"p: the partial conjunction with k = 1, < {c['alpha']}), (b) gamma < {c['C6_weak_below']} in every "
              "layer, (c) last output vs first layer's v_1 not beyond the null")),
    Claim(id="C7", method="partial conjunction",
          statement=TEXT["C7"], figure=FIG["C7"], where=" [real forward pass]", power=CONJUNCTION_POWER,
          gist="rho above one half", robust_mode="model",
          prose="More than half of the tokens should increase their alignment with the layer's leading "
                "eigenvector, beyond what random directions and F's other eigenvectors get.",
          # C7 is general: every model with the real forward pass, shared-weight ones over their own depth
          criterion=Criterion(
              applies=lambda f: [m for m in f.models if f.has(m, "model")],
              judge=lambda f, m: c7(f.dynamics(m, "model"), f.criteria),
              wording=lambda c: f"model mode: rho > 0.5 and beating random directions in at least "
              f"{c['C7_share_layers']:.0%} of the layers (partial conjunction, < {c['alpha']}; saturated layers are "
              f"no evidence) AND the specificity p across the model < {c['alpha']}")),
    Claim(id="C8", method="Spearman",
          statement=TEXT["C8"], figure=FIG["C8"], where=" [real forward pass]",
          gist="weak gamma from small gaps", robust_mode="model",
          power="one-sided Spearman test over L layers: smallest p 1 / L!",
          prose="Layers with a larger spectral gap should show a stronger alignment.",
          criterion=Criterion(
              applies=lambda f: [m for m in f.layer_varying() if f.has(m, "model")],
              judge=lambda f, m: c8(f.spectra[f.spectra["model"] == m], f.dynamics(m, "model"), f.alpha),
              wording=lambda c: f"model mode: Spearman(1 - |lambda_next|/|lambda_1|, gamma - null median) across "
              f"layers > 0 with p < {c['alpha']} (lambda_next: first eigenvalue beyond the lead's pair)")),
    Claim(id="C9", method="threshold",
          statement=TEXT["C9"], figure=FIG["C9"], where=" [real forward pass; the law beside it]",
          gist="rank-1 edit steers tokens",
          power="thresholds (no null)",
          prose="A large enough rank-1 edit of the last layer's output matrix should align every token with a "
                "chosen direction.",
          criterion=Criterion(
              applies=lambda f: [m for m in f.models if len(f.steer[f.steer["model"] == m])],
              judge=lambda f, m: c9(f.steer[f.steer["model"] == m], f.criteria),  # its beta sweep included
              wording=lambda c: f"real forward pass (the law beside it), each target at the largest kappa its sweep "
              f"reached (kappa doubled until the criterion, a flat curve or C9_kappa_cap {c['C9_kappa_cap']:g}): min "
              f"over targets of mean |cos(x, u)| >= {c['C9_alignment']} and u principal (revision 6); underpowered "
              "where a norm after the edit caps |cos| below the bound at any kappa, inconclusive where the cap "
              "stopped a curve still rising; activation addition (at matched KL on unrelated prompts where the model "
              "has an LM head, else at matched norm of change) reported beside the verdict, not part of it")),
    Claim(id="C10", method="partial conjunction",
          statement=TEXT["C10"], figure=FIG["C10"],
          gist="FFN can be disregarded", robust_mode="model",
          where=" [real forward pass, split at the attention and FFN sublayers]",
          power=CONJUNCTION_POWER + "; the FFN clause: whether ceil(L/4) layers could be Holm-significant",
          prose="The tilt should come from attention and normalisation: the attention sublayer tilts tokens "
                "towards v_1, and the FFN rarely undoes it.",
          criterion=Criterion(
              applies=lambda f: [m for m in f.models if f.has(m, "model")],
              judge=lambda f, m: c10(f.dynamics(m, "model"), f.dynamics(m, "attention-only"), f.criteria),
              wording=lambda c: f"real forward pass, split at the sublayers: the attention sublayer's tilt towards "
              f"v_1 > 0 beating random directions in at least {c['C1_share_layers']:.0%} of the layers (partial "
              f"conjunction, < {c['alpha']}) with the specificity p < {c['alpha']}, AND the FFN sublayer's tilt "
              f"significantly negative (per-layer Holm) in < {c['C10_ffn_negative_below']:.0%} of them (checked "
              "for whether it could fail)")),
]

BY_ID = {c.id: c for c in CLAIMS}


def register(claim: Claim) -> Claim:
    """Add a claim (its id unused so far): every table, view and the article then show it. The one registration a
    new claim needs."""
    if claim.id in BY_ID:
        raise ValueError(f"a claim with the id {claim.id!r} is registered already")
    CLAIMS.append(claim)
    BY_ID[claim.id] = claim
    return claim


def unregister(claim_id: str) -> None:
    CLAIMS[:] = [c for c in CLAIMS if c.id != claim_id]
    BY_ID.pop(claim_id, None)


def gist(claim_id: str) -> str:
    """A claim's few words ("" for an id no claim has)."""
    return BY_ID[claim_id].gist if claim_id in BY_ID else ""

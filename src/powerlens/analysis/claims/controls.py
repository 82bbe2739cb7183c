"""A trained model's matched controls judged like it, several seeds (paper.md section 4e, revision 6): what the
claims table, the verdict view and the article say of them ("passes in k of n seeds", each seed's p)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerlens.analysis.claims.criteria import Verdict


@dataclass(frozen=True)
class ControlSeeds:
    """Every matched control of one family's trained models, each judged by the claim's own criterion at R0
    (no extension: a control decides no verdict). ``verdicts``: control model -> its verdict, in seed order."""

    verdicts: dict[str, Verdict]

    @property
    def n(self) -> int:
        return len(self.verdicts)

    @property
    def k(self) -> int:
        """Seeds whose control passes (reproduced)."""
        return sum(1 for v in self.verdicts.values() if v.ok)

    @property
    def undecided(self) -> int:
        """Seeds whose control is inconclusive (neither passes nor fails: a test undecided at R0, never extended)."""
        return sum(1 for v in self.verdicts.values() if v.inconclusive)

    @property
    def everywhere(self) -> bool:
        """Every seed's control passes: the test does not need trained attention."""
        return self.n > 0 and self.k == self.n

    @property
    def outcome(self) -> str:
        """"passes in k of n seeds": table_claims' control outcome and the head of the view's control cell."""
        return f"passes in {self.k} of {self.n} seed{'s' if self.n != 1 else ''}"

    @property
    def p(self) -> float:
        """The largest of the seeds' claim p (NaN where any seed's rule has none)."""
        ps = [float(v.p) for v in self.verdicts.values()]
        return float("nan") if not ps or any(np.isnan(ps)) else max(ps)

    def text(self, labels: dict[str, str]) -> str:
        """The view's cell: the outcome, then each seed's word and claim p."""
        each = "; ".join(f"{labels.get(c, c)}: {v.word}" + (f", claim p {v.p_short}" if v.p_short != "-" else "")
                         for c, v in self.verdicts.items())
        return f"{self.outcome} ({each})"

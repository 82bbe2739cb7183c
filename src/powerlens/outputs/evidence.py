"""What the evidence says: the pattern of a run's verdicts in one sentence, chosen by rules from table_claims
(never written by hand), and the section that reads each trained cell with its other reading, its matched
controls and its training p.

The rules read only table_claims' one-word and one-number columns (:data:`powerlens.analysis.claims.NUMBERS`,
``judged in`` and the ``other reading`` columns), so they can be tested on constructed tables. Every count and
name they put in front of a reader is a traced value (:mod:`powerlens.outputs.trace`).

The pattern (:func:`pattern`), first rule that holds:

``ALL_FAIL``       no cell of a trained model reproduces its claim;
``CONTROLS_TOO``   every reproduced trained cell is reproduced by its matched controls in every seed as well;
``LAW_NOT_REAL``   at least half of the cells judged in the attention-only law pass, fewer than half of those judged
                   in the real forward pass do, and the law's own test read on the real forward pass (C1's other
                   reading) passes on fewer than half of the models;
``REAL_HOLDS``     at least half of the cells judged in the real forward pass pass;
``MIXED``          anything else.

Beside it, a caveat wherever the matched controls pass (in at least one seed) where the trained model fails, naming
each such cell (:func:`controls_beat`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from powerlens.analysis.claims import JUDGED_IN, OTHER, TRAINING_P
from powerlens.analysis.claims.criteria import LAW, NOT_REPRODUCED, REAL_PASS, REPRODUCED, UNDERPOWERED
from powerlens.outputs.trace import WORDS

ALL_FAIL, CONTROLS_TOO, LAW_NOT_REAL, REAL_HOLDS, MIXED = (
    "all fail", "controls pass too", "law yes, real pass no", "real pass holds", "mixed")

#: The counts a pattern sentence shows, each a filter of table_claims' rows (row_count's ``where``: a column and
#: the values it may hold, or a regular expression) over the trained models' judged cells.
TRAINED = ["family", "^(?!synthetic$|-$)"]
JUDGED = ["outcome", list(WORDS)]
COUNTS: dict[str, list] = {
    "law": [TRAINED, JUDGED, [JUDGED_IN, [LAW]]],
    "law_pass": [TRAINED, [JUDGED_IN, [LAW]], ["outcome", [REPRODUCED]]],
    "real": [TRAINED, JUDGED, [JUDGED_IN, [REAL_PASS]]],
    "real_pass": [TRAINED, [JUDGED_IN, [REAL_PASS]], ["outcome", [REPRODUCED]]],
    "synthetic": [["family", ["synthetic"]], JUDGED],
    "synthetic_pass": [["family", ["synthetic"]], ["outcome", [REPRODUCED]]],
    "beside_real": [TRAINED, JUDGED, [OTHER[0], [REAL_PASS]], [OTHER[1], list(WORDS)]],
    "beside_real_pass": [TRAINED, JUDGED, [OTHER[0], [REAL_PASS]], [OTHER[1], [REPRODUCED]]],
    "beside_law": [TRAINED, JUDGED, [OTHER[0], [LAW]], [OTHER[1], list(WORDS)]],
    "beside_law_pass": [TRAINED, JUDGED, [OTHER[0], [LAW]], [OTHER[1], [REPRODUCED]]],
    "reproduced": [TRAINED, ["outcome", [REPRODUCED]]],
}


def count(df: pd.DataFrame, where: list) -> int:
    """The rows of table_claims (read as text) that match every filter of ``where`` (as row_count reads it)."""
    import re

    keep = pd.Series(True, index=df.index)
    for c, p in where:
        col = df[c] if c in df else pd.Series("-", index=df.index)
        keep &= col.isin(p) if isinstance(p, list) else col.map(lambda v: re.search(p, str(v)) is not None)
    return int(keep.sum())


def _int(x) -> int:
    try:
        return int(float(x))
    except (TypeError, ValueError):
        return 0


def trained_cells(df: pd.DataFrame) -> pd.DataFrame:
    """The judged cells of trained models (one claim on one family), in table order."""
    fam = df["family"].astype(str)
    return df[~fam.isin(["synthetic", "-"]) & df["outcome"].isin(WORDS)]


def every_seed(df: pd.DataFrame) -> pd.DataFrame:
    """Reproduced trained cells whose matched controls pass in every seed."""
    t = trained_cells(df)
    k, n = t["control seeds passing"].map(_int), t["control seeds"].map(_int)
    return t[(t["outcome"] == REPRODUCED) & (n > 0) & (k == n)]


def controls_beat(df: pd.DataFrame) -> pd.DataFrame:
    """Trained cells that fail (not reproduced) while their matched controls pass in at least one seed."""
    t = trained_cells(df)
    return t[(t["outcome"] == NOT_REPRODUCED) & (t["control seeds passing"].map(_int) > 0)]


@dataclass(frozen=True)
class Finding:
    """The pattern of a run's verdicts: its kind (one of the rules above), the counts it rests on and the cells
    whose controls pass where the trained model fails."""

    kind: str | None  # None: no trained model was judged
    n: dict[str, int] = field(default_factory=dict)
    beaten: tuple[tuple[str, str], ...] = ()  # (claim, family)


def pattern(df: pd.DataFrame) -> Finding:
    """The rules of the module docstring applied to a table_claims (read as text)."""
    n = {k: count(df, w) for k, w in COUNTS.items()}
    n["every_seed"] = len(every_seed(df))
    beaten = tuple(zip(controls_beat(df)["claim"], controls_beat(df)["family"]))
    if not len(trained_cells(df)):
        return Finding(None, n, beaten)
    half = lambda k, of: 2 * n[k] >= n[of] > 0  # noqa: E731
    if n["law_pass"] + n["real_pass"] == 0:
        kind = ALL_FAIL
    elif n["reproduced"] and n["every_seed"] == n["reproduced"]:
        kind = CONTROLS_TOO
    elif half("law_pass", "law") and not half("real_pass", "real") and not half("beside_real_pass", "beside_real"):
        kind = LAW_NOT_REAL
    elif half("real_pass", "real"):
        kind = REAL_HOLDS
    else:
        kind = MIXED
    return Finding(kind, n, beaten)


def sentence(f: Finding, num: Callable[[str], object], cell: Callable[[str, str], list]) -> list:
    """The pattern's sentence as pieces: ``num(key)`` shows a count of :data:`COUNTS` (or ``every_seed``),
    ``cell(claim, family)`` names one cell (claim, model, the controls' seeds). Template text holds no number."""
    if f.kind is None:
        return []
    if f.kind == ALL_FAIL:
        out = ["What the pattern says: no claim holds on a trained model here; all ", num("law"), " cells judged "
               "in the attention-only law and all ", num("real"), " judged in the real forward pass fail. "]
    elif f.kind == CONTROLS_TOO:
        out = ["What the pattern says: every one of the ", num("reproduced"), " passes on a trained model is matched "
               "by its random-attention controls in every seed, so these tests pass without trained attention and "
               "say nothing about training. "]
    elif f.kind == LAW_NOT_REAL:
        out = ["What the pattern says: the paper's simplified layer behaves as the paper says, the real forward pass "
               "of these trained models does not. ", num("law_pass"), " of ", num("law"), " cells judged in the "
               "attention-only law pass, against ", num("real_pass"), " of ", num("real"), " judged in the real "
               "forward pass"]
        out += ([", and the law's own test rerun on the real forward pass passes on ", num("beside_real_pass"), " of ",
                 num("beside_real"), " models"] if f.n.get("beside_real") else [])
        out += ([" (read in the law, C9's edit passes on ", num("beside_law_pass"), " of ", num("beside_law"),
                 ")"] if f.n.get("beside_law") else [])
        out += [". "]
    elif f.kind == REAL_HOLDS:
        out = ["What the pattern says: the trained models' real forward pass shows what the paper says in ",
               num("real_pass"), " of ", num("real"), " cells judged there. "]
    else:
        out = ["What the pattern says: the evidence is mixed: ", num("law_pass"), " of ", num("law"), " cells pass "
               "in the attention-only law and ", num("real_pass"), " of ", num("real"), " in the real forward "
               "pass. "]
    if f.kind != CONTROLS_TOO and f.n.get("every_seed"):
        out += [num("every_seed"), " of the ", num("reproduced"), " passes are matched by the random-attention "
                "controls in every seed (no evidence about training). "]
    if f.beaten:
        last = len(f.beaten) - 1
        names = [x for i, (c, fam) in enumerate(f.beaten)
                 for x in ([" and " if i == last else ", "] if i else []) + cell(c, fam)]
        out += ["Random attention passes where the trained model fails in ", *names, ": see What the evidence "
                "says. "]
    return out


def follows(row: pd.Series, alpha: float) -> str:
    """The sentence a reader takes from one trained cell: its verdict read with its other reading, its matched
    controls and its training p (template text, no number)."""
    word, k, n = row["outcome"], _int(row.get("control seeds passing")), _int(row.get("control seeds"))
    u = _int(row.get("control seeds undecided"))  # control seeds inconclusive at R0: neither pass nor fail
    where, other = row.get(JUDGED_IN, "-"), row.get(OTHER[0], "-")
    other_word = row.get(OTHER[1], "-")
    tp = pd.to_numeric(pd.Series([row.get(TRAINING_P, "-")]), errors="coerce").iloc[0]
    if word == UNDERPOWERED:
        return "No evidence either way: the test could not have passed here."
    if word == "inconclusive":
        return "Undecided: the outcome rests on Monte Carlo error or a step budget."
    if word == REPRODUCED:
        if n and k == n:
            s = "Holds, but random attention passes in every seed too: no evidence about training."
        elif k:
            s = "Holds; some random-attention seeds pass too, so the test is passable without training."
        elif n and u:
            s = ("Holds; random attention passes in no seed but is undecided in some (at R0 draws), so the test "
                 "may be passable without training.")
        elif n and tp < alpha:
            s = "Holds where random attention fails, and the trained lead beats the controls' (training p below alpha)."
        elif n:
            s = "Holds where random attention fails, though the training p does not separate the two."
        else:
            s = "Holds (no matched control in this run)."
        if other not in ("-", "") and other_word != REPRODUCED:
            s += f" Only in the {where}: the {other} does not show it."
        return s
    if k:
        return ("Fails, while random attention passes in some seeds: the test can be passed without training, and "
                "the trained model does not pass it.")
    if other not in ("-", "") and other_word == REPRODUCED:
        return f"Fails in the {where}; the {other} passes."
    return f"Fails in the {where}" + (", and so do its random-attention controls." if n else ".")


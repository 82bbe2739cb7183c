"""The verdict view: one row per claim and family in words a reader scans (the twins apart), and the
colouring of its verdict column."""

from __future__ import annotations

import pandas as pd

from powerlens.analysis.claims.criteria import (
    INCONCLUSIVE,
    NOT_JUDGED,
    NOT_REPRODUCED,
    REPRODUCED,
    UNDERPOWERED,
)
from powerlens.analysis.claims.registry import BY_ID, CLAIMS

VIEW_MISSING = {"synthetic layers": "the claim is about trained models, not synthetic layers"}


VIEW_NOT_APPLICABLE = ("the claim does not concern this family (C2-C4: synthetic layers only; C5: shared weights "
                       "only; C6, C8: layer-varying models only), or no model of it ran the needed step")


def is_twin_row(df: pd.DataFrame) -> pd.Series:
    """Rows judged on random-weight twins only (a family with no trained model): code exercise, not evidence."""
    return df["verdict"].str.startswith(NOT_JUDGED) & (df["family"] != "-")


CONTROL_COLUMN = "{family}: matched control (random attention weights)"  # a control column's header in the view


def cell(verdict: str, failed: str, p: str = "-", attainable: str = "-") -> str:
    """A verdict-view cell: the word, the claim's p beside the smallest p its rule could reach (paper.md section
    4d; where a part failed, its own p follows the colon instead), and after a colon the part that failed or why
    it is inconclusive or underpowered."""
    shown = verdict == REPRODUCED or failed in ("", "-")
    ps = "; ".join(x for x in (f"claim p {p}" if p not in ("", "-") and shown else "",
                               f"attainable p {attainable}" if attainable not in ("", "-") else "") if x)
    word = f"{verdict} ({ps})" if ps else verdict
    return word if shown else f"{word}: {failed}"


def verdict_view(df: pd.DataFrame, agree: dict[tuple[str, str], str] | None = None) -> pd.DataFrame:
    """``table_claim_verdicts``: one row per claim, one column per family with trained weights (then synthetic
    layers), each cell one of the verdict words ("not reproduced: <the part that failed>", "inconclusive: <why>")
    followed by its robustness count ``agree[(claim, family)]`` ("5 of 6 agree", table_robustness) when given;
    the last column names what this run could not judge (families with random-weight twins only). Built from
    :func:`evaluate`'s rows, so the two tables cannot disagree."""
    agree = agree or {}
    twin = is_twin_row(df)
    judged = df[~twin & ~df["verdict"].str.startswith(NOT_JUDGED)]
    fams = [f for f in dict.fromkeys(judged["family"]) if f != "synthetic"]
    controlled = set(judged.loc[judged.get("control verdict", pd.Series("-", index=judged.index)).fillna("-")
                                != "-", "family"]) if len(judged) else set()
    rows = []
    for claim in (c.id for c in CLAIMS):
        row = {"claim": claim, "statement": BY_ID[claim].statement + BY_ID[claim].where}
        mine = judged[judged["claim"] == claim]
        for f in fams + ["synthetic"]:
            r = mine[mine["family"] == f]
            col = "synthetic layers" if f == "synthetic" else f
            row[col] = None
            if f in controlled:
                row[CONTROL_COLUMN.format(family=f)] = None
            if not len(r):
                continue
            r = r.iloc[0]
            k = agree.get((claim, f))
            row[col] = cell(r["verdict"], r["failed part"], r.get("p", "-"), r.get("attainable p", "-")) + (
                f" [{k}]" if k else "")
            if f in controlled and r.get("control verdict", "-") not in ("-", "", None):
                row[CONTROL_COLUMN.format(family=f)] = r["control verdict"]
        gaps = df[(df["claim"] == claim) & twin]["family"].tolist()
        nobody = df[(df["claim"] == claim) & (df["family"] == "-")]
        row[f"{NOT_JUDGED} in this run"] = (", ".join(gaps) + " (random-weight twins only)" if gaps else
                                         "no model in this run exercises it" if len(nobody) else "-")
        rows.append(row)
    return pd.DataFrame(rows)


def verdict_class(column: str, text: str) -> str | None:
    """CSS class of a verdict-view cell (green reproduced, red not reproduced, amber inconclusive, blue-grey
    underpowered, grey not judged / not applicable; a matched control's cell in italics, uncoloured: random weights
    passing is a warning about the test, not a result)."""
    if column in ("claim", "statement"):
        return None
    if column.endswith(CONTROL_COLUMN.format(family="")):  # a control's word is not a verdict: never green or red
        return "ctl"
    if text.startswith(REPRODUCED):
        return "ok"
    if text.startswith(NOT_REPRODUCED):
        return "fail"
    if text.startswith(INCONCLUSIVE):
        return "inc"
    if text.startswith(UNDERPOWERED):
        return "weak"
    return "na"


def verdict_column_class(column: str, text: str) -> str | None:
    """table_claims: only its verdict column is coloured."""
    return verdict_class(column, text) if column == "verdict" else None


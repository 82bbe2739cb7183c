"""The verdict view: one row per claim and family in words a reader scans (the twins apart), and the
colouring of its verdict column."""

from __future__ import annotations

import pandas as pd

from powerlens.analysis.claims.criteria import INCONCLUSIVE, NOT_JUDGED, NOT_REPRODUCED, REPRODUCED, TEXT

VIEW_MISSING = {"synthetic layers": "the claim is about trained models, not synthetic layers"}


VIEW_NOT_APPLICABLE = ("the claim does not concern this family (C2-C4: synthetic layers only; C5: shared weights "
                       "only; C6, C8: layer-varying models only), or no model of it ran the needed step")


def is_twin_row(df: pd.DataFrame) -> pd.Series:
    """Rows judged on random-weight twins only (a family with no trained model): code exercise, not evidence."""
    return df["verdict"].str.startswith(NOT_JUDGED) & (df["family"] != "-")


# where each claim is judged, shown in the verdict view's statement column (a reader of the view alone must
# not take C1's law-only verdict for the real model's)
WHERE = {"C1": " [judged in the attention-only law, FFN removed; table_claims shows the real forward pass and the "
               "random-weight twin beside it]",
         "C5": " [attention-only law, long runs]", "C6": " [real forward pass]", "C7": " [real forward pass]",
         "C8": " [real forward pass]", "C9": " [real forward pass and the law]",
         "C10": " [real forward pass, split at the attention and FFN sublayers]"}


def cell(verdict: str, failed: str) -> str:
    """A verdict-view cell: the word, and after a colon the part that failed or why it is inconclusive."""
    return verdict if verdict == REPRODUCED or failed in ("", "-") else f"{verdict}: {failed}"


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
    rows = []
    for claim in TEXT:
        row = {"claim": claim, "statement": TEXT[claim] + WHERE.get(claim, "")}
        mine = judged[judged["claim"] == claim]
        for f in fams + ["synthetic"]:
            r = mine[mine["family"] == f]
            col = "synthetic layers" if f == "synthetic" else f
            if not len(r):
                row[col] = None
                continue
            r = r.iloc[0]
            k = agree.get((claim, f))
            row[col] = cell(r["verdict"], r["failed part"]) + (f" [{k}]" if k else "")
        gaps = df[(df["claim"] == claim) & twin]["family"].tolist()
        nobody = df[(df["claim"] == claim) & (df["family"] == "-")]
        row[f"{NOT_JUDGED} in this run"] = (", ".join(gaps) + " (random-weight twins only)" if gaps else
                                         "no model in this run exercises it" if len(nobody) else "-")
        rows.append(row)
    return pd.DataFrame(rows)


def verdict_class(column: str, text: str) -> str | None:
    """CSS class of a verdict-view cell (green reproduced, red not reproduced, amber inconclusive, grey not
    judged / not applicable)."""
    if column in ("claim", "statement"):
        return None
    if text.startswith(REPRODUCED):
        return "ok"
    if text.startswith(NOT_REPRODUCED):
        return "fail"
    if text.startswith(INCONCLUSIVE):
        return "inc"
    return "na"


def verdict_column_class(column: str, text: str) -> str | None:
    """table_claims: only its verdict column is coloured."""
    return verdict_class(column, text) if column == "verdict" else None


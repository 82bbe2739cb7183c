"""The verdict view: one row per claim and family in words a reader scans (the twins apart), and the
colouring of its verdict column."""

from __future__ import annotations

import pandas as pd

from powerlens.analysis.claims.criteria import TEXT

NOT_TESTED = "not tested in this run"


VIEW_MISSING = {"synthetic layers": "the claim is about trained models, not synthetic layers"}


VIEW_NOT_APPLICABLE = ("the claim does not concern this family (C2-C4: synthetic layers only; C5: shared weights "
                       "only; C6, C8: layer-varying models only), or no model of it ran the needed step")


def is_twin_row(df: pd.DataFrame) -> pd.Series:
    """Rows judged on random-weight twins only (a family with no trained model): code exercise, not evidence."""
    return df["verdict"].str.startswith(NOT_TESTED) & (df["family"] != "-")


def verdict_view(df: pd.DataFrame) -> pd.DataFrame:
    """``table_claim_verdicts``: one row per claim, one column per family with trained weights (then synthetic
    layers), each cell "reproduced" or "not reproduced: <the part that failed>"; the last column names what
    this run could not judge (families with random-weight twins only). Built from :func:`evaluate`'s rows, so
    the two tables cannot disagree."""
    twin = is_twin_row(df)
    judged = df[~twin & ~df["verdict"].str.startswith(NOT_TESTED)]
    fams = [f for f in dict.fromkeys(judged["family"]) if f != "synthetic"]
    rows = []
    for claim in TEXT:
        row = {"claim": claim, "statement": TEXT[claim]}
        mine = judged[judged["claim"] == claim]
        for f in fams + ["synthetic"]:
            r = mine[mine["family"] == f]
            col = "synthetic layers" if f == "synthetic" else f
            if not len(r):
                row[col] = None
                continue
            r = r.iloc[0]
            row[col] = "reproduced" if r["verdict"] == "reproduced" else f"not reproduced: {r['failed part']}"
        gaps = df[(df["claim"] == claim) & twin]["family"].tolist()
        nobody = df[(df["claim"] == claim) & (df["family"] == "-")]
        row["not judged in this run"] = (", ".join(gaps) + " (random-weight twins only)" if gaps else
                                         "no model in this run exercises it" if len(nobody) else "-")
        rows.append(row)
    return pd.DataFrame(rows)


def verdict_class(column: str, text: str) -> str | None:
    """CSS class of a verdict-view cell (green reproduced, red not reproduced, grey not judged / not applicable)."""
    if column in ("claim", "statement"):
        return None
    if text.startswith("reproduced"):
        return "ok"
    if text.startswith("not reproduced"):
        return "fail"
    return "na"


def verdict_column_class(column: str, text: str) -> str | None:
    """table_claims: only its verdict column is coloured."""
    return verdict_class(column, text) if column == "verdict" else None


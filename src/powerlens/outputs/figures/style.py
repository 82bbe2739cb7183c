"""Colours, markers and line styles that tell models apart, and the label of a model."""

from __future__ import annotations

from powerlens.outputs.plotting import panel_title, wrap_title

# Okabe-Ito colours (distinguishable by every reader), each model also with its own marker and line style
DISTINCT = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]


MARKERS = ["o", "s", "D", "^", "v", "P", "X"]


LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 1))]


def _name(labels, weights, m):
    """A grid panel's title: the model's label (:func:`panel_title`) on at most two lines."""
    return wrap_title(panel_title(labels.get(m, m), weights.get(m, "")))



def model_rank(meta: dict[str, dict]) -> dict[str, int]:
    """Each model's place in every figure: the order of table_claim_verdicts' columns (families sorted by name,
    :func:`powerlens.analysis.claims.families`), models of one family in the config's order (matched controls
    after their trained model's family's members). ``meta``: every model's weights.json by model key."""
    from powerlens.analysis.claims import families

    order = [m for _, ms in sorted(families(meta).items()) for m in ms]
    return {m: i for i, m in enumerate(order)}


def in_model_order(df, rank: dict[str, int]):
    """``df`` (a ``model`` column) with its models in the figures' order (:func:`model_rank`), rows of one model
    in their own order; a model ``rank`` lacks goes last."""
    import numpy as np

    key = df["model"].map(lambda m: rank.get(m, len(rank))).to_numpy()
    return df.iloc[np.argsort(key, kind="stable")].reset_index(drop=True).copy()

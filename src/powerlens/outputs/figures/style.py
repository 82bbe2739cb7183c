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


"""The one number format of every table, claim text and figure note, and weights labels as text (no import
of the rest of the package: tables, claims and the command line all use it)."""

from __future__ import annotations

import numpy as np

DASH = "-"


def fmt_num(x) -> str:
    """The one number format of every table and claim text: 3 significant digits, plain between 0.01 and
    1000 in magnitude ("0.0431", "256"), scientific outside ("1.00e-03", "2.91e-04", "1.14e+04": never "0.001"
    beside "6.00e-04"); integers as they are; a missing value (NaN, None) as a dash."""
    if x is None:
        return DASH
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if np.isnan(x):
        return DASH
    if x == 0 or not np.isfinite(x):
        return f"{x:g}"
    if x == round(x) and abs(x) < 1e5:
        return str(int(x))
    return f"{x:.3g}" if 1e-2 <= abs(x) < 1000 else f"{x:.2e}"


def is_random_label(label: str) -> bool:
    """Random weights of any kind: an architecture twin ("random weights") or a matched control ("random layer
    weights"): never evidence, drawn and listed apart from trained models."""
    return str(label).startswith("random")


def weights_text(label: str) -> str:
    """A weights label without nested brackets, for text that puts it in brackets itself:
    "trained, 4-bit (Q4_K_M)" -> "trained, 4-bit Q4_K_M"."""
    return label.replace(" (", " ").replace(")", "") if "(" in label else label


def sci(x: float) -> str:
    """A tolerance as written in the spec: 1e-9, 2.5e-3 (3 significant digits at most, no trailing zeros and no
    zero-padded exponent, unlike format "g")."""
    mant, exp = f"{x:.2e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"

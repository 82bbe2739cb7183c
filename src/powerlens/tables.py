"""Tables as CSV, Markdown and LaTeX (booktabs), rounded consistently, written atomically."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .io import atomic_path, write_text

DIGITS = 4  # significant digits for every float in every table


def _fmt(x):
    if isinstance(x, float):
        return f"{x:.{DIGITS}g}"
    return x


def write_table(df: pd.DataFrame, stem: str | Path, caption: str = "") -> list[Path]:
    """Write ``stem.csv``, ``stem.md`` and ``stem.tex``; returns the paths."""
    stem = Path(stem)
    shown = df.copy()
    for c in shown.columns:
        shown[c] = shown[c].map(_fmt)
    paths = [stem.with_suffix(s) for s in (".csv", ".md", ".tex")]
    with atomic_path(paths[0]) as tmp:
        shown.to_csv(tmp, index=False, lineterminator="\n")
    write_text(paths[1], (f"{caption}\n\n" if caption else "") + shown.to_markdown(index=False) + "\n")
    tex = shown.to_latex(index=False, escape=True, caption=caption or None, label=f"tab:{stem.name}")
    write_text(paths[2], tex.replace("\\toprule", "\\toprule").rstrip() + "\n")
    return paths


def models_table(weights_meta: list[dict]) -> pd.DataFrame:
    """``table_models``: id, revision, parameters, d, layers, heads, shared weights, source, weights."""
    rows = []
    for m in weights_meta:
        rows.append({
            "model": m["model"],
            "hub id / origin": m.get("repo_id") or (f"twin of {m['twin_of']}" if m.get("twin_of") else m["source"]),
            "revision": (m.get("resolved_revision") or "-")[:12],
            "params (M)": round(m["n_params"] / 1e6, 3),
            "d_model": m["d_model"], "layers": m["n_layers"], "heads": m["n_heads"],
            "shared weights": "yes" if m["shared_weights"] else "no",
            "source": m["source"], "weights": m["weights_label"],
        })
    return pd.DataFrame(rows)

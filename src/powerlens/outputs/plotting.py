"""One plotting style for every figure: seaborn, colour-blind-safe palette, labelled axes, model names as
in the paper, and "random weights" in the title of any panel drawn from an architecture twin."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import seaborn as sns

from powerlens.core.fmt import is_random_label
from powerlens.core.io import atomic_path


def style() -> None:
    """The one style: seaborn whitegrid, colour-blind palette, 9 pt titles, 8 pt labels, 8 pt legends."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.0)
    plt.rcParams.update({"figure.dpi": 100, "savefig.bbox": "tight", "axes.titlesize": 9, "axes.labelsize": 8,
                         "legend.fontsize": 8, "xtick.labelsize": 7.5, "ytick.labelsize": 7.5,
                         "pdf.fonttype": 42, "svg.hashsalt": "powerlens", "path.simplify": False})


def legend_below(fig, handles, labels, ncol: int | None = None, y: float = 0.0) -> None:
    """One legend for the whole figure, below its panels (never over data)."""
    if not handles:
        return
    ncol = ncol or min(len(handles), 4)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, y), ncol=ncol, frameon=False,
               markerscale=2.0)


def unique_handles(axes) -> tuple[list, list]:
    """Legend entries of several panels, each label once, in order of first appearance."""
    seen, hs, ls = set(), [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in seen and not lab.startswith("_"):
                seen.add(lab)
                hs.append(h)
                ls.append(lab)
    return hs, ls


#: The longest config or model text a figure shows (characters): a longer label is cut in its middle with an
#: ellipsis, so a label that gets past the config's maxLength (the API, a model file) cannot widen a figure
#: (3000 characters drew one 57,846 px wide); every label of the shipped configs is far shorter.
FIGURE_TEXT_MAX = 40
ELLIPSIS = "\u2026"


def shorten(text: str, limit: int = FIGURE_TEXT_MAX) -> str:
    """``text`` at most ``limit`` characters: a longer one keeps its start and its end (where two variants of
    a model name usually differ) around an ellipsis; line breaks as spaces (one line per title)."""
    text = str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    if len(text) <= limit:
        return text
    head = limit // 2
    return text[:head] + ELLIPSIS + text[len(text) - (limit - 1 - head):]


def plain(text: str) -> str:
    """Config text as literal text in a figure, one line of at most :data:`FIGURE_TEXT_MAX` characters
    (:func:`shorten`): ``$`` escaped, so matplotlib never reads it as mathtext (a label such as ``$x^`` would
    otherwise stop the plot with a parse error)."""
    return shorten(text).replace("$", r"\$")


def panel_title(label: str, weights_label: str) -> str:
    """The model's label (literal text, :func:`plain`), with "(random weights)" for twins and the precision
    of quantized trained weights ("trained, 4-bit (Q4_1)" -> "(4-bit Q4_1)"), also literal text (a quantization
    type comes from the model file)."""
    label = plain(label)
    if is_random_label(weights_label):
        return f"{label} ({plain(weights_label)})"
    if weights_label.startswith("trained, "):
        return f"{label} ({plain(weights_label[len('trained, '):].replace(' (', ' ').rstrip(')'))})"
    return label


TWIN_SUFFIX = "_twins"  # fig_X_twins: the same figure drawn from random-weight twins only
TWIN_BANNER = "RANDOM WEIGHTS (architecture twins): a code exercise, not evidence for any claim"
TRAINED = {"model": "trained"}  # which part :func:`draw_split` is drawing (read by :func:`save`)


def is_twin(weights_label: str) -> bool:
    return is_random_label(weights_label)


def draw_split(draw, data, weights: dict[str, str], stem, dpi: int, what: str) -> None:
    """Draw a per-model figure twice: models with trained weights at ``stem`` (the evidence), random-weight
    twins at ``stem_twins`` (headed :data:`TWIN_BANNER`, shown in the report's twins category). ``data`` is a
    DataFrame with a ``model`` column or a list of dicts with a ``weights`` label; ``draw(part, stem)`` draws
    one part. A part with no model gets a page that says so."""
    for twin, s in ((False, Path(stem)), (True, Path(f"{stem}{TWIN_SUFFIX}"))):
        if isinstance(data, pd.DataFrame):
            part = data[data["model"].map(lambda m: is_twin(weights.get(m, "")) == twin)]
        else:
            part = [d for d in data if is_twin(d["weights"]) == twin]
        TRAINED["model"] = "twins" if twin else "trained"
        try:
            if len(part):
                draw(part, s)
            else:
                placeholder(s, f"{what}: no model with {'random' if twin else 'trained'} weights in this run"
                            + ("" if twin else f" (random-weight twins: {Path(stem).name}{TWIN_SUFFIX})"), dpi)
        finally:
            TRAINED["model"] = "trained"


def placeholder(stem, text: str, dpi: int) -> list[Path]:
    style()
    fig, ax = plt.subplots(figsize=(6, 1.4))
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, wrap=True)
    ax.set_axis_off()
    return save(fig, stem, dpi)


def save(fig, stem: str | Path, dpi: int) -> list[Path]:
    """Write ``stem.pdf`` and ``stem.png`` atomically (fixed metadata, so reruns are byte-stable); a figure
    of twins gets the random-weights banner on top."""
    stem = Path(stem)
    if TRAINED["model"] == "twins":
        top = 1.0  # above everything drawn at the top (a suptitle of one or two lines)
        sup = getattr(fig, "_suptitle", None)
        if sup is not None and sup.get_text():
            fig.canvas.draw()
            top = max(top, fig.transFigure.inverted().transform(
                sup.get_window_extent(fig.canvas.get_renderer()))[1][1] + 0.01)
        fig.text(0.5, top, TWIN_BANNER, ha="center", va="bottom", fontsize=10, color="#b00020",
                 fontweight="bold", transform=fig.transFigure)
    out = []
    for ext in ("pdf", "png"):
        path = stem.with_suffix(f".{ext}")
        meta = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, dpi=dpi, metadata=meta)
        out.append(path)
    plt.close(fig)
    return out


def grid(n: int, ncols: int = 4, size: float = 2.6):
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])

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

#: The size contract of every figure (issue #53): the article's PDF shows a figure at the A4 text width
#: (6.85 in), the HTML at 1:1 at ``plot.dpi`` (150), so a figure is at most WIDTH_MAX x HEIGHT_MAX inches
#: (1080 x 780 px) and no text is under FONT_MIN pt (>= 7.5 pt once scaled into the PDF). Figures are saved
#: at their own size (no tight bounding box) with a constrained layout, so the PNG is exactly figsize x dpi.
WIDTH_MAX, HEIGHT_MAX, FONT_MIN = 7.2, 5.2, 8.0
WIDTH = 7.0  # the width every figure is drawn at


def style() -> None:
    """The one style: seaborn whitegrid, colour-blind palette, 9 pt titles, 8 pt labels, ticks and legends
    (:data:`FONT_MIN`), a constrained layout and no tight bounding box (the saved size is the drawn size)."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.0)
    plt.rcParams.update({"figure.dpi": 100, "savefig.bbox": None, "axes.titlesize": 9, "axes.labelsize": 8,
                         "legend.fontsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8, "font.size": 8,
                         "legend.title_fontsize": 8, "figure.titlesize": 9,
                         "figure.constrained_layout.use": True, "figure.constrained_layout.h_pad": 0.03,
                         "figure.constrained_layout.w_pad": 0.03,
                         "pdf.fonttype": 42, "svg.hashsalt": "powerlens", "path.simplify": False})


def legend_below(fig, handles, labels, ncol: int | None = None, y: float = 0.0, loc: str = "lower center") -> None:
    """A legend for the whole figure outside its panels, below them (never over data; at most 6 entries each).
    A second legend goes above the panels (``loc`` "upper center"): the constrained layout makes room."""
    if not handles:
        return
    ncol = ncol or min(len(handles), 3)
    leg = fig.legend(handles, labels, loc=f"outside {loc}", ncol=ncol, frameon=False, handlelength=2.2,
                     columnspacing=1.0, handletextpad=0.5, borderaxespad=0.2)
    leg.powerlens_top = loc.startswith("upper")  # save() heads a twin figure's top legend with the banner


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


def wrap_title(title: str, width: int = 26) -> str:
    """A panel title of a grid, at most two lines: a title longer than ``width`` characters breaks before its
    last parenthesis (the precision or "(random weights)") or, without one, at the space nearest its middle."""
    import textwrap

    if len(title) <= width or "\n" in title:
        return title
    i = title.rfind(" (")
    if 0 < i <= width and len(title) - i - 1 <= width:
        return title[:i] + "\n" + title[i + 1:]
    return "\n".join(textwrap.wrap(title, width, break_on_hyphens=False)[:3])


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
TWIN_COLOUR = "#b00020"
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
    fig, ax = plt.subplots(figsize=(WIDTH, 1.4))
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, wrap=True)
    ax.set_axis_off()
    return save(fig, stem, dpi)


def save(fig, stem: str | Path, dpi: int) -> list[Path]:
    """Write ``stem.pdf`` and ``stem.png`` atomically (fixed metadata, so reruns are byte-stable); a figure
    of twins gets the random-weights banner on top."""
    stem = Path(stem)
    if TRAINED["model"] == "twins":  # the banner heads the figure (the constrained layout makes room)
        top = [leg for leg in fig.legends if getattr(leg, "powerlens_top", False)]
        if top:  # a legend above the panels: the banner is its title (a suptitle would sit on it)
            top[0].set_title(TWIN_BANNER, prop={"size": 9, "weight": "bold"})
            top[0].get_title().set_color(TWIN_COLOUR)
        else:
            sup = getattr(fig, "_suptitle", None)
            old = sup.get_text() if sup is not None else ""
            fig.suptitle(TWIN_BANNER + (f"\n{old}" if old else ""), fontsize=9, color=TWIN_COLOUR, fontweight="bold")
    w, h = fig.get_size_inches()  # the contract, whatever a caller asked for (text stays at its size)
    if w > WIDTH_MAX or h > HEIGHT_MAX:
        fig.set_size_inches(min(w, WIDTH_MAX), min(h, HEIGHT_MAX))
    out = []
    for ext in ("pdf", "png"):
        path = stem.with_suffix(f".{ext}")
        meta = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, dpi=dpi, metadata=meta)
        out.append(path)
    plt.close(fig)
    return out


def grid(n: int, ncols: int = 3, size: float = 2.2, extra: float = 0.8):
    """``n`` panels in rows of ``ncols`` at the figure width :data:`WIDTH`, each row ``size`` inches tall plus
    ``extra`` for a legend below. Many models (the 13-model paper run) wrap into more rows; past
    :data:`HEIGHT_MAX` the rows get shorter (the figure's size stays within the contract, its panels flatten)."""
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    height = min(HEIGHT_MAX, size * nrows + extra)
    fig, axes = plt.subplots(nrows, ncols, figsize=(WIDTH, height), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])

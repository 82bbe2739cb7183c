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
#: (3000 characters drew one 57,846 px wide); every label of the shipped configs is shorter (a matched control's,
#: "all-MiniLM-L6-v2 matched control (seed 0)", is 42), so none is cut: a title wraps (:func:`wrap_title`).
FIGURE_TEXT_MAX = 64
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
    if "matched control" in label:  # the label says it (its random attention weights: the figure's banner)
        return label
    if is_random_label(weights_label):
        return f"{label} ({plain(weights_label)})"
    if weights_label.startswith("trained, "):
        return f"{label} ({plain(weights_label[len('trained, '):].replace(' (', ' ').rstrip(')'))})"
    return label


TWIN_SUFFIX = "_twins"  # fig_X_twins: the same figure drawn from random-weight twins only
TWIN_BANNER = "RANDOM WEIGHTS (architecture twins, matched controls): never evidence for a claim"
TWIN_COLOUR = "#b00020"
TRAINED = {"model": "trained"}  # which part :func:`draw_split` is drawing (read by :func:`save`)


def is_twin(weights_label: str) -> bool:
    return is_random_label(weights_label)


def draw_split(draw, data, weights: dict[str, str], stem, dpi: int, what: str,
               parts: tuple[bool, bool] = (True, True)) -> None:
    """Draw a per-model figure twice: models with trained weights at ``stem`` (the evidence), models with random
    weights (architecture twins, matched controls) at ``stem_twins`` (headed :data:`TWIN_BANNER`, shown in the
    report's twins category). ``parts`` (trained, random): which of the two the run writes (the workflow leaves
    out a figure for a kind of model the config does not have). ``data`` is a DataFrame with a ``model`` column
    or a list of dicts with a ``weights`` label; ``draw(part, stem)`` draws one part. A part asked for with no
    model (a config the workflow could not read ahead) gets a page that says so."""
    for twin, s in ((False, Path(stem)), (True, Path(f"{stem}{TWIN_SUFFIX}"))):
        if not parts[twin]:
            continue
        if isinstance(data, pd.DataFrame):
            part = data[data["model"].map(lambda m: is_twin(weights.get(m, "")) == twin)]
        else:
            part = [d for d in data if is_twin(d["weights"]) == twin]
        TRAINED["model"] = "twins" if twin else "trained"
        try:
            if len(part):
                draw(part, s)
            else:
                placeholder(s, f"{what}: no model with {'random' if twin else 'trained'} weights in this run", dpi)
        finally:
            TRAINED["model"] = "trained"


def placeholder(stem, text: str, dpi: int) -> list[Path]:
    style()
    fig, ax = plt.subplots(figsize=(WIDTH, 1.4))
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, wrap=True)
    ax.set_axis_off()
    return save(fig, stem, dpi)


def _cut(line: str) -> str:
    """One character fewer, cut in the middle (:func:`shorten`), a ``$`` the cut unescaped escaped again."""
    import re

    out = shorten(line.replace(ELLIPSIS, ""), max(len(line) - 2, 4))
    out = out.replace("\\" + ELLIPSIS, ELLIPSIS)  # a backslash whose $ was cut away
    return re.sub(r"(?<!\\)\$", r"\\$", out)


def fit_titles(fig) -> None:
    """Where a panel title runs into another text (a model label of 64 characters without a space cannot wrap),
    cut it in its longest line's middle until they part: after the layout, before :func:`check_text`. A title
    that overlaps nothing is left whole."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    titles = [ax.title for ax in fig.axes if ax.title.get_text() and ax.title.get_visible()]

    def over(a, b) -> bool:
        return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOUCH_PX and min(a.y1, b.y1) - max(a.y0, b.y0) > TOUCH_PX)

    for _ in range(40 * len(titles)):
        others = drawn_texts(fig)
        pair = next(((t, o) for t in titles for o, bb in others if o is not t and over(t.get_window_extent(r), bb)),
                    None)
        if pair is None:
            return
        hit = max((x for x in pair if any(x is t for t in titles)), key=lambda x: x.get_window_extent(r).width)
        lines = hit.get_text().split("\n")
        k = max(range(len(lines)), key=lambda n: len(lines[n]))
        if len(lines[k]) <= 6:
            return  # nothing left to cut: the collision check names the pair
        lines[k] = _cut(lines[k])
        hit.set_text("\n".join(lines))


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
    fit_titles(fig)  # a title wider than its panel (a long label without spaces) is cut, never drawn over
    check_text(fig, stem.name)  # the build stops on two texts drawn over one another
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


class TextCollision(ValueError):
    """Two texts of a figure drawn over one another (:func:`check_text`)."""


#: Two texts may touch by this much (pixels at the figure's screen dpi) without counting as a collision.
TOUCH_PX = 1.0


def drawn_texts(fig) -> list:
    """Every text the figure draws, after its layout: titles, axis and tick labels, legend texts, annotations,
    the suptitle (a text that is hidden, empty or clipped away is not drawn, so not listed), each with its
    window extent. Recorded while the figure draws itself, so only what reaches the page counts."""
    import matplotlib.text as mtext

    seen: list = []
    real = mtext.Text.draw

    def draw(self, renderer):
        real(self, renderer)
        if self.get_visible() and str(self.get_text()).strip() and (
                not isinstance(self, mtext.Annotation) or self._check_xy(renderer)):
            seen.append(self)

    mtext.Text.draw = draw
    try:
        fig.canvas.draw()
    finally:
        mtext.Text.draw = real
    renderer = fig.canvas.get_renderer()
    return [(t, t.get_window_extent(renderer)) for t in dict.fromkeys(seen)]


def text_collisions(fig, touch: float = TOUCH_PX) -> list[tuple[str, str]]:
    """The pairs of drawn texts (:func:`drawn_texts`) whose boxes overlap by more than ``touch`` pixels both ways
    (a text never collides with itself; two entries of one legend only where they overlap too)."""
    texts = drawn_texts(fig)
    out = []
    for i, (a, ba) in enumerate(texts):
        for b, bb in texts[i + 1:]:
            w = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            h = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            if w > touch and h > touch:
                out.append((a.get_text(), b.get_text()))
    return out


def check_text(fig, name: str = "figure") -> None:
    """Stop with an error naming the first two texts of ``fig`` drawn over one another (after its layout)."""
    hits = text_collisions(fig)
    if hits:
        a, b = hits[0]
        more = f" (and {len(hits) - 1} more pair(s))" if len(hits) > 1 else ""
        plt.close(fig)
        raise TextCollision(f"{name}: the texts {a!r} and {b!r} are drawn over one another{more}; move one "
                            "(the figure's module places it)")


def place_labels(fig, labels: list, offsets: list[tuple[float, float, str]]) -> None:
    """Keep each annotation of ``labels`` (in order of importance) clear of every other drawn text: where it is,
    else the first of ``offsets`` (points, horizontal alignment) where it overlaps nothing kept so far, else it is
    removed. The
    labels must stay out of the layout (``set_in_layout(False)``) so that moving them moves nothing else."""
    mine = set(map(id, labels))
    fixed = [bb for t, bb in drawn_texts(fig) if id(t) not in mine]
    renderer = fig.canvas.get_renderer()

    def clear(bb):
        return all(min(bb.x1, o.x1) - max(bb.x0, o.x0) <= TOUCH_PX or min(bb.y1, o.y1) - max(bb.y0, o.y0) <= TOUCH_PX
                   for o in fixed)

    for t in labels:
        for dx, dy, ha in [(*t.xyann, t.get_ha()), *offsets]:
            t.xyann = (dx, dy)
            t.set_ha(ha)
            bb = t.get_window_extent(renderer)
            if clear(bb):
                fixed.append(bb)
                break
        else:
            t.remove()

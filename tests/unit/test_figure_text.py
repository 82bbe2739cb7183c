"""Issue #67 (point 4): the figures are readable. No two texts of a figure drawn over one another (checked at
build time in save(), the one place every figure is written), no legend of more than 6 entries, captions that say
what to look at and name no file, one model order (table_claim_verdicts'), and no figure for a kind of model the
run does not have."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from powerlens.outputs import plotting
from powerlens.outputs.figures.captions import CAPTIONS, TWINS_NOTE

from .test_figures import drawn  # noqa: F401  (the fixture: every figure save() closed)

DPI = 100


def _legend_sizes(fig) -> list[int]:
    legends = list(fig.legends) + [leg for ax in fig.axes for leg in [ax.get_legend(), *ax.artists]
                                   if leg is not None and hasattr(leg, "get_texts")]
    return [len(leg.get_texts()) for leg in legends]


def test_two_overlapping_annotations_stop_the_build_naming_both(tmp_path):
    plotting.style()
    fig, ax = plotting.plt.subplots(figsize=(4, 3))
    ax.annotate("first label", (0.5, 0.5))
    ax.annotate("second label", (0.52, 0.5))
    with pytest.raises(plotting.TextCollision, match="'first label' and 'second label'"):
        plotting.save(fig, tmp_path / "clash", DPI)
    assert not (tmp_path / "clash.png").exists()


def test_texts_apart_or_touching_pass_and_hidden_texts_do_not_count():
    plotting.style()
    fig, ax = plotting.plt.subplots(figsize=(4, 3))
    ax.annotate("left", (0.1, 0.5))
    ax.annotate("right", (0.7, 0.5))
    ax.text(0.1, 0.5, "hidden", visible=False)
    ax.text(0.7, 0.5, "   ")  # blank: draws nothing
    assert plotting.text_collisions(fig) == []
    texts = [t.get_text() for t, _ in plotting.drawn_texts(fig)]
    assert "left" in texts and "right" in texts and "hidden" not in texts
    plotting.plt.close(fig)


def test_place_labels_moves_or_drops_a_label_that_would_cover_another():
    plotting.style()
    fig, ax = plotting.plt.subplots(figsize=(4, 3))
    ax.set_xlim(0, 1)
    a = ax.annotate("256", (0.5, 0.5), textcoords="offset points", xytext=(4, 4))
    b = ax.annotate("1024", (0.5, 0.5), textcoords="offset points", xytext=(4, 4))
    for t in (a, b):
        t.set_in_layout(False)
    plotting.place_labels(fig, [a, b], [(4, 4, "left"), (4, -11, "left")])
    assert plotting.text_collisions(fig) == []
    plotting.plt.close(fig)


def test_every_legend_of_every_figure_has_at_most_6_entries(tmp_path, drawn):  # noqa: F811
    """The per-model figures at 9 matched controls (the offline run's twins part) and 13 models (the paper
    run), and the ALBERT figures; the steering and theory figures are checked in test_figures.py."""
    from powerlens.outputs.figures import fig_albert_consensus, fig_albert_rotation, fig_gap, fig_spectra

    rng = np.random.default_rng(3)
    for n, controls in ((9, True), (13, False)):
        names = [f"m{i}" for i in range(n)]
        labels = {m: (f"Model {i // 3} matched control (seed {i % 3})" if controls else f"Model {i}")
                  for i, m in enumerate(names)}
        weights = dict.fromkeys(names, "random attention weights" if controls else "trained")
        gap = pd.DataFrame({"model": np.repeat(names, 5), "layer": np.tile(np.arange(5), n),
                            "leading_type": rng.choice(["complex pair", "real positive"], 5 * n),
                            "ratio_next": rng.uniform(0.5, 0.99, 5 * n), "abs_lambda1": rng.uniform(1, 3, 5 * n)})
        fig_gap(gap, labels, weights, tmp_path / f"gap{n}", DPI)
        ev = rng.normal(size=(3, 12)) + 1j * rng.normal(size=(3, 12))
        fig_spectra([{"label": labels[m], "weights": weights[m], "eigvals": ev, "shared": False} for m in names[:6]],
                    tmp_path / f"s{n}", DPI)
    dyn = pd.DataFrame({"model": "alb", "mode": np.repeat(["model", "attention-only"], 6),
                        "layer": np.tile(range(6), 2),
                        "shared": True, "gamma": rng.uniform(0, 1, 12), "span_M_alignment": rng.uniform(0, 1, 12),
                        "pairwise_abs_cos": rng.uniform(0, 1, 12), "weights": "trained"})
    fig_albert_consensus(dyn, {"alb": "ALBERT base"}, {"alb": "trained"}, tmp_path / "cons", DPI)
    run = {"label": "ALBERT base", "weights": "trained", "trajectory": rng.normal(size=(21, 4, 2)),
           "leading_type": "complex pair", "arg_mu1": 0.3, "predicted_dtheta": 0.3, "mean_dtheta": 0.29,
           "rotation_plane": "span(Re v_1, Im v_1)"}
    fig_albert_rotation([run], tmp_path / "rot", DPI)
    assert len(drawn) == 6
    for fig in drawn:
        assert max(_legend_sizes(fig)) <= 6, _legend_sizes(fig)
    shown = {t.get_text() for fig in drawn[:2] for leg in fig.legends + [a.get_legend() for a in fig.axes]
             if leg is not None for t in leg.get_texts()}
    assert {"Model 0 matched control", "seed 2"} <= shown  # colour: the model, line style: the seed
    texts = [t.get_text() for fig in drawn for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert not any(plotting.ELLIPSIS in str(t) for t in texts)  # no title cut in its middle


@pytest.mark.parametrize("name", sorted(CAPTIONS))
def test_captions_say_what_to_look_at_and_name_no_file(name):
    cap = CAPTIONS[name]
    assert not re.search(r"\b(?:fig|table)_\w+", cap), cap
    assert "Look at" in cap or "expects" in cap
    assert re.search(r"\bC\d+\b", cap)  # the claim it shows
    assert "grey line" not in cap.lower() or name not in ("fig_gamma", "fig_rho")  # the nulls: the series colour
    assert not re.search(r"\b(?:fig|table)_\w+", TWINS_NOTE)


def test_fig_spectra_caption_describes_the_shared_marker_only_conditionally():
    cap = CAPTIONS["fig_spectra"]
    assert "Where a model shares one layer across depths (ALBERT)" in cap


def test_figures_run_models_in_the_verdict_tables_order():
    """Families sorted by name as table_claim_verdicts' columns (BERT, Gemma 3, Llama), config order within."""
    from powerlens.outputs.figures.style import in_model_order, model_rank

    meta = {"minilm": {"arch": "bert", "weights_label": "trained weights", "random_weights": False},
            "smollm2": {"arch": "llama", "weights_label": "trained, 4-bit (Q4_1)", "random_weights": False},
            "gemma3": {"arch": "gemma3", "weights_label": "trained, 4-bit (Q4_K_M)", "random_weights": False},
            "minilm-control": {"arch": "bert", "weights_label": "random attention weights", "random_weights": True}}
    rank = model_rank(meta)
    assert sorted(rank, key=rank.get) == ["minilm", "minilm-control", "gemma3", "smollm2"]
    df = pd.DataFrame({"model": ["minilm", "smollm2", "smollm2", "gemma3"], "layer": [0, 0, 1, 0]})
    assert in_model_order(df, rank)[["model", "layer"]].values.tolist() == [
        ["minilm", 0], ["gemma3", 0], ["smollm2", 0], ["smollm2", 1]]


def test_a_part_the_run_does_not_have_is_not_written(tmp_path):
    """draw_split writes only the parts asked for: no `_twins` file without random-weight models."""
    written = []
    df = pd.DataFrame({"model": ["a", "b"]})
    plotting.draw_split(lambda d, s: written.append((list(d["model"]), s.name)), df,
                        {"a": "trained", "b": "random weights"}, tmp_path / "fig_x", DPI, "fig_x",
                        parts=(True, False))
    assert written == [(["a"], "fig_x")]
    assert not list(tmp_path.iterdir())


def test_a_title_wider_than_its_panel_is_cut_never_drawn_over(tmp_path):
    """#67: a 64-character label without a space cannot wrap; in a grid of three panels its titles would run
    into each other and stop the build. save() cuts each in its middle until it fits, keeping its ends and an
    escaped $ escaped, and the collision check then passes."""
    from powerlens.outputs.plotting import plain, plt, save

    fig, axes = plt.subplots(1, 3, figsize=(7, 2))
    for ax, what in zip(axes, ("law", "real pass", "KL")):
        ax.set_title(plain("$" + "x" * 62 + "$") + f": {what}")
    save(fig, tmp_path / "wide", 60)
    assert (tmp_path / "wide.png").is_file()


def test_the_cut_keeps_a_dollar_escaped():
    from powerlens.outputs.plotting import ELLIPSIS, _cut

    line = r"\$a\$a\$a\$a\$a\$a\$a\$a: law"
    for _ in range(8):
        line = _cut(line)
        assert "$" not in line.replace(r"\$", ""), line  # every $ stays escaped (matplotlib never reads mathtext)
    assert line.endswith("law") and line.count(ELLIPSIS) == 1

"""Issue #53 (figures): every figure fits 1280x800 and an A4 PDF (<= 7.2 x 5.2 in, no text under 8 pt), at most
6 entries per legend (every figure: the dynamics, spectra, gap, theory and steering figures here, the ALBERT ones
and many-model cases in test_figure_text.py), fig_rho's y axis in [0, 1], and one caption per figure (CAPTIONS,
repeated in the rst). Every figure drawn here also passes save()'s text-collision check (issue #67)."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlens.outputs import plotting
from powerlens.outputs.figures.captions import CAPTIONS

ROOT = Path(__file__).resolve().parents[2]
DPI = 150
PDF_WIDTH_IN = 6.85  # the article's A4 text width


def _png_size(path: Path) -> tuple[int, int]:
    b = path.read_bytes()
    return struct.unpack(">II", b[16:24])


@pytest.fixture
def drawn(monkeypatch):
    """Every figure closed by save(), kept for inspection."""
    figs = []
    real = plotting.plt.close

    def keep(fig=None):
        if fig is not None:
            figs.append(fig)
        real(fig)

    monkeypatch.setattr(plotting.plt, "close", keep)
    return figs


def _check(fig, png: Path) -> None:
    w, h = _png_size(png)
    assert w <= 7.2 * DPI and h <= 5.2 * DPI, (png.name, w, h)
    assert w <= 1280 and h <= 800
    fig.canvas.draw()
    sizes = [t.get_fontsize() for t in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text"))
             if t.get_visible() and str(t.get_text()).strip()]
    width_in = w / DPI
    assert min(sizes) >= plotting.FONT_MIN, (png.name, min(sizes))
    assert min(sizes) * min(1.0, PDF_WIDTH_IN / width_in) >= 7.5, png.name
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for leg in legends:
        assert len(leg.get_texts()) <= 6, (png.name, [t.get_text() for t in leg.get_texts()])


def _dyn(model: str, mode: str, L: int, rng) -> pd.DataFrame:
    d = {"model": model, "mode": mode, "layer": np.arange(L), "weights": "trained"}
    for stat in ("gamma", "rho", "tilt", "attn_tilt", "ffn_tilt"):
        d[stat] = rng.uniform(0, 1, L)
        d[f"{stat}_null_q95"] = rng.uniform(0, 1, L)
        d[f"{stat}_null_median"] = rng.uniform(0, 0.5, L)
        d[f"{stat}_p_holm"] = rng.uniform(0, 0.1, L)
        d[f"{stat}_sig"] = rng.choice(["yes", "no", "undecided"], L)
        d[f"{stat}_saturated"] = rng.uniform(0, 1, L) > 0.8
    return pd.DataFrame(d)


def test_dynamics_figures_meet_the_size_and_font_contract(tmp_path, drawn):
    from powerlens.outputs.figures import fig_gamma, fig_gamma_gap, fig_rho, fig_tilt, gamma_gap_points

    rng = np.random.default_rng(0)
    df = pd.concat([_dyn(m, mode, L, rng) for m, L in (("a", 6), ("b", 30), ("c", 18))
                    for mode in ("model", "attention-only")], ignore_index=True)
    df["shared"] = False
    labels = {"a": "all-MiniLM-L6-v2", "b": "SmolLM2-135M-Instruct", "c": "Gemma-3-270M"}
    weights = {"a": "trained", "b": "trained, 4-bit (Q4_1)", "c": "trained, 4-bit (Q4_K_M)"}
    fig_gamma(df, labels, weights, tmp_path / "g", DPI, alpha=0.05)
    fig_rho(df, labels, weights, tmp_path / "r", DPI, alpha=0.05)
    fig_tilt(df, labels, weights, tmp_path / "t", DPI, alpha=0.05)
    pairs = []
    for m in "abc":
        g = df[df["model"] == m]
        spec = pd.DataFrame({"layer": g["layer"].unique(), "ratio_next": rng.uniform(0.5, 0.99, g["layer"].nunique())})
        pairs.append({"label": labels[m], "weights": weights[m], "points": gamma_gap_points(g, spec),
                      "control": gamma_gap_points(g, spec)})
    fig_gamma_gap(pairs, tmp_path / "gg", DPI)
    for fig, name in zip(drawn, ("g", "r", "t", "gg")):
        _check(fig, tmp_path / f"{name}.png")
    rho_axes = [ax for ax in drawn[1].axes if ax.get_visible() and ax.get_ylabel() is not None][:3]
    assert all(ax.get_ylim() == (0.0, 1.0) for ax in rho_axes)


def test_twin_figures_with_many_panels_stay_within_the_cap(tmp_path, drawn):
    from powerlens.outputs.figures import fig_gamma

    rng = np.random.default_rng(1)
    models = [f"m{i}" for i in range(13)]  # the paper run's 13 models
    df = pd.concat([_dyn(m, mode, 12, rng) for m in models for mode in ("model", "attention-only")],
                   ignore_index=True)
    df["shared"] = False
    weights = dict.fromkeys(models, "random weights")
    plotting.TRAINED["model"] = "twins"
    try:
        fig_gamma(df, {}, weights, tmp_path / "g", DPI, alpha=0.05)
    finally:
        plotting.TRAINED["model"] = "trained"
    _check(drawn[0], tmp_path / "g.png")


def test_spectra_gap_theory_and_steering_figures_meet_the_contract(tmp_path, drawn):
    from powerlens.outputs.figures import fig_gap, fig_spectra, fig_steering, fig_theory

    rng = np.random.default_rng(2)
    ev = rng.normal(size=(4, 16)) + 1j * rng.normal(size=(4, 16))
    ev = ev[:, np.argsort(-np.abs(ev), axis=1)[0]]
    fig_spectra([{"label": f"model {i}", "weights": "trained", "eigvals": ev, "shared": i == 0} for i in range(3)],
                tmp_path / "s", DPI)
    gap = pd.DataFrame({"model": np.repeat(["a", "b", "c"], 4), "layer": np.tile(np.arange(4), 3),
                        "leading_type": "complex pair", "ratio_next": rng.uniform(0.5, 0.99, 12),
                        "abs_lambda1": rng.uniform(1, 3, 12)})
    fig_gap(gap, {}, dict.fromkeys("abc", "trained"), tmp_path / "gap", DPI)
    S, T = 5, 60
    real = {"err_sweep": np.exp(-np.arange(T))[None].repeat(S, 0), "err_control": np.exp(-np.arange(T)),
            "sweep_sharpness": np.array([0.1, 0.3, 1, 3, 10]), "rate_control": 0.375}
    cplx = {"dist_sweep": real["err_sweep"], "sweep_sharpness": real["sweep_sharpness"],
            "dtheta_sweep": -0.4 + np.exp(-np.arange(T))[None].repeat(S, 0), "dtheta_control": np.full(T, -0.4),
            "angle_control": -0.4}
    n = 40
    bip = {"cell_score": rng.uniform(0.05, 10, n), "cell_radius": rng.uniform(0.1, 100, n),
           "cell_heads": rng.choice([1, 2, 4, 8], n), "cell_degenerate": rng.uniform(0, 1, n) > 0.8,
           "cell_found": np.ones(n, bool), "sweep_sharpness": real["sweep_sharpness"], "sweep_heads": [1, 2, 4, 8],
           "positive_control_radius": 4.6}
    notes = {"C2": {s: "8 of 8 seeds" for s in real["sweep_sharpness"]}, "C4": "exact stratified p 0.001"}
    fig_theory(real, cplx, bip, notes, tmp_path / "th", DPI)
    rows = []
    for m, head in (("enc", False), ("dec", True)):
        for tgt in ("embedding:cat", "random:seed0"):
            for k in (4, 32, 256):
                for method in ("rank-1 (last layer O')", "activation addition (matched norm)",
                               "activation addition (beta sweep)"):
                    rows.append({"model": m, "weights": "trained", "target": tgt, "method": method, "kappa": k,
                                 "change_norm_model": k * 10.0, "cos_after_layer_model": k / 300,
                                 "change_norm_attention_only": k / 50, "cos_after_layer_attention_only": k / 260,
                                 "kl_unrelated": k / 10 if head else np.nan, "p_target": k / 1e3 if head else np.nan})
    fig_steering(pd.DataFrame(rows), {}, {"enc": "trained", "dec": "trained"}, tmp_path / "st", DPI)
    for fig, name in zip(drawn, ("s", "gap", "th", "st")):
        _check(fig, tmp_path / f"{name}.png")
    # the encoder's probability panel holds a short note, no empty axes
    assert any("no LM head" in t.get_text() for t in drawn[3].texts + [x for ax in drawn[3].axes for x in ax.texts])


def _unrst(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\\", "").replace("``", "")).strip()


@pytest.mark.parametrize("name", sorted(CAPTIONS))
def test_each_report_caption_repeats_its_captions_text(name):
    rst = ROOT / "workflow" / "report" / f"{name}.rst"
    assert _unrst(CAPTIONS[name]) in _unrst(rst.read_text())
    sentences = [s for s in re.split(r"(?<=[.;])\s+(?=[A-Z(])", CAPTIONS[name]) if s]
    assert 2 <= len(sentences) <= 8 and not re.search(r"\d\.\d{3,}", CAPTIONS[name])


def test_every_figure_has_a_caption_and_c8_points_to_the_scatter():
    from powerlens.analysis.claims.criteria import FIG

    assert set(CAPTIONS) == {"fig_gamma", "fig_rho", "fig_tilt", "fig_gap", "fig_gamma_gap", "fig_spectra",
                             "fig_theory", "fig_steering", "fig_albert_consensus", "fig_albert_rotation"}
    assert FIG["C8"] == "fig_gamma_gap, fig_gap"
    assert '"fig_gamma_gap"' in (ROOT / "workflow/rules/report.smk").read_text()


def test_kappa_labels_never_crowd_and_always_show_the_kappa_reached():
    """Revision 6's doublings put steering points a factor 2 apart: a label at least half a decade from the last
    one, and the last point (the kappa the verdict reads) always labelled."""
    from powerlens.outputs.figures.steering import LABEL_GAP, _labelled

    x = [4, 32, 256, 512, 1024, 2048, 4096]
    keep = _labelled(x)
    assert keep[0] == 0 and keep[-1] == len(x) - 1
    assert all(np.log10(x[b] / x[a]) >= LABEL_GAP for a, b in zip(keep, keep[1:]))
    assert _labelled([10.0]) == [0]

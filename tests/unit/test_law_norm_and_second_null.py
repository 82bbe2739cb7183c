"""Spec revision 3 (paper.md): the law's norm is the layer's own, the second null avoids V's kernel."""

import numpy as np
import pytest
import torch

from powerlens.analysis.spectra import layer_spectrum, null_eig_choice
from powerlens.models.adapters import ADAPTERS
from powerlens.models.archs import TINY_MODELS
from powerlens.models.attention import attention_only_step

from ..conftest import build_tiny


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gemma3"])
def test_layernorm_option_of_the_law_is_the_layers_own_rmsnorm(name):
    """``norm: layernorm`` on an RMSNorm model applies the model's RMSNorm module (no mean-centring), in the
    dynamics' law (steering's law calls the same :func:`powerlens.models.attention.law_norm`): compared with the
    real ``input_layernorm`` module."""
    model = build_tiny(name, torch.float64)
    w = ADAPTERS[TINY_MODELS[name].arch].extract(model)
    lw = w.layers[0].to(torch.float64, "cpu").exact()
    x = torch.randn(2, 5, w.d_model, dtype=torch.float64) * 3 + 1.0  # a non-zero mean, so centring would show
    y = attention_only_step(x, lw, w.n_heads, True, torch.ones(2, 5, dtype=torch.bool), "layernorm")
    from powerlens.models.attention import attention_output, visible_keys

    pre = x + attention_output(x, lw, w.n_heads, visible_keys(5, True, lw.window, torch.ones(2, 5, dtype=torch.bool)))
    with torch.no_grad():
        ref = model.layers[0].input_layernorm(pre)  # the model's own RMSNorm module
    assert torch.allclose(y, ref.detach(), atol=1e-5, rtol=1e-5)  # the module normalises in float32
    # mean-centring LayerNorm (revision 2's law on every model) is measurably different
    mu = pre.mean(-1, keepdim=True)
    ln = (pre - mu) / torch.sqrt(((pre - mu) ** 2).mean(-1, keepdim=True) + lw.ln_eps) * lw.ln_w
    assert (ln - ref).abs().max() > 1e-3


def test_second_null_never_draws_from_the_kernel_of_a_grouped_query_F():
    """Grouped-query attention: F = O V with V of rank 4 in 12 dimensions, so 8 eigenvalues are numerically 0.
    The second null draws among |lambda| > 1e-9 |lambda_1| only, and records how many candidates it had."""
    rng = np.random.default_rng(0)
    d, r = 12, 4
    F = rng.standard_normal((d, r)) @ rng.standard_normal((r, d))  # rank 4
    s = layer_spectrum(F, k=4, rng=np.random.default_rng(1))
    small = np.abs(s.eigvals) <= 1e-9 * abs(s.eigvals[0])
    assert small.sum() == d - r
    picks = {null_eig_choice(s.eigvals, np.random.default_rng(k)) for k in range(200)}
    assert picks and not any(small[j] for j in picks if j >= 0)
    summ = s.summary()
    lead_complex = summ["leading_type"] == "complex pair"
    nonzero = [j for j in range(1, d) if not small[j]]
    assert 0 < summ["null_eig_candidates"] <= len(nonzero) - (1 if lead_complex else 0)


def _steer(name, kappas, post_gain_seed=None):
    import transformers

    from powerlens.analysis import steering as st
    from powerlens.core.corpus import prompt_batches
    from powerlens.models.adapters import get_adapter
    from powerlens.models.sources import byte_tokenizer

    spec = TINY_MODELS[name]
    ad = get_adapter(spec.arch)
    torch.manual_seed(0)
    model = getattr(transformers, ad.head_class).from_config(spec.hf_config()).eval()
    if post_gain_seed is not None:  # Gemma's post-norm weights start at 0 (gain 1): give them a spread
        g = torch.Generator().manual_seed(post_gain_seed)
        with torch.no_grad():
            pw = ad.output_norm(model).weight
            pw.copy_(torch.randn(pw.shape, generator=g) * 2.0)
    tok = byte_tokenizer(spec.arch)
    w = ad.extract(model)
    bs = prompt_batches(["The cat sat.", "A dog ran home.", "Rain falls."], tok, 16, 2)[0]
    lam1 = float(np.abs(np.linalg.eigvals(w.F(w.n_layers - 1).numpy())).max())
    res = st.run_steering(model, tok, spec.arch, w, bs, lam1, [{"kind": "random", "seed": 3}], kappas, head=True,
                          shared_edit="every_depth", model_name="m", weights_label="random weights")
    import pandas as pd

    return pd.DataFrame(res["rows"]), w


def test_grouped_query_steering_states_no_bound_and_the_eigen_check_decides():
    """tiny-llama (grouped-query: V of rank H_kv d_h < d): z solves V^T z = u only in least squares, so every
    row carries ||V^T z - u||, no stated bound (an empty cell with the reason), and "u principal" comes from the
    eigen-solve of the matrix the edit really makes, F + alpha u (P u)^T."""
    from powerlens.analysis import steering as st

    df, w = _steer("tiny-llama", [0, 1e4])
    r1 = df[df["method"].str.startswith("rank-1")]
    assert (r1["lstsq_residual"] > 1e-3).all() and r1["kappa_bound"].isna().all()
    assert r1["bound_note"].str.contains("no exact solution").all() and r1["bound_note"].str.startswith("none").all()
    last = w.layer(w.n_layers - 1)
    F, W_V = last.F.numpy(), last.v_per_head().double().numpy()
    assert np.linalg.matrix_rank(W_V) < w.d_model
    top = r1[r1["kappa"] == 1e4].iloc[0]
    chk = st.principal_check(F, W_V, _u_of(w, df), top["alpha"])
    assert bool(top["u_principal"]) == chk["u_principal"] and top["cos_v1_u"] == pytest.approx(chk["cos_v1_u"])
    # a full-rank V (tiny-gpt2) keeps its bound: the residual is round-off there
    df2, _ = _steer("tiny-gpt2", [0, 1e4])
    r2 = df2[df2["method"].str.startswith("rank-1")]
    assert (r2["lstsq_residual"] < 1e-10).all() and r2["kappa_bound"].notna().all() and (r2["bound_note"] == "").all()


def _u_of(w, df):
    """The random target u = random:seed3 as steering draws it."""
    from powerlens.analysis.steering import target_vector

    return target_vector(None, None, "llama", "random", None, 3, w.d_model)[0]


def test_post_attention_norm_caps_the_change_and_turns_it_to_p_times_u():
    """tiny Gemma 3 with spread post-norm gains p: the edit's change reaches the residual stream through the
    post-attention RMSNorm, so its measured norm (after the norm) stays below 2 x the cap sqrt(d) max|p| for
    any kappa, while the change at W_O's output grows with alpha; the alignment with p * u is reported and at
    large kappa exceeds the alignment with u; the baseline is matched after the norm."""
    df, w = _steer("tiny-gemma3", [0, 1e2, 1e4, 1e6], post_gain_seed=1)
    r1 = df[df["method"].str.startswith("rank-1")].set_index("kappa")
    cap = float(r1["post_norm_cap"].iloc[0])
    p = w.layer(w.n_layers - 1).post_w.double().numpy()
    assert cap == pytest.approx(np.sqrt(w.d_model) * np.abs(p).max())
    assert r1.loc[1e6, "change_norm_at_W_O"] > 1e3 * r1.loc[1e2, "change_norm_at_W_O"]
    assert (r1["change_norm_model"] <= 2 * cap + 1e-9).all()
    assert r1.loc[1e6, "change_norm_model"] == pytest.approx(r1.loc[1e4, "change_norm_model"], rel=1e-3)
    assert r1.loc[1e6, "cos_pu_after_layer_model"] > r1.loc[1e6, "cos_after_layer_model"]
    aa = df[df["method"].str.startswith("activation")].set_index("kappa")
    assert (aa["change_norm_model"] == r1["change_norm_model"]).all()

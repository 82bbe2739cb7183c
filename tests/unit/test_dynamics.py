"""Token dynamics: the paper's law against a direct per-token computation, and the statistics on layers
whose behaviour is known (a large real gap tilts every token; a null direction is a fair coin)."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from powerlens.adapters import ADAPTERS
from powerlens.attention import layer_norm
from powerlens.corpus import Batch, batches, read_prompts
from powerlens.dynamics import attention_only_step, layer_directions, layer_stats, run_attention_only
from powerlens.errors import PowerlensError
from powerlens.spectra import layer_spectrum, spectra_arrays
from powerlens.weights import LayerWeights, ModelWeights

from ..conftest import build_tiny


def direct_step(x, lw, H, causal, mask, norm):
    """x_i(t+1) = N(x_i + sum_h W_O^h sum_j A^h_ij (W_V^h x_j + b_V^h) + b_O), token by token, head by head."""
    x = x.numpy()
    B, T, d = x.shape
    dh = d // H
    W = {k: getattr(lw, k).numpy() for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}
    out = np.zeros_like(x)
    for b in range(B):
        for i in range(T):
            acc = x[b, i].copy() + W["b_O"]
            for h in range(H):
                sl = slice(h * dh, (h + 1) * dh)
                q = W["W_Q"][sl] @ x[b, i] + W["b_Q"][sl]
                keys = [j for j in range(T) if mask[b, j] and (not causal or j <= i)
                        and (lw.window is None or i - j < lw.window)]
                s = np.array([lw.attn_scale * q @ (W["W_K"][sl] @ x[b, j] + W["b_K"][sl]) for j in keys])
                a = np.exp(s - s.max())
                a /= a.sum()
                ctx = sum(a[n] * (W["W_V"][sl] @ x[b, j] + W["b_V"][sl]) for n, j in enumerate(keys))
                acc += W["W_O"][:, sl] @ ctx
            if norm == "l2":
                out[b, i] = acc / np.linalg.norm(acc)
            else:
                out[b, i] = layer_norm(torch.tensor(acc), lw.ln_w, lw.ln_b, lw.ln_eps).numpy()
    return out


@pytest.mark.parametrize("norm", ["l2", "layernorm"])
@pytest.mark.parametrize("name", ["tiny-gpt-neo", "tiny-gpt2", "tiny-bert"])
def test_attention_only_matches_direct_computation(name, norm):
    """Causal + local window + unscaled (GPT-Neo), causal + scaled (GPT-2), padded bidirectional (BERT)."""
    model = build_tiny(name, torch.float64)
    w = ADAPTERS[model.config.model_type].extract(model)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 9, w.d_model, generator=g, dtype=torch.float64)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    for t, lw in enumerate(w.layers):
        lw = dataclasses.replace(lw, scores_fp32=False)  # as run_attention_only does
        y = attention_only_step(x, lw, w.n_heads, w.causal, mask, norm)
        ref = direct_step(x, lw, w.n_heads, w.causal, mask.numpy(), norm)
        valid = mask.bool().numpy()
        assert np.abs(y.numpy() - ref)[valid].max() < 1e-12, (name, t)
    if name == "tiny-gpt-neo":
        assert w.layers[1].window == 4 and w.layers[0].attn_scale == 1.0


def synthetic_weights(F: np.ndarray, n_heads: int = 2) -> ModelWeights:
    """One shared layer with W_O W_V = F, W_Q = W_K = 0 (uniform attention) and no biases."""
    d = F.shape[0]
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    z = torch.zeros(d, d, dtype=torch.float64)
    lw = LayerWeights(z, z, t(np.eye(d)), t(F), *(torch.zeros(d, dtype=torch.float64) for _ in range(4)),
                      torch.ones(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64), 1e-5, 1.0)
    return ModelWeights("bert", "post", False, d, n_heads, [lw], [0])


def run(F, X0, tokens_per_prompt, steps, seed=0):
    """The attention-only pipeline on initial states X0 (n, d), prompts of ``tokens_per_prompt`` tokens."""
    w = synthetic_weights(F)
    z = spectra_arrays([layer_spectrum(F, k=4)], [0])
    dirs = layer_directions(z, seed)
    n = X0.shape[0]
    ids = [list(range(s, s + tokens_per_prompt)) for s in range(0, n, tokens_per_prompt)]
    bs = batches(ids, [[0] * len(i) for i in ids], batch_size=64, pad_id=0)
    E = torch.tensor(X0)
    arr = run_attention_only(lambda idx: E[idx], w, dirs, bs, steps, norm="l2", progress=False)
    return layer_stats(arr, dirs)


def test_large_real_gap_tilts_every_token():
    """Symmetric F with lambda_1 = 9 >> |lambda_i| <= 0.5: one token per prompt, so each step is a power
    step on I + F; every token's alignment with v_1 increases (rho = 1) and gamma grows."""
    rng = np.random.default_rng(0)
    d = 16
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.concatenate([[9.0], rng.uniform(-0.5, 0.5, d - 1)])
    F = Q @ np.diag(lam) @ Q.T
    df = run(F, rng.standard_normal((400, d)), tokens_per_prompt=1, steps=4)
    assert (df["rho"] == 1.0).all() and (df["p_holm"] < 1e-50).all()
    assert np.all(np.diff(df["gamma"]) > 0) and df["gamma"].iloc[-1] > 0.999
    assert (df["leading_type"] == "real positive").all()


def test_large_gap_with_multi_token_attention():
    """Several tokens per prompt with uniform attention: consensus on v_1 (pairwise cosine -> 1)."""
    rng = np.random.default_rng(1)
    d = 16
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    F = Q @ np.diag(np.concatenate([[6.0], rng.uniform(-0.3, 0.3, d - 1)])) @ Q.T
    X0 = rng.standard_normal((400, d)) + 2.0 * Q[:, 0]  # mean along v_1, so consensus is on +v_1
    df = run(F, X0, tokens_per_prompt=8, steps=30)
    assert df["gamma"].iloc[-1] > 0.99 and df["pairwise_cos"].iloc[-1] > 0.99
    assert df["rho"].iloc[0] > 0.9 and df["gamma"].iloc[0] < df["gamma"].iloc[5]


def test_null_direction_is_a_fair_coin():
    """One token per prompt and F = R - I with R orthogonal: a step maps x to R x / |x|. For isotropic
    tokens, |<R x, u>| and |<x, u>| are exchangeable for any fixed u, so for the random null direction
    rho ~ Bin(n, 1/2) / n: inside the 99.9% binomial band and not significant."""
    rng = np.random.default_rng(2)
    d, n = 24, 4000
    R, _ = np.linalg.qr(rng.standard_normal((d, d)))
    df = run(R - np.eye(d), rng.standard_normal((n, d)), tokens_per_prompt=1, steps=3, seed=5)
    band = 3.29 * math.sqrt(0.25 / n)
    assert (abs(df["rho_null_random"] - 0.5) < band).all(), df["rho_null_random"].tolist()
    assert (df["p_holm_null_random"] > 0.05).all()


def test_prompt_file_errors(tmp_path):
    p = tmp_path / "p.txt"
    p.write_text("\n  \n")
    with pytest.raises(PowerlensError, match="holds no prompts"):
        read_prompts(p)
    p.write_bytes(b"caf\xe9\n")
    with pytest.raises(PowerlensError, match="not UTF-8"):
        read_prompts(p)
    with pytest.raises(PowerlensError, match="does not exist"):
        read_prompts(tmp_path / "nope.txt")


def test_shipped_corpus():
    from ..conftest import REPO

    prompts = read_prompts(REPO / "config/prompts.txt")
    assert len(prompts) >= 200 and len(set(prompts)) == len(prompts)
    lengths = [len(p.split()) for p in prompts]
    assert min(lengths) <= 3 and max(lengths) >= 30


def test_batches_mask_specials_and_padding():
    bs = batches([[5, 1, 2, 6], [5, 3, 6]], [[1, 0, 0, 1], [1, 0, 1]], batch_size=2, pad_id=0)
    (b,) = bs
    assert b.ids.tolist() == [[5, 3, 6, 0], [5, 1, 2, 6]]  # length-sorted
    assert b.mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert b.stat_mask.tolist() == [[False, True, False, False], [False, True, True, False]]
    assert isinstance(b, Batch)

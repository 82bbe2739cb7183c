"""Proof of extraction: the attention sublayer rebuilt from extracted matrices equals the real module."""

import pytest
import torch
import transformers

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import ADAPTERS, get_adapter
from powerlens.models.archs import ALL_TWINS, TINY_MODELS, count_params
from powerlens.models.verify import reconstruction_errors

from ..conftest import build_tiny

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]


def tol(name: str, dtype) -> float:
    """The proof's tolerance: float32's where the real module computes a part in float32 in any dtype (GPT-Neo's
    q.k scores: bit-equal on most MKL branches, 9e-7 apart under MKL_CBWR=COMPATIBLE), as check_extraction's."""
    return TOL[torch.float32] if ADAPTERS[TINY_MODELS[name].arch].float32_parts else TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp64"])
@pytest.mark.parametrize("name", list(TINY_MODELS))
def test_rebuilds_real_attention(name, dtype):
    model = build_tiny(name, dtype)
    adapter = ADAPTERS[TINY_MODELS[name].arch]
    w = adapter.extract(model)
    errs = reconstruction_errors(model, adapter, w, n_batch=3, seq_len=12)
    assert len(errs) == model.config.num_hidden_layers
    assert max(errs) < tol(name, dtype), errs


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp64"])
def test_rebuilds_trained_minilm(minilm_path, dtype):
    model = transformers.AutoModel.from_pretrained(minilm_path, dtype=dtype, attn_implementation="eager",
                                                   use_safetensors=True, local_files_only=True).eval()
    adapter = get_adapter("bert")
    w = adapter.extract(model)
    assert (w.n_layers, w.d_model, w.n_heads) == (6, 384, 12)
    errs = reconstruction_errors(model, adapter, w, n_batch=2, seq_len=16)
    assert max(errs) < TOL[dtype], errs


def _swap_heads(W_O: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Swap the column blocks of heads 0 and 1 in W_O: a head mis-slice."""
    dh = W_O.shape[1] // n_heads
    W = W_O.clone()
    W[:, :dh], W[:, dh:2 * dh] = W_O[:, dh:2 * dh], W_O[:, :dh]
    return W


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp64"])
@pytest.mark.parametrize("corruption", ["transpose_W_V", "transpose_W_O", "transpose_W_Q", "swap_heads_W_O"])
@pytest.mark.parametrize("name", list(TINY_MODELS))
def test_corrupted_extraction_is_caught(name, corruption, dtype):
    """The proof has teeth: a transposed matrix or a mis-sliced head breaks the reconstruction."""
    model = build_tiny(name, dtype)
    adapter = ADAPTERS[TINY_MODELS[name].arch]
    w = adapter.extract(model)
    square = True
    for lw in w.layers:
        if corruption == "swap_heads_W_O":
            lw.W_O = _swap_heads(lw.W_O, w.n_heads)
        else:
            key = corruption.split("_", 1)[1]
            square &= getattr(lw, key).shape[0] == getattr(lw, key).shape[1]
            setattr(lw, key, getattr(lw, key).T.contiguous())
    if not square:  # grouped-query / d_head != d / H: a transposed matrix cannot even be applied
        with pytest.raises(RuntimeError):
            reconstruction_errors(model, adapter, w)
        return
    errs = reconstruction_errors(model, adapter, w)
    assert max(errs) > 100 * tol(name, dtype), (corruption, errs)


def _swap_kv_groups(W: torch.Tensor, dh: int) -> torch.Tensor:
    """Swap the row blocks of key-value groups 0 and 1: a query head reads the wrong group."""
    out = W.clone()
    out[:dh], out[dh:2 * dh] = W[dh:2 * dh], W[:dh]
    return out


_SHARED = ("swap_kv_groups", "rope_off", "head_dim_scale")  # both decoders; the rest are Gemma 3's own parts
_GEMMA3_ONLY = ("wrong_window", "no_qk_norm", "no_post_norm")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp64"])
@pytest.mark.parametrize("name,corruption", [("tiny-llama", c) for c in _SHARED]
                         + [("tiny-gemma3", c) for c in _SHARED + _GEMMA3_ONLY])
def test_decoder_corruptions_are_caught(name, corruption, dtype):
    """Grouped-query attention, RoPE, the sliding window and Gemma's norms all matter: each wrong breaks the
    proof by more than 100x its tolerance."""
    import dataclasses

    model = build_tiny(name, dtype)
    adapter = ADAPTERS[TINY_MODELS[name].arch]
    w = adapter.extract(model)
    gemma = name == "tiny-gemma3"
    for u, lw in enumerate(w.layers):
        if corruption == "swap_kv_groups":
            assert lw.groups == 2 and lw.W_K.shape[0] == 2 * lw.d_head
            lw.W_K, lw.W_V = _swap_kv_groups(lw.W_K, lw.d_head), _swap_kv_groups(lw.W_V, lw.d_head)
        elif corruption == "rope_off":
            lw.rope_inv_freq = None
        elif corruption == "wrong_window":
            lw.window = None if lw.window else 2  # local layer made global, global made local
        elif corruption == "no_qk_norm":
            lw.q_norm = lw.k_norm = None
        elif corruption == "no_post_norm":
            lw.post_w = None
        elif corruption == "head_dim_scale":
            lw.attn_scale = 1.0 / (w.d_model // w.n_heads) ** 0.5 if gemma else 1.0
        w.layers[u] = dataclasses.replace(lw)
    errs = reconstruction_errors(model, adapter, w, n_batch=3, seq_len=12)
    assert max(errs) > 100 * TOL[dtype], (corruption, errs)


def test_gpt2_conv1d_needs_transpose():
    """GPT-2 stores Conv1D weights (in, out): using them without the transpose gives F^T and fails."""
    model = build_tiny("tiny-gpt2", torch.float64)
    adapter = ADAPTERS["gpt2"]
    w = adapter.extract(model)
    d = model.config.n_embd
    c_attn = model.h[0].attn.c_attn.weight.detach()
    assert torch.equal(w.layers[0].W_V, c_attn[:, 2 * d:].T)
    w.layers[0].W_V = c_attn[:, 2 * d:].clone()  # the classic mistake
    assert reconstruction_errors(model, adapter, w)[0] > 1e-3


def test_albert_is_one_shared_layer():
    model = build_tiny("tiny-albert", torch.float64)
    w = ADAPTERS["albert"].extract(model)
    assert len(w.layers) == 1 and w.layer_map == [0] * model.config.num_hidden_layers
    assert w.shared
    F = [w.F(t) for t in range(w.n_layers)]
    assert all(torch.equal(F[0], f) for f in F)
    # and the real module is the same object at every depth
    assert len({id(s.output_module) for s in ADAPTERS["albert"].sites(model)}) == 1


@pytest.mark.parametrize("name", list(TINY_MODELS))
def test_F_is_sum_of_head_products(name):
    model = build_tiny(name, torch.float64)
    w = ADAPTERS[TINY_MODELS[name].arch].extract(model)
    lw, dh = w.layers[0], w.d_head
    g = lw.groups  # query head h reads key-value group h // g
    F_heads = sum(lw.W_O[:, h * dh:(h + 1) * dh] @ lw.W_V[(h // g) * dh:(h // g + 1) * dh, :]
                  for h in range(w.n_heads))
    assert torch.allclose(lw.F, F_heads, atol=1e-12)
    assert g == (2 if TINY_MODELS[name].arch in ("llama", "gemma3") else 1)


def test_gpt_neo_has_no_scaling_and_local_windows():
    model = build_tiny("tiny-gpt-neo", torch.float32)
    w = ADAPTERS["gpt_neo"].extract(model)
    assert [lw.attn_scale for lw in w.layers] == [1.0, 1.0]
    assert [lw.window for lw in w.layers] == [None, model.config.window_size]
    assert not w.layers[0].has_bias["V"] and w.layers[0].has_bias["O"]


def test_arch_mismatch_is_refused():
    model = build_tiny("tiny-bert")
    with pytest.raises(PowerlensError, match="model_type 'bert' does not match arch 'gpt2'"):
        ADAPTERS["gpt2"].extract(model)
    with pytest.raises(PowerlensError, match="unknown architecture"):
        get_adapter("mamba")


@pytest.mark.parametrize("name", list(ALL_TWINS))
def test_twin_configs_build_and_count(name):
    """Every paper (and trained-decoder) architecture builds (on the meta device: no memory) and
    count_params is exact."""
    arch = ALL_TWINS[name]
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(arch.hf_config())
    assert sum(p.numel() for p in model.parameters()) == count_params(arch)


@pytest.mark.parametrize("name", list(TINY_MODELS))
def test_float64_proof_one_layer_at_a_time(name):
    """check_extraction's float64 proof without a float64 model: each layer copied to float64 alone, run on
    the inputs the float32 pass gave it, agrees with the extracted matrices to float64 rounding, as the whole
    model in float64 does; a transposed W_O in one layer is caught there and only there."""
    from powerlens.models.verify import layerwise_errors

    model = build_tiny(name, torch.float32)
    adapter = ADAPTERS[TINY_MODELS[name].arch]
    w = adapter.extract(model)
    errs = layerwise_errors(model, adapter, w, torch.float64)
    assert len(errs) == w.n_layers and max(errs) <= tol(name, torch.float64), errs
    assert next(model.parameters()).dtype == torch.float32  # the model itself is never cast
    # the same float32 computation as the whole model's, to float32's round-off floor (1e-6, check_extraction's):
    # equal bits on most MKL branches, not under COMPATIBLE, which picks kernels by the operands' layout
    same = zip(layerwise_errors(model, adapter, w, torch.float32), reconstruction_errors(model, adapter, w))
    assert all(abs(a - b) <= 1e-6 for a, b in same)
    u = w.layer_map[-1]
    w.layers[u].W_O = w.layers[u].W_O.T.contiguous() if w.layers[u].W_O.shape[0] == w.layers[u].W_O.shape[1] \
        else -w.layers[u].W_O
    bad = layerwise_errors(model, adapter, w, torch.float64)
    hit = [t for t in range(w.n_layers) if w.layer_map[t] == u]
    assert all(bad[t] > 1e-6 for t in hit) and all(bad[t] == errs[t] for t in range(w.n_layers) if t not in hit)

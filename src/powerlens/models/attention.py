"""The attention sublayer recomputed from extracted matrices.

For tokens ``x_1..x_n`` (rows of ``x``), head ``h`` with ``d_head`` rows of each projection::

    q_i = W_Q^h x_i + b_Q^h,  k_j = W_K^h x_j + b_K^h,  v_j = W_V^h x_j + b_V^h
    A^h_ij = softmax_j( s <q_i, k_j> )  over the visible keys j (padding, causal, local window)
    attn(x)_i = sum_h W_O^h sum_j A^h_ij v_j + b_O
              = sum_j sum_h A^h_ij W_O^h W_V^h x_j + W_O b_V + b_O

With uniform attention the linear part is ``F x`` with ``F = W_O W_V``: one power-method step.

Decoder families add, all inside the softmax's arguments (so F is unchanged): grouped-query attention (head
h reads key-value group h // (H / H_kv), so F = sum_h W_O^h W_V^{g(h)}), rotary position embeddings of q and
k at the tokens' positions 0..T-1 (right padding), and for Gemma 3 RMSNorms of each query and key head and
the scale ``query_pre_attn_scalar ** -0.5``.

:func:`sublayer` returns what the real module returns: ``attn(N(x))`` for pre-norm models (GPT-2, GPT-Neo,
Llama; the residual is added by the block), ``P(attn(N(x)))`` for Gemma 3 (P its post-attention RMSNorm,
applied before the residual add) and ``LN(x + attn(x))`` for post-LN models (BERT, ALBERT).
"""

from __future__ import annotations

import torch

from powerlens.models.weights import LayerWeights


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x: torch.Tensor, g: torch.Tensor, eps: float, kind: str, fp32: bool) -> torch.Tensor:
    """RMSNorm x / sqrt(mean(x^2) + eps) times the gain g, as Llama (``rms``: gain applied in the input
    dtype) or Gemma (``rms_gemma``: gain, stored as 1 + w, applied in the normalisation's dtype) compute it;
    ``fp32`` mirrors the modules' float32 normalisation whatever the input dtype."""
    xs = x.float() if fp32 else x
    n = xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + eps)
    if kind == "rms":
        return g * n.to(x.dtype)
    return (n * (g.float() if fp32 else g)).to(x.dtype)


def input_norm(x: torch.Tensor, lw: LayerWeights) -> torch.Tensor:
    """The layer's own norm (LayerNorm or RMSNorm, by ``lw.norm_kind``)."""
    if lw.norm_kind == "layer":
        return layer_norm(x, lw.ln_w, lw.ln_b, lw.ln_eps)
    return rms_norm(x, lw.ln_w, lw.ln_eps, lw.norm_kind, lw.norm_fp32)


def law_norm(y: torch.Tensor, lw: LayerWeights, norm: str) -> torch.Tensor:
    """N of the attention-only law x <- N(x + attn(x)): ``l2`` (unit norm, the paper's analysis) or
    ``layernorm``, which means the layer's own norm (paper.md section 4, revision 3): LayerNorm where the
    model has LayerNorm, RMSNorm where it has RMSNorm (Llama, Gemma 3), with the layer's gain. The one
    function the dynamics and steering's law both call."""
    if norm == "l2":
        return y / y.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    if norm != "layernorm":
        raise ValueError(f"unknown law norm {norm!r}: use 'l2' or 'layernorm'")
    return input_norm(y, lw)


def rope(x: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> torch.Tensor:
    """Rotary embedding of x (B, T, heads, dh) at positions 0..T-1, cos and sin formed in float32 as the
    models' rotary modules form them (rotate-half layout)."""
    T = x.shape[1]
    pos = torch.arange(T, device=x.device, dtype=torch.float32)
    freqs = pos[:, None] * inv_freq.to(device=x.device, dtype=torch.float32)[None, :]  # (T, dh/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, dh)
    cos = (emb.cos() * scale).to(x.dtype)[None, :, None, :]  # (1, T, 1, dh)
    sin = (emb.sin() * scale).to(x.dtype)[None, :, None, :]
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


#: The all-True key masks (1, 1, T, T), one per length and device, kept: nothing to mask (see :func:`visible_keys`).
_ALL_VISIBLE: dict[tuple[int, str], torch.Tensor] = {}


def visible_keys(T: int, causal: bool, window: int | None, pad_mask: torch.Tensor | None,
                 device=None) -> torch.Tensor:
    """Boolean (B or 1, 1, T, T): entry [b, 0, i, j] is True when query i may attend to key j. With nothing to
    mask (no causal mask, window or padding) the one kept all-True mask of that length: the attention then
    skips masking (:func:`attention_pattern`; masking no entry changes no value), so a run of many small law
    steps (the theory's) builds no mask per step. Never written: ``&`` makes a new mask."""
    if not causal and window is None and pad_mask is None:
        key = (T, str(torch.device(device or "cpu")))
        if key not in _ALL_VISIBLE:
            _ALL_VISIBLE[key] = torch.ones(1, 1, T, T, dtype=torch.bool, device=device)
        return _ALL_VISIBLE[key]
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    allowed = torch.ones(T, T, dtype=torch.bool, device=device)
    if causal:
        allowed &= j <= i
    if window is not None:
        allowed &= (i - j) < window
    allowed = allowed[None, None]  # (1, 1, T, T)
    if pad_mask is not None:
        allowed = allowed & pad_mask.bool()[:, None, None, :]  # (B, 1, T, T)
    return allowed


def _per_head(t: torch.Tensor, groups: int) -> torch.Tensor:
    """Key or value heads (B, H_kv, T, dh) repeated for the query heads that read them (B, H, T, dh), contiguous:
    ``repeat_interleave``, or with one query head per group the same values in the same layout by a plain copy
    (what repeat_interleave(1) makes, without its index arithmetic)."""
    return t.repeat_interleave(groups, dim=1) if groups > 1 else t.contiguous()


def attention_pattern(h: torch.Tensor, lw: LayerWeights, n_heads: int, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax attention weights A (B, H, T, T) for normalised inputs h (B, T, d)."""
    B, T, d = h.shape
    dh = lw.d_head or d // n_heads
    q = (h @ lw.W_Q.T + lw.b_Q).view(B, T, -1, dh)  # (B, T, H, dh)
    k = (h @ lw.W_K.T + lw.b_K).view(B, T, -1, dh)  # (B, T, H_kv, dh)
    if lw.q_norm is not None:
        q = rms_norm(q, lw.q_norm, lw.ln_eps, lw.norm_kind, lw.norm_fp32)
        k = rms_norm(k, lw.k_norm, lw.ln_eps, lw.norm_kind, lw.norm_fp32)
    if lw.rope_inv_freq is not None:
        q, k = rope(q, lw.rope_inv_freq, lw.rope_scale), rope(k, lw.rope_inv_freq, lw.rope_scale)
    q = q.transpose(1, 2)  # (B, H, T, dh)
    k = _per_head(k.transpose(1, 2), lw.groups)  # (B, H, T, dh): head h reads group h // groups
    if lw.scores_fp32:
        # GPT-Neo forms q.k in float32 whatever the model dtype; its additive mask (model dtype) then
        # promotes the scores back before the softmax. Mirrored so float64 checks are exact.
        scores = (q.float() @ k.float().transpose(-1, -2)).to(h.dtype) * lw.attn_scale  # (B, H, T, T)
    else:
        scores = (q @ k.transpose(-1, -2)) * lw.attn_scale  # (B, H, T, T)
    if allowed is not _ALL_VISIBLE.get((T, str(allowed.device))):
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    if lw.softmax_fp32:
        return torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
    return torch.softmax(scores, dim=-1)


def attention_output(h: torch.Tensor, lw: LayerWeights, n_heads: int, allowed: torch.Tensor,
                     pattern: list | None = None, context: list | None = None) -> torch.Tensor:
    """Multi-head attention output (B, T, d): W_O concat_h(A^h V^h) + b_O (``pattern``: a list that
    receives the attention weights A, for diagnostics; ``context``: a list that receives concat_h(A^h V^h),
    (B, T, H dh), the input of W_O, so that a change of W_O can be applied without recomputing A)."""
    B, T, d = h.shape
    dh = lw.d_head or d // n_heads
    A = attention_pattern(h, lw, n_heads, allowed)  # (B, H, T, T)
    if pattern is not None:
        pattern.append(A)
    v = (h @ lw.W_V.T + lw.b_V).view(B, T, -1, dh).transpose(1, 2)  # (B, H_kv, T, dh)
    v = _per_head(v, lw.groups)  # (B, H, T, dh)
    ctx = (A @ v).transpose(1, 2).reshape(B, T, -1)  # (B, T, H dh)
    if context is not None:
        context.append(ctx)
    return ctx @ lw.W_O.T + lw.b_O  # (B, T, d)


def sublayer(x: torch.Tensor, lw: LayerWeights, n_heads: int, norm: str, causal: bool,
             pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The attention sublayer as the real module computes it (see module docstring)."""
    allowed = visible_keys(x.shape[1], causal, lw.window, pad_mask, device=x.device)
    if norm == "pre":
        y = attention_output(input_norm(x, lw), lw, n_heads, allowed)
        if lw.post_w is not None:  # Gemma 3: post-attention RMSNorm before the residual add
            y = rms_norm(y, lw.post_w, lw.ln_eps, lw.norm_kind, lw.norm_fp32)
        return y
    return input_norm(x + attention_output(x, lw, n_heads, allowed), lw)


def law_attention(x: torch.Tensor, lw: LayerWeights, n_heads: int, causal: bool, pad_mask: torch.Tensor | None,
                  pattern: list | None = None, context: list | None = None) -> torch.Tensor:
    """The attention term attn(x) (B, T, d) of one step of the paper's law, over the keys a query may see
    (causal mask, local window, padding); ``pattern`` receives A then the visible keys, ``context``
    concat_h(A^h V^h) (see :func:`attention_output`)."""
    allowed = visible_keys(x.shape[1], causal, lw.window, pad_mask, device=x.device)
    a = attention_output(x, lw, n_heads, allowed, pattern, context=context)  # (B, T, d)
    if pattern is not None:
        pattern.append(allowed)
    return a


@torch.no_grad()
def attention_only_step(x: torch.Tensor, lw: LayerWeights, n_heads: int, causal: bool,
                        pad_mask: torch.Tensor | None, norm: str, pattern: list | None = None) -> torch.Tensor:
    """One step of the paper's law, x <- N(x + attn(x)), x (B, T, d): the one law step of the dynamics, the
    theory checks and steering (which changes the attention term between :func:`law_attention` and the
    normalisation :func:`law_norm`)."""
    return law_norm(x + law_attention(x, lw, n_heads, causal, pad_mask, pattern), lw, norm)

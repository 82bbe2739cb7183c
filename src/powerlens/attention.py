"""The attention sublayer recomputed from extracted matrices.

For tokens ``x_1..x_n`` (rows of ``x``), head ``h`` with ``d_head`` rows of each projection::

    q_i = W_Q^h x_i + b_Q^h,  k_j = W_K^h x_j + b_K^h,  v_j = W_V^h x_j + b_V^h
    A^h_ij = softmax_j( s <q_i, k_j> )  over the visible keys j (padding, causal, local window)
    attn(x)_i = sum_h W_O^h sum_j A^h_ij v_j + b_O
              = sum_j sum_h A^h_ij W_O^h W_V^h x_j + W_O b_V + b_O

With uniform attention the linear part is ``F x`` with ``F = W_O W_V``: one power-method step.

:func:`sublayer` returns what the real module returns: ``attn(LN(x))`` for pre-LN models (GPT-2, GPT-Neo;
the residual is added by the block) and ``LN(x + attn(x))`` for post-LN models (BERT, ALBERT).
"""

from __future__ import annotations

import torch

from .weights import LayerWeights


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def visible_keys(T: int, causal: bool, window: int | None, pad_mask: torch.Tensor | None,
                 device=None) -> torch.Tensor:
    """Boolean (B or 1, 1, T, T): entry [b, 0, i, j] is True when query i may attend to key j."""
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


def attention_pattern(h: torch.Tensor, lw: LayerWeights, n_heads: int, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax attention weights A (B, H, T, T) for normalised inputs h (B, T, d)."""
    B, T, d = h.shape
    dh = d // n_heads
    q = (h @ lw.W_Q.T + lw.b_Q).view(B, T, n_heads, dh).transpose(1, 2)  # (B, H, T, dh)
    k = (h @ lw.W_K.T + lw.b_K).view(B, T, n_heads, dh).transpose(1, 2)  # (B, H, T, dh)
    if lw.scores_fp32:
        # GPT-Neo forms q.k in float32 whatever the model dtype; its additive mask (model dtype) then
        # promotes the scores back before the softmax. Mirrored so float64 checks are exact.
        scores = (q.float() @ k.float().transpose(-1, -2)).to(h.dtype) * lw.attn_scale  # (B, H, T, T)
    else:
        scores = (q @ k.transpose(-1, -2)) * lw.attn_scale  # (B, H, T, T)
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1)


def attention_output(h: torch.Tensor, lw: LayerWeights, n_heads: int, allowed: torch.Tensor,
                     pattern: list | None = None) -> torch.Tensor:
    """Multi-head attention output (B, T, d): W_O concat_h(A^h V^h) + b_O (``pattern``: a list that
    receives the attention weights A, for diagnostics)."""
    B, T, d = h.shape
    dh = d // n_heads
    A = attention_pattern(h, lw, n_heads, allowed)  # (B, H, T, T)
    if pattern is not None:
        pattern.append(A)
    v = (h @ lw.W_V.T + lw.b_V).view(B, T, n_heads, dh).transpose(1, 2)  # (B, H, T, dh)
    ctx = (A @ v).transpose(1, 2).reshape(B, T, d)  # (B, T, d)
    return ctx @ lw.W_O.T + lw.b_O  # (B, T, d)


def sublayer(x: torch.Tensor, lw: LayerWeights, n_heads: int, norm: str, causal: bool,
             pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The attention sublayer as the real module computes it (see module docstring)."""
    allowed = visible_keys(x.shape[1], causal, lw.window, pad_mask, device=x.device)
    if norm == "pre":
        return attention_output(layer_norm(x, lw.ln_w, lw.ln_b, lw.ln_eps), lw, n_heads, allowed)
    return layer_norm(x + attention_output(x, lw, n_heads, allowed), lw.ln_w, lw.ln_b, lw.ln_eps)

"""Llama: pre-norm (RMS) decoder with grouped-query attention and rotary positions."""

from __future__ import annotations

from powerlens.models.adapters.base import Adapter, _layer, _linear, _proj, _t
from powerlens.models.hooks import Site


class LlamaAdapter(Adapter):
    """Llama (SmolLM2): pre-RMSNorm, grouped-query attention (head h reads key-value group h // (H / H_kv)),
    rotary position embeddings, no biases by default, scores scaled by d_head**-0.5."""

    arch, model_type, norm, causal, config_class, family = "llama", "llama", "pre", True, "LlamaConfig", "Llama"
    norm_kind = "rms"

    def layer_map(self, cfg):
        return [(t,) for t in range(cfg.num_hidden_layers)]

    def _rope(self, model, t: int):
        rot = self.base(model).rotary_emb
        return _t(rot.inv_freq).float(), float(rot.attention_scaling)

    def _gains(self, layer):
        return _t(layer.input_layernorm.weight), None, float(layer.input_layernorm.variance_epsilon)

    def _qk_norm(self, att):
        return None, None

    def _window(self, att, cfg, t):
        return getattr(att, "sliding_window", None)

    direct_config_keys = ("num_hidden_layers", "num_attention_heads", "hidden_size")

    def direct_value_output(self, key, read, cfg):
        """As :meth:`extract_unique` reads them, d_head and H_kv from the tensors' shapes (W_O (d, H d_head), W_V
        (H_kv d_head, d)), checked against config.json's ``head_dim`` and ``num_key_value_heads`` where it has
        them; W_V's key-value blocks repeated for their query heads (head h reads group h // (H / H_kv))."""
        import numpy as np

        t = key[0]
        W_V, W_O = read(f"layers.{t}.self_attn.v_proj.weight"), read(f"layers.{t}.self_attn.o_proj.weight")
        d, H = self.d_model(cfg), self.n_heads(cfg)
        if W_V is None or W_O is None or W_V.ndim != 2 or W_O.ndim != 2 or W_O.shape[0] != d:
            return None
        dh, Hkv = W_O.shape[1] // H, 0
        if dh >= 1 and W_O.shape[1] == H * dh:
            Hkv = W_V.shape[0] // dh
        if (Hkv < 1 or H % Hkv or W_V.shape != (Hkv * dh, d) or getattr(cfg, "head_dim", None) not in (None, dh)
                or getattr(cfg, "num_key_value_heads", None) not in (None, Hkv)):
            return None
        return np.repeat(W_V.reshape(Hkv, dh, d), H // Hkv, axis=0).reshape(H * dh, d), W_O  # (H dh, d), (d, H dh)

    def extract_unique(self, model, key):
        import torch

        t = key[0]
        cfg = model.config
        layer = self.base(model).layers[t]
        att = layer.self_attn
        d, H, Hkv = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
        dh = att.head_dim
        W_Q, b_Q, hq = _linear(att.q_proj, H * dh, d)  # (H dh, d)
        W_K, b_K, hk = _linear(att.k_proj, Hkv * dh, d)  # (H_kv dh, d)
        W_V, b_V, hv = _linear(att.v_proj, Hkv * dh, d)  # (H_kv dh, d)
        W_O, b_O, ho = _linear(att.o_proj, d, H * dh)  # (d, H dh)
        ln_w, post_w, eps = self._gains(layer)
        q_norm, k_norm = self._qk_norm(att)
        inv_freq, rscale = self._rope(model, t)
        return _layer(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, b_Q=b_Q, b_K=b_K, b_V=b_V, b_O=b_O, ln_w=ln_w,
                      ln_b=torch.zeros_like(ln_w), ln_eps=eps, attn_scale=float(att.scaling),
                      window=self._window(att, cfg, t), has_bias={"Q": hq, "K": hk, "V": hv, "O": ho}, d_head=dh,
                      norm_kind=self.norm_kind, q_norm=q_norm, k_norm=k_norm, post_w=post_w, rope_inv_freq=inv_freq,
                      rope_scale=rscale, softmax_fp32=True, norm_fp32=True)

    def attention_weights(self, model, key):
        att = self.base(model).layers[key[0]].self_attn
        return {"W_Q": _proj(att.q_proj), "W_K": _proj(att.k_proj), "W_V": _proj(att.v_proj),
                "W_O": _proj(att.o_proj)}

    def value_params(self, model, key):
        v = self.base(model).layers[key[0]].self_attn.v_proj
        return [(v.weight, (slice(None),))] + ([(v.bias, (slice(None),))] if v.bias is not None else [])

    def sites(self, model):
        return [Site(layer, layer.self_attn) for layer in self.base(model).layers]

    def layer_modules(self, model):
        return list(self.base(model).layers)

    def embed(self, model, ids):
        return self.base(model).embed_tokens(ids)

    def output_projection(self, model):
        return self.base(model).layers[-1].self_attn.o_proj, "linear"

    def final_norm_gain(self, model):
        return self.base(model).norm.weight.detach().double()

    def final_norm(self, model):
        return self.base(model).norm

    def head_logits(self, model, h):
        return self.linear_head(model, h)

    def _attn_size(self, k):
        h, H = k["hidden_size"], k["num_attention_heads"]
        Hkv, dh = k.get("num_key_value_heads") or H, k.get("head_dim") or h // H
        attn = 2 * h * H * dh + 2 * h * Hkv * dh
        if k.get("attention_bias"):
            attn += H * dh + 2 * Hkv * dh + h
        return attn, dh

    def size_terms(self, k):
        h, n, v, f = k["hidden_size"], k["num_hidden_layers"], k["vocab_size"], k["intermediate_size"]
        attn, _ = self._attn_size(k)
        layer = attn + 3 * h * f + (2 * f + h if k.get("mlp_bias") else 0) + 2 * h
        return {"params": v * h + n * layer + h, "d_model": h, "n_layers": n, "n_unique_layers": n,
                "attention_params": attn, "layer_params": layer}


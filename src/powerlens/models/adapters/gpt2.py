"""GPT-2: pre-norm decoder, fused Q|K|V in a Conv1D stored (in, out)."""

from __future__ import annotations

import math

from powerlens.models.adapters.base import WeightPart, _DecoderAdapter, _layer, _t


class GPT2Adapter(_DecoderAdapter):
    """GPT-2 stores ``Conv1D`` weights as (in, out) and fuses Q|K|V along the output dimension."""

    family = "GPT-2"
    arch, model_type, norm, causal, config_class = "gpt2", "gpt2", "pre", True, "GPT2Config"

    def output_projection(self, model):
        return self.base(model).h[-1].attn.c_proj, "conv1d"

    def size_terms(self, k):
        h = k["n_embd"]
        return self._size(h, k["vocab_size"], k["n_layer"], k["n_positions"], 4 * h * h + 4 * h)

    def n_heads(self, cfg):
        return cfg.n_head

    def d_model(self, cfg):
        return cfg.n_embd

    def layer_map(self, cfg):
        return [(t,) for t in range(cfg.n_layer)]

    direct_config_keys = ("n_layer", "n_head", "n_embd")

    def direct_value_output(self, key, read, cfg):
        t, d = key[0], self.d_model(cfg)
        Wqkv, Wo = read(f"h.{t}.attn.c_attn.weight"), read(f"h.{t}.attn.c_proj.weight")  # Conv1D: (in, out)
        if Wqkv is None or Wo is None or Wqkv.shape != (d, 3 * d) or Wo.shape != (d, d):
            return None
        return Wqkv[:, 2 * d:3 * d].T.copy(), Wo.T.copy()  # Q|K|V fused along the output columns; (out, in)

    def extract_unique(self, model, key):
        t = key[0]
        cfg = model.config
        block = self.base(model).h[t]
        d, H = self.d_model(cfg), self.n_heads(cfg)
        Wqkv = _t(block.attn.c_attn.weight)  # (d, 3d), (in, out)
        assert Wqkv.shape == (d, 3 * d), tuple(Wqkv.shape)
        bqkv = _t(block.attn.c_attn.bias)  # (3d,)
        W_Q, W_K, W_V = (Wqkv[:, i * d:(i + 1) * d].T.contiguous() for i in range(3))  # (d, d) each
        b_Q, b_K, b_V = (bqkv[i * d:(i + 1) * d].contiguous() for i in range(3))
        W_O = _t(block.attn.c_proj.weight).T.contiguous()  # (d, d)
        b_O = _t(block.attn.c_proj.bias)
        scale = 1.0 / math.sqrt(d // H) if cfg.scale_attn_weights else 1.0
        if getattr(cfg, "scale_attn_by_inverse_layer_idx", False):
            scale /= float(t + 1)
        ln = block.ln_1
        return _layer(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, b_Q=b_Q, b_K=b_K, b_V=b_V, b_O=b_O, ln_w=_t(ln.weight),
                      ln_b=_t(ln.bias), ln_eps=float(ln.eps), attn_scale=scale, window=None,
                      has_bias={"Q": True, "K": True, "V": True, "O": True})

    def attention_weights(self, model, key):
        attn, d = self.base(model).h[key[0]].attn, self.d_model(model.config)
        qkv = attn.c_attn.weight  # (d, 3d), (in, out): Q|K|V along the output columns
        return {**{n: WeightPart(qkv, (slice(None), slice(i * d, (i + 1) * d)), 1)
                   for i, n in enumerate(("W_Q", "W_K", "W_V"))},
                "W_O": WeightPart(attn.c_proj.weight, (slice(None), slice(None)), 1)}

    def value_params(self, model, key):
        attn = self.base(model).h[key[0]].attn.c_attn
        d = self.d_model(model.config)
        v = slice(2 * d, 3 * d)  # Q|K|V fused along the output dimension, stored (in, out)
        return [(attn.weight, (slice(None), v)), (attn.bias, (v,))]

    def max_positions(self, cfg):
        return cfg.n_positions


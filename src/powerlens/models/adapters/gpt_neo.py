"""GPT-Neo: pre-norm decoder without Q/K/V biases or 1/sqrt(d_head) scaling; local-window layers."""

from __future__ import annotations

from powerlens.models.adapters.base import _DecoderAdapter, _direct_square, _layer, _linear, _proj, _t


class GPTNeoAdapter(_DecoderAdapter):
    """GPT-Neo: separate q/k/v projections without bias, **no** 1/sqrt(d_head) scaling, and layers
    alternating global and local (window) attention."""

    family = "GPT-Neo"
    arch, model_type, norm, causal, config_class = "gpt_neo", "gpt_neo", "pre", True, "GPTNeoConfig"
    #: its attention casts q and k to float32 before q.k whatever the model's dtype. The rebuilt layer does the
    #: same, and most MKL branches give both the same bits (errors 1e-15), but not every one: under
    #: MKL_CBWR=COMPATIBLE the float32 product's kernel follows the operands' layout, which the module's key
    #: cache changes (seen: 9e-7 on the tiny twin)
    float32_parts = "q.k scores"

    def output_projection(self, model):
        return self.base(model).h[-1].attn.attention.out_proj, "linear"

    def size_terms(self, k):
        h = k["hidden_size"]  # no q, k, v biases
        return self._size(h, k["vocab_size"], k["num_layers"], k["max_position_embeddings"], 4 * h * h + h)

    def n_heads(self, cfg):
        return cfg.num_heads

    def layer_map(self, cfg):
        return [(t,) for t in range(cfg.num_layers)]

    direct_config_keys = ("num_layers", "num_heads", "hidden_size")

    def direct_value_output(self, key, read, cfg):
        t = key[0]
        return _direct_square(read, f"h.{t}.attn.attention.v_proj.weight", f"h.{t}.attn.attention.out_proj.weight",
                              self.d_model(cfg))

    def attention_weights(self, model, key):
        att = self.base(model).h[key[0]].attn.attention
        return {"W_Q": _proj(att.q_proj), "W_K": _proj(att.k_proj), "W_V": _proj(att.v_proj),
                "W_O": _proj(att.out_proj)}

    def value_params(self, model, key):
        v = self.base(model).h[key[0]].attn.attention.v_proj
        return [(v.weight, (slice(None),))] + ([(v.bias, (slice(None),))] if v.bias is not None else [])

    def extract_unique(self, model, key):
        t = key[0]
        cfg = model.config
        block = self.base(model).h[t]
        att = block.attn.attention
        d = self.d_model(cfg)
        W_Q, b_Q, hq = _linear(att.q_proj, d)
        W_K, b_K, hk = _linear(att.k_proj, d)
        W_V, b_V, hv = _linear(att.v_proj, d)
        W_O, b_O, ho = _linear(att.out_proj, d)
        window = cfg.window_size if cfg.attention_layers[t] == "local" else None
        ln = block.ln_1
        return _layer(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, b_Q=b_Q, b_K=b_K, b_V=b_V, b_O=b_O, ln_w=_t(ln.weight),
                      ln_b=_t(ln.bias), ln_eps=float(ln.eps), attn_scale=1.0, window=window,
                      has_bias={"Q": hq, "K": hk, "V": hv, "O": ho}, scores_fp32=True)


"""BERT: post-norm encoder, one set of attention weights per layer."""

from __future__ import annotations

import math

from powerlens.models.adapters.base import Adapter, _direct_square, _encoder_layer_params, _layer, _linear, _proj, _t
from powerlens.models.hooks import Site


class BertAdapter(Adapter):
    family = "BERT"
    twin_tokenizer = "wordpiece"  # bert-base-uncased's own
    arch, model_type, norm, causal, config_class = "bert", "bert", "post", False, "BertConfig"
    unused_modules = ("pooler",)  # BertModel's pooler acts on [CLS] after the last layer: no hidden state

    def output_projection(self, model):
        return self.base(model).encoder.layer[-1].attention.output.dense, "linear"

    def size_terms(self, k):
        h, v, f, n = k["hidden_size"], k["vocab_size"], k["intermediate_size"], k["num_hidden_layers"]
        emb = (v + k["max_position_embeddings"] + k["type_vocab_size"]) * h + 2 * h
        layer = _encoder_layer_params(h, f)
        return {"params": emb + n * layer + (h * h + h), "d_model": h, "n_layers": n, "n_unique_layers": n,
                "attention_params": 4 * h * h + 4 * h, "layer_params": layer}

    def layer_map(self, cfg):
        return [(t,) for t in range(cfg.num_hidden_layers)]

    direct_config_keys = ("num_hidden_layers", "num_attention_heads", "hidden_size")

    def direct_value_output(self, key, read, cfg):
        t = key[0]
        return _direct_square(read, f"encoder.layer.{t}.attention.self.value.weight",
                              f"encoder.layer.{t}.attention.output.dense.weight", self.d_model(cfg))

    def _att(self, model, t):
        return self.base(model).encoder.layer[t].attention

    def extract_unique(self, model, key):
        att = self._att(model, key[0])
        d, H = self.d_model(model.config), self.n_heads(model.config)
        W_Q, b_Q, hq = _linear(att.self.query, d)
        W_K, b_K, hk = _linear(att.self.key, d)
        W_V, b_V, hv = _linear(att.self.value, d)
        W_O, b_O, ho = _linear(att.output.dense, d)
        ln = att.output.LayerNorm
        return _layer(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, b_Q=b_Q, b_K=b_K, b_V=b_V, b_O=b_O, ln_w=_t(ln.weight),
                      ln_b=_t(ln.bias), ln_eps=float(ln.eps), attn_scale=1.0 / math.sqrt(d // H), window=None,
                      has_bias={"Q": hq, "K": hk, "V": hv, "O": ho})

    def attention_weights(self, model, key):
        att = self._att(model, key[0])
        return {"W_Q": _proj(att.self.query), "W_K": _proj(att.self.key), "W_V": _proj(att.self.value),
                "W_O": _proj(att.output.dense)}

    def value_params(self, model, key):
        v = self._att(model, key[0]).self.value
        return [(v.weight, (slice(None),))] + ([(v.bias, (slice(None),))] if v.bias is not None else [])

    def sites(self, model):
        return [Site(att, att) for att in (self._att(model, t) for t in range(model.config.num_hidden_layers))]

    def layer_modules(self, model):
        return list(self.base(model).encoder.layer)

    def embed(self, model, ids):
        return self.base(model).embeddings(input_ids=ids)

    def head_logits(self, model, h):
        return model.cls(h)  # (B, T, V): BertOnlyMLMHead


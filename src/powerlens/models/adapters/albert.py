"""ALBERT: post-norm encoder whose one layer is shared by every depth (after an embedding projection)."""

from __future__ import annotations

import math

from powerlens.models.adapters.base import Adapter, _direct_square, _encoder_layer_params, _layer, _linear, _proj, _t
from powerlens.models.hooks import Site


class AlbertAdapter(Adapter):
    """ALBERT: ``num_hidden_groups`` groups of ``inner_group_num`` layers; depth i uses group
    ``int(i / (L / num_hidden_groups))``. Released v2 checkpoints have one group of one layer, so every
    depth applies the same F."""

    family = "ALBERT"
    twin_tokenizer = "wordpiece"  # a stand-in for ALBERT's SentencePiece
    arch, model_type, norm, causal, config_class = "albert", "albert", "post", False, "AlbertConfig"
    unused_modules = ("pooler",)  # AlbertModel's pooler acts on [CLS] after the last layer: no hidden state

    #: C5 (c): albert-base-v2 and -large-v2 have a real leading eigenvalue, -xlarge-v2 and -xxlarge-v2 a complex one
    paper_leading_types = {"base": "real", "large": "real", "xlarge": "complex", "xxlarge": "complex"}
    shares_layers = True

    def paper_size(self, meta, paper_models):
        """base / large / xlarge / xxlarge when (hidden size, heads, layers) is one of the four albert-*-v2
        configurations of ``paper_models`` (powerlens.models.archs.PAPER_MODELS): "base" in a name also matches
        "database"."""
        dims = (meta.get("d_model"), meta.get("n_heads"), meta.get("n_layers"))
        for name, a in paper_models.items():
            c = a.kwargs
            if a.arch == self.arch and dims == (c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]):
                return name.split("-")[1]
        return None

    def output_projection(self, model):
        return self.base(model).encoder.albert_layer_groups[-1].albert_layers[-1].attention.dense, "linear"

    def head_logits(self, model, h):
        return model.predictions(h)  # AlbertMLMHead

    def token_vector(self, model, tid, kind):
        if kind == "embedding":  # factorised embeddings, projected into the hidden space
            base = self.base(model)
            e = base.embeddings.word_embeddings.weight[tid].detach().double()
            return base.encoder.embedding_hidden_mapping_in.weight.detach().double() @ e
        return super().token_vector(model, tid, kind)

    def size_terms(self, k):
        h, e, v, f, n = (k["hidden_size"], k["embedding_size"], k["vocab_size"], k["intermediate_size"],
                         k["num_hidden_layers"])
        emb = v * e + k["max_position_embeddings"] * e + k["type_vocab_size"] * e + 2 * e
        layer = _encoder_layer_params(h, f)
        unique = k["num_hidden_groups"] * k["inner_group_num"]
        return {"params": emb + (e * h + h) + unique * layer + (h * h + h), "d_model": h, "n_layers": n,
                "n_unique_layers": unique, "attention_params": 4 * h * h + 4 * h, "layer_params": layer}

    def extraction_checks(self, w):
        return {"albert_single_F": len(w.layers) == 1}

    def layer_map(self, cfg):
        L, G = cfg.num_hidden_layers, cfg.num_hidden_groups
        return [(int(i / (L / G)), k) for i in range(L) for k in range(cfg.inner_group_num)]

    direct_config_keys = ("num_hidden_layers", "num_hidden_groups", "inner_group_num", "num_attention_heads",
                          "hidden_size")

    def direct_value_output(self, key, read, cfg):
        g, k = key  # W_V, W_O act in the hidden space (hidden_size), after the embedding projection (embedding_size)
        at = f"encoder.albert_layer_groups.{g}.albert_layers.{k}.attention"
        return _direct_square(read, f"{at}.value.weight", f"{at}.dense.weight", self.d_model(cfg))

    def _att(self, model, key):
        g, k = key
        return self.base(model).encoder.albert_layer_groups[g].albert_layers[k].attention

    def extract_unique(self, model, key):
        att = self._att(model, key)
        d, H = self.d_model(model.config), self.n_heads(model.config)
        W_Q, b_Q, hq = _linear(att.query, d)
        W_K, b_K, hk = _linear(att.key, d)
        W_V, b_V, hv = _linear(att.value, d)
        W_O, b_O, ho = _linear(att.dense, d)
        ln = att.LayerNorm
        return _layer(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, b_Q=b_Q, b_K=b_K, b_V=b_V, b_O=b_O, ln_w=_t(ln.weight),
                      ln_b=_t(ln.bias), ln_eps=float(ln.eps), attn_scale=1.0 / math.sqrt(d // H), window=None,
                      has_bias={"Q": hq, "K": hk, "V": hv, "O": ho})

    def attention_weights(self, model, key):
        att = self._att(model, key)
        return {"W_Q": _proj(att.query), "W_K": _proj(att.key), "W_V": _proj(att.value), "W_O": _proj(att.dense)}

    def value_params(self, model, key):
        v = self._att(model, key).value
        return [(v.weight, (slice(None),))] + ([(v.bias, (slice(None),))] if v.bias is not None else [])

    def sites(self, model):
        return [Site(self._att(model, k), self._att(model, k)) for k in self.layer_map(model.config)]

    def layer_modules(self, model):
        enc = self.base(model).encoder
        return [enc.albert_layer_groups[g].albert_layers[k] for g, k in self.layer_map(model.config)]

    def embed(self, model, ids):
        base = self.base(model)
        return base.encoder.embedding_hidden_mapping_in(base.embeddings(input_ids=ids))


"""One adapter per architecture, in one registry (``ADAPTERS``).

An adapter knows where a ``transformers`` model keeps its attention weights and turns them into
:class:`~powerlens.models.weights.LayerWeights` in the column-vector convention:

=========  ==========================================  ========================================  ======
arch       W_Q / W_K / W_V                             W_O                                       norm
=========  ==========================================  ========================================  ======
bert       ``encoder.layer[t].attention.self.{query,   ``...attention.output.dense``             post
           key,value}`` (nn.Linear, (out, in))
albert     ``encoder.albert_layer_groups[g]            ``...attention.dense``                    post
           .albert_layers[k].attention.{query,..}``    (one layer shared by every depth)
gpt2       ``h[t].attn.c_attn`` (Conv1D, stored        ``h[t].attn.c_proj`` (Conv1D): transposed pre
           (in, out), fused Q|K|V): split, transposed
gpt_neo    ``h[t].attn.attention.{q,k,v}_proj``        ``...attention.out_proj``                 pre
           (no biases, no 1/sqrt(d_head) scaling)
llama      ``layers[t].self_attn.{q,k,v}_proj``         ``...self_attn.o_proj``                   pre
           (grouped-query: k, v have H_kv heads; RoPE)                                           (RMS)
gemma3     as llama, plus ``q_norm``/``k_norm`` and     ``...self_attn.o_proj``, then             pre +
           scale ``query_pre_attn_scalar**-0.5``;       ``post_attention_layernorm``              post
           sliding-window layers                                                                 (RMS)
=========  ==========================================  ========================================  ======

Everything the pipeline knows about an architecture lives in its adapter (one class each, as
TransformerLens has one conversion per architecture): where the attention weights are, the observation
sites that prove the extraction (``sites``), the layer modules of model-mode dynamics, x(0), the steering
site (``output_projection``), token vectors (``token_vector``), the transformers classes of twins and heads,
the size terms used for resource estimates (``size_terms``) and checks specific to the family. Adding an
architecture is adding one class to ``ADAPTERS``.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from powerlens.core.errors import PowerlensError

if TYPE_CHECKING:  # torch is imported where it is used: the DAG-time helpers (size terms) need none of it
    import torch
    from torch import nn

    from powerlens.models.weights import LayerWeights, ModelWeights


def _t(x: "torch.Tensor") -> "torch.Tensor":
    return x.detach().clone()


def _bias(lin: "nn.Module", d: int, like: "torch.Tensor") -> tuple["torch.Tensor", bool]:
    import torch

    b = getattr(lin, "bias", None)
    if b is None:
        return torch.zeros(d, dtype=like.dtype), False
    return _t(b), True


def _linear(lin: "nn.Linear", d_out: int, d_in: int | None = None) -> tuple["torch.Tensor", "torch.Tensor", bool]:
    """Weight (d_out, d_in or d_out), bias (zeros when the module has none) and whether it has one."""
    W = _t(lin.weight)  # (out, in): already y = W x
    want = (d_out, d_in or d_out)
    assert tuple(W.shape) == want, f"expected {want}, got {tuple(W.shape)}"
    b, has = _bias(lin, d_out, W)
    return W, b, has


def _layer(*args, **kw) -> "LayerWeights":
    from powerlens.models.weights import LayerWeights

    return LayerWeights(*args, **kw)


@dataclass(frozen=True)
class Site:
    """Where to observe one application of an attention sublayer in the real model.

    ``input_module``: its input (first positional argument or ``hidden_states``) is the sublayer input x.
    ``output_module``: its output (first element if a tuple) is what :func:`powerlens.models.attention.sublayer`
    must reproduce: ``attn(LN(x))`` for pre-LN models, ``LN(x + attn(x))`` for post-LN models.
    """

    input_module: nn.Module
    output_module: nn.Module


@contextlib.contextmanager
def site_io(sites: list[Site], callback, clone: bool = False):
    """Call ``callback(i, x, y)`` for the i-th application of a site during a forward pass.

    A forward pre-hook on each input module stores x (first positional argument or ``hidden_states``); a
    forward hook on each output module pairs the oldest unpaired x with y (first element if a tuple).
    Sites never nest, so first-in first-out pairing is exact; shared modules (ALBERT) fire once per depth.
    """
    pending: list[torch.Tensor] = []
    count = [0]

    def pre(mod, args, kwargs):
        x = kwargs.get("hidden_states", args[0] if args else None)
        pending.append(x.detach().clone() if clone else x)

    def post(mod, args, kwargs, out):
        y = out[0] if isinstance(out, (tuple, list)) else out
        callback(count[0], pending.pop(0), y.detach().clone() if clone else y)
        count[0] += 1

    handles = []
    for m in {id(s.input_module): s.input_module for s in sites}.values():
        handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
    for m in {id(s.output_module): s.output_module for s in sites}.values():
        handles.append(m.register_forward_hook(post, with_kwargs=True))
    try:
        yield count
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def no_kv_cache(model):
    """``model.config.use_cache = False`` for the block (restored after): a forward pass then builds no
    key-value cache, so a layer's recorded inputs can be fed to it again with the same result."""
    old = getattr(model.config, "use_cache", None)
    model.config.use_cache = False
    try:
        yield model
    finally:
        model.config.use_cache = old


class Adapter:
    arch: str
    model_type: str
    norm: str
    causal: bool
    config_class: str  # the transformers config class of twins
    family: str  # display name in tables and figures
    twin_tokenizer: str = "byte"  # the tokenizer its twins get (powerlens.models.sources.twin): wordpiece, bpe, byte
    #: Submodules no analysis reads (their output is not a hidden state): a checkpoint may lack them (an
    #: MLM-head checkpoint loaded as the base model has no pooler) without being refused at load.
    unused_modules: tuple[str, ...] = ()

    @property
    def head_class(self) -> str:
        """The transformers auto class that loads the model with its LM head."""
        return "AutoModelForCausalLM" if self.causal else "AutoModelForMaskedLM"

    def base(self, model: nn.Module) -> nn.Module:
        """The bare transformer (strips LM/MLM heads)."""
        return getattr(model, "base_model", model)

    def check(self, model: nn.Module) -> None:
        mt = getattr(model.config, "model_type", None)
        if mt != self.model_type:
            raise PowerlensError(
                f"model_type {mt!r} does not match arch {self.arch!r} (expects {self.model_type!r})",
                "set the model's `arch` in the config to the family its config.json declares",
            )

    # per architecture
    def layer_map(self, cfg) -> list[tuple[int, ...]]:  # depth -> key of the unique layer
        raise NotImplementedError

    def extract_unique(self, model: nn.Module, key: tuple[int, ...]) -> LayerWeights:
        raise NotImplementedError

    def sites(self, model: nn.Module) -> list[Site]:
        """Observation sites in depth order (shared layers repeat)."""
        raise NotImplementedError

    def layer_modules(self, model: nn.Module) -> list[nn.Module]:
        """The module applying layer t, per depth (its input is x(t), its output x(t+1))."""
        raise NotImplementedError

    def embed(self, model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        """x(0): what the first layer receives, (B, T, d)."""
        raise NotImplementedError

    def max_positions(self, cfg) -> int:
        return cfg.max_position_embeddings

    def depth_to_unique(self, cfg) -> list[int]:
        """Depth t -> index of its unique layer (ALBERT: all zeros)."""
        keys = self.layer_map(cfg)
        uniq = list(dict.fromkeys(keys))
        return [uniq.index(k) for k in keys]

    def output_projection(self, model) -> tuple["nn.Module", str]:
        """(module, layout) of the last layer's output projection W_O (the steering site); layout 'linear'
        (weight stored (out, in)) or 'conv1d' ((in, out))."""
        raise NotImplementedError

    def output_norm(self, model) -> "nn.Module | None":
        """The norm that follows the last layer's output projection before the residual add (Gemma 3's
        post-attention RMSNorm), or None: every change of W_O reaches the residual stream through it, capped in
        norm and in direction p * u (paper.md section 6)."""
        return None

    def input_embeddings(self, model) -> "torch.Tensor":
        """The token embedding matrix (vocab, d) in the residual stream's space."""
        return self.base(model).get_input_embeddings().weight

    def token_vector(self, model, tid: int, kind: str) -> "torch.Tensor":
        """A token's direction in the residual stream (float64): ``embedding``, its input embedding row;
        ``unembedding``, its LM-head row seen through the final norm's gain (the logit of the token is
        W_U[tid] . (g * n(x)), so the direction in x that raises it is g * W_U[tid])."""
        if kind == "embedding":
            return self.input_embeddings(model)[tid].detach().double()
        head = getattr(model, "lm_head", None)
        if head is None or not self.causal:
            raise PowerlensError(f"target kind 'unembedding' needs a causal LM head (model has arch {self.arch!r})",
                                 "use kind: embedding or random for this model")
        return head.weight[tid].detach().double() * self.final_norm_gain(model)

    def final_norm_gain(self, model) -> "torch.Tensor":
        raise NotImplementedError

    def final_norm(self, model) -> "nn.Module | None":
        """The norm between the last layer and the head (None: post-LN encoders end with their layer's own)."""
        return None

    def head_logits(self, model, h: "torch.Tensor") -> "torch.Tensor":
        """The LM (or masked-LM) head of a model loaded with its head, applied to the last hidden state h."""
        return model.cls(h)  # (B, T, V): BertOnlyMLMHead

    def tail(self, model, y: "torch.Tensor", head: bool) -> tuple["torch.Tensor", "torch.Tensor | None"]:
        """What the model computes after its last layer, from that layer's output y (B, T, d): the last
        hidden state as ``output_hidden_states`` reports it, and the head's logits (None if ``head`` is
        False). With :meth:`layer_modules`, it lets a caller re-run the last layer alone on captured
        inputs (steering) and get what a full forward pass gives."""
        norm = self.final_norm(model)
        h = y if norm is None else norm(y)
        return h, (self.head_logits(model, h) if head else None)

    def size_terms(self, k: dict[str, Any]) -> dict[str, int]:
        """From a config's keyword arguments alone (no weights): ``params`` (base model, no LM head),
        ``d_model``, ``n_layers``, ``n_unique_layers``, ``attention_params`` (one layer's attention
        weights and biases) and ``layer_params`` (one layer)."""
        raise NotImplementedError

    def extraction_checks(self, w: "ModelWeights") -> dict[str, Any]:
        """Family-specific facts recorded by the proof of extraction."""
        return {}

    def n_heads(self, cfg) -> int:
        return cfg.num_attention_heads

    def d_model(self, cfg) -> int:
        return cfg.hidden_size

    def extract(self, model: nn.Module) -> ModelWeights:
        """All attention sublayers of ``model`` (weights copied; the model is not modified)."""
        from powerlens.models.weights import ModelWeights

        self.check(model)
        cfg = model.config
        keys = self.layer_map(cfg)
        unique = list(dict.fromkeys(keys))
        layers = [self.extract_unique(model, k) for k in unique]
        return ModelWeights(
            arch=self.arch, norm=self.norm, causal=self.causal, d_model=self.d_model(cfg),
            n_heads=self.n_heads(cfg), layers=layers, layer_map=[unique.index(k) for k in keys],
        )


def _encoder_layer_params(h: int, inter: int) -> int:
    return 4 * (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h) + 2 * h


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
        return _layer(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, _t(ln.weight), _t(ln.bias),
                            float(ln.eps), 1.0 / math.sqrt(d // H), None,
                            {"Q": hq, "K": hk, "V": hv, "O": ho})

    def sites(self, model):
        return [Site(att, att) for att in (self._att(model, t) for t in range(model.config.num_hidden_layers))]

    def layer_modules(self, model):
        return list(self.base(model).encoder.layer)

    def embed(self, model, ids):
        return self.base(model).embeddings(input_ids=ids)


class AlbertAdapter(Adapter):
    """ALBERT: ``num_hidden_groups`` groups of ``inner_group_num`` layers; depth i uses group
    ``int(i / (L / num_hidden_groups))``. Released v2 checkpoints have one group of one layer, so every
    depth applies the same F."""

    family = "ALBERT"
    twin_tokenizer = "wordpiece"  # a stand-in for ALBERT's SentencePiece
    arch, model_type, norm, causal, config_class = "albert", "albert", "post", False, "AlbertConfig"
    unused_modules = ("pooler",)  # AlbertModel's pooler acts on [CLS] after the last layer: no hidden state

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
        return _layer(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, _t(ln.weight), _t(ln.bias),
                            float(ln.eps), 1.0 / math.sqrt(d // H), None,
                            {"Q": hq, "K": hk, "V": hv, "O": ho})

    def sites(self, model):
        return [Site(self._att(model, k), self._att(model, k)) for k in self.layer_map(model.config)]

    def layer_modules(self, model):
        enc = self.base(model).encoder
        return [enc.albert_layer_groups[g].albert_layers[k] for g, k in self.layer_map(model.config)]

    def embed(self, model, ids):
        base = self.base(model)
        return base.encoder.embedding_hidden_mapping_in(base.embeddings(input_ids=ids))


class _DecoderAdapter(Adapter):
    """GPT-2 and GPT-Neo share the block layout: ``h[t]`` blocks, ``ln_1`` before ``attn``, ``wte + wpe``."""

    twin_tokenizer = "bpe"  # a byte-level BPE, as GPT-2's

    def sites(self, model):
        return [Site(b, b.attn) for b in self.base(model).h]

    def layer_modules(self, model):
        return list(self.base(model).h)

    def embed(self, model, ids):
        import torch

        base = self.base(model)
        pos = torch.arange(ids.shape[1], device=ids.device)[None]
        return base.wte(ids) + base.wpe(pos)

    def final_norm_gain(self, model):
        return self.base(model).ln_f.weight.detach().double()

    def final_norm(self, model):
        return self.base(model).ln_f

    def head_logits(self, model, h):
        return model.lm_head(h)

    def _size(self, h, v, n, positions, attn):
        f = 4 * h
        layer = 2 * h + attn + 2 * h + (h * f + f) + (f * h + h)
        return {"params": (v + positions) * h + n * layer + 2 * h, "d_model": h, "n_layers": n,
                "n_unique_layers": n, "attention_params": attn, "layer_params": layer}


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
        return _layer(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, _t(ln.weight), _t(ln.bias),
                            float(ln.eps), scale, None, {"Q": True, "K": True, "V": True, "O": True})

    def max_positions(self, cfg):
        return cfg.n_positions


class GPTNeoAdapter(_DecoderAdapter):
    """GPT-Neo: separate q/k/v projections without bias, **no** 1/sqrt(d_head) scaling, and layers
    alternating global and local (window) attention."""

    family = "GPT-Neo"
    arch, model_type, norm, causal, config_class = "gpt_neo", "gpt_neo", "pre", True, "GPTNeoConfig"

    def output_projection(self, model):
        return self.base(model).h[-1].attn.attention.out_proj, "linear"

    def size_terms(self, k):
        h = k["hidden_size"]  # no q, k, v biases
        return self._size(h, k["vocab_size"], k["num_layers"], k["max_position_embeddings"], 4 * h * h + h)

    def n_heads(self, cfg):
        return cfg.num_heads

    def layer_map(self, cfg):
        return [(t,) for t in range(cfg.num_layers)]

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
        return _layer(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, _t(ln.weight), _t(ln.bias),
                            float(ln.eps), 1.0, window, {"Q": hq, "K": hk, "V": hv, "O": ho},
                            scores_fp32=True)


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
        return _layer(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, ln_w, torch.zeros_like(ln_w), eps,
                      float(att.scaling), self._window(att, cfg, t), {"Q": hq, "K": hk, "V": hv, "O": ho},
                      d_head=dh, norm_kind=self.norm_kind, q_norm=q_norm, k_norm=k_norm, post_w=post_w,
                      rope_inv_freq=inv_freq, rope_scale=rscale, softmax_fp32=True, norm_fp32=True)

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
        import torch

        logits = model.lm_head(h)
        cap = getattr(model.config, "final_logit_softcapping", None)  # Gemma: cap * tanh(logits / cap)
        return logits if cap is None else torch.tanh(logits / cap) * cap

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


class Gemma3Adapter(LlamaAdapter):
    """Gemma 3 (text): as Llama, plus RMSNorms of each query and key head (``q_norm``, ``k_norm``), scores
    scaled by ``query_pre_attn_scalar**-0.5``, local layers attending within a sliding window (with their own
    RoPE base), and a post-attention RMSNorm applied to the attention output before the residual add. Gemma's
    RMSNorm multiplies by ``1 + w`` in float32; the extracted gains are ``1 + w``. The embedding is scaled by
    sqrt(d_model) inside ``embed_tokens``. F = sum_h W_O^h W_V^{g(h)} is the linear map between the two
    norms; the norm-folded F~ = diag(p) F diag(g) includes both gains (spectra)."""

    arch, model_type, config_class, family = "gemma3", "gemma3_text", "Gemma3TextConfig", "Gemma 3"
    norm_kind = "rms_gemma"

    def check(self, model):
        super().check(model)
        cfg = model.config
        if getattr(cfg, "attn_logit_softcapping", None) is not None:
            raise PowerlensError("Gemma checkpoint with attention logit soft-capping: not supported by the "
                                 "gemma3 adapter", "use a Gemma 3 checkpoint (soft-capping is Gemma 2's)")
        if getattr(cfg, "use_bidirectional_attention", False):
            raise PowerlensError("Gemma 3 checkpoint with bidirectional attention: not supported",
                                 "use a causal Gemma 3 language model")

    @staticmethod
    def _one_plus(norm) -> "torch.Tensor":
        return (1.0 + norm.weight.detach().float()).clone()  # as Gemma3RMSNorm forms it, in float32

    def _gains(self, layer):
        assert layer.input_layernorm.eps == layer.self_attn.q_norm.eps == layer.post_attention_layernorm.eps
        return (self._one_plus(layer.input_layernorm), self._one_plus(layer.post_attention_layernorm),
                float(layer.input_layernorm.eps))

    def _qk_norm(self, att):
        return self._one_plus(att.q_norm), self._one_plus(att.k_norm)

    def _rope(self, model, t):
        rot = self.base(model).rotary_emb
        kind = model.config.layer_types[t]
        return _t(getattr(rot, f"{kind}_inv_freq")).float(), float(getattr(rot, f"{kind}_attention_scaling"))

    def sites(self, model):
        return [Site(layer, layer.post_attention_layernorm) for layer in self.base(model).layers]

    def output_norm(self, model):
        return self.base(model).layers[-1].post_attention_layernorm

    def final_norm_gain(self, model):
        return self._one_plus(self.base(model).norm).double()

    def size_terms(self, k):
        h, n, v, f = k["hidden_size"], k["num_hidden_layers"], k["vocab_size"], k["intermediate_size"]
        attn, dh = self._attn_size(k)
        attn += 2 * dh  # q_norm, k_norm
        layer = attn + 3 * h * f + 4 * h
        return {"params": v * h + n * layer + h, "d_model": h, "n_layers": n, "n_unique_layers": n,
                "attention_params": attn, "layer_params": layer}


ADAPTERS: dict[str, Adapter] = {a.arch: a for a in (AlbertAdapter(), BertAdapter(), GPT2Adapter(), GPTNeoAdapter(),
                                                    LlamaAdapter(), Gemma3Adapter())}


def get_adapter(arch: str) -> Adapter:
    try:
        return ADAPTERS[arch]
    except KeyError:
        raise PowerlensError(f"unknown architecture {arch!r}",
                             f"`arch` must be one of: {', '.join(sorted(ADAPTERS))}") from None


def adapter_for_model(model: nn.Module) -> Adapter:
    mt = getattr(model.config, "model_type", None)
    for a in ADAPTERS.values():
        if a.model_type == mt:
            return a
    raise PowerlensError(f"no adapter for model_type {mt!r}",
                         f"supported: {', '.join(sorted(ADAPTERS))}; add one to powerlens.models.adapters.ADAPTERS")



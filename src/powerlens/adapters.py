"""One adapter per architecture, in one registry (``ADAPTERS``).

An adapter knows where a ``transformers`` model keeps its attention weights and turns them into
:class:`~powerlens.weights.LayerWeights` in the column-vector convention:

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
=========  ==========================================  ========================================  ======

Each adapter also names the modules whose inputs and outputs :mod:`powerlens.verify` records to prove
the extraction against the real forward pass (``sites``).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from .errors import PowerlensError
from .weights import LayerWeights, ModelWeights


def _t(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone()


def _bias(lin: nn.Module, d: int, like: torch.Tensor) -> tuple[torch.Tensor, bool]:
    b = getattr(lin, "bias", None)
    if b is None:
        return torch.zeros(d, dtype=like.dtype), False
    return _t(b), True


def _linear(lin: nn.Linear, d: int) -> tuple[torch.Tensor, torch.Tensor, bool]:
    W = _t(lin.weight)  # (out, in): already y = W x
    assert W.shape == (d, d), f"expected ({d}, {d}), got {tuple(W.shape)}"
    b, has = _bias(lin, d, W)
    return W, b, has


@dataclass(frozen=True)
class Site:
    """Where to observe one application of an attention sublayer in the real model.

    ``input_module``: its input (first positional argument or ``hidden_states``) is the sublayer input x.
    ``output_module``: its output (first element if a tuple) is what :func:`powerlens.attention.sublayer`
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


class Adapter:
    arch: str
    model_type: str
    norm: str
    causal: bool

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

    def n_heads(self, cfg) -> int:
        return cfg.num_attention_heads

    def d_model(self, cfg) -> int:
        return cfg.hidden_size

    def extract(self, model: nn.Module) -> ModelWeights:
        """All attention sublayers of ``model`` (weights copied; the model is not modified)."""
        self.check(model)
        cfg = model.config
        keys = self.layer_map(cfg)
        unique = list(dict.fromkeys(keys))
        layers = [self.extract_unique(model, k) for k in unique]
        return ModelWeights(
            arch=self.arch, norm=self.norm, causal=self.causal, d_model=self.d_model(cfg),
            n_heads=self.n_heads(cfg), layers=layers, layer_map=[unique.index(k) for k in keys],
        )


class BertAdapter(Adapter):
    arch, model_type, norm, causal = "bert", "bert", "post", False

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
        return LayerWeights(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, _t(ln.weight), _t(ln.bias),
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

    arch, model_type, norm, causal = "albert", "albert", "post", False

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
        return LayerWeights(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, _t(ln.weight), _t(ln.bias),
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

    def sites(self, model):
        return [Site(b, b.attn) for b in self.base(model).h]

    def layer_modules(self, model):
        return list(self.base(model).h)

    def embed(self, model, ids):
        base = self.base(model)
        pos = torch.arange(ids.shape[1], device=ids.device)[None]
        return base.wte(ids) + base.wpe(pos)


class GPT2Adapter(_DecoderAdapter):
    """GPT-2 stores ``Conv1D`` weights as (in, out) and fuses Q|K|V along the output dimension."""

    arch, model_type, norm, causal = "gpt2", "gpt2", "pre", True

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
        return LayerWeights(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, _t(ln.weight), _t(ln.bias),
                            float(ln.eps), scale, None, {"Q": True, "K": True, "V": True, "O": True})

    def max_positions(self, cfg):
        return cfg.n_positions


class GPTNeoAdapter(_DecoderAdapter):
    """GPT-Neo: separate q/k/v projections without bias, **no** 1/sqrt(d_head) scaling, and layers
    alternating global and local (window) attention."""

    arch, model_type, norm, causal = "gpt_neo", "gpt_neo", "pre", True

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
        return LayerWeights(W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, _t(ln.weight), _t(ln.bias),
                            float(ln.eps), 1.0, window, {"Q": hq, "K": hk, "V": hv, "O": ho},
                            scores_fp32=True)


ADAPTERS: dict[str, Adapter] = {a.arch: a for a in (AlbertAdapter(), BertAdapter(), GPT2Adapter(), GPTNeoAdapter())}


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
                         f"supported: {', '.join(sorted(ADAPTERS))}; add one to powerlens.adapters.ADAPTERS")



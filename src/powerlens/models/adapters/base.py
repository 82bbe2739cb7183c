"""What every adapter shares: the Adapter interface (with its defaults) and the weight-reading helpers."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple

from powerlens.core.errors import PowerlensError

if TYPE_CHECKING:  # torch is imported where it is used: the DAG-time helpers (size terms) need none of it
    from collections.abc import Callable

    import numpy as np
    import torch
    from torch import nn

    from powerlens.models.weights import LayerWeights, ModelWeights
from powerlens.models.hooks import Site


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


def _direct_square(read, name_V: str, name_O: str, d: int):
    """(W_V, W_O) read by :meth:`Adapter.direct_value_output` of an ``nn.Linear`` pair stored (out, in) = (d, d)
    (one head block per d_head rows of W_V, H d_head = d); None when either is missing or of another shape."""
    W_V, W_O = read(name_V), read(name_O)
    if W_V is None or W_O is None or W_V.shape != (d, d) or W_O.shape != (d, d):
        return None
    return W_V, W_O


class WeightPart(NamedTuple):
    """One attention weight inside a model's parameter: the parameter, the index of its part (GPT-2 fuses
    Q|K|V along the output columns), and the axis of that part that runs over output features (a head's rows:
    0 for ``nn.Linear``'s (out, in), 1 for GPT-2's ``Conv1D`` (in, out))."""

    param: "torch.Tensor"
    index: tuple
    out_axis: int

    def head(self, h: int, d_head: int) -> tuple:
        """The index of head ``h``'s block of output features within the parameter."""
        sl = list(self.index)  # two slices
        start = sl[self.out_axis].start or 0
        sl[self.out_axis] = slice(start + h * d_head, start + (h + 1) * d_head)
        return tuple(sl)


def _proj(lin: "nn.Module") -> WeightPart:
    """An ``nn.Linear``'s weight, whole: (out, in)."""
    return WeightPart(lin.weight, (slice(None), slice(None)), 0)


def _layer(*args, **kw) -> "LayerWeights":
    from powerlens.models.weights import LayerWeights

    return LayerWeights(*args, **kw)


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
    #: What the real module computes in float32 even in a float64 copy (None: nothing). The float64 extraction
    #: proof is then only as tight as float32 there: its tolerance is the float32 one (check_extraction).
    float32_parts: str | None = None

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

    def after_attention(self, x: "torch.Tensor", y: "torch.Tensor") -> "torch.Tensor":
        """The residual stream after the attention sublayer (its residual add and any norm that belongs to it,
        paper.md section 4b, C10), from a :meth:`sites` application's input x and output y: post-norm models
        (BERT, ALBERT) return LN(x + attn(x)) from the site, which is that stream; pre-norm ones (GPT-2,
        GPT-Neo, Llama) return attn(N(x)) and Gemma 3 P(attn(N(x))) (its post-attention norm belongs to the
        sublayer), which the block adds to x, as here."""
        return y if self.norm == "post" else x + y

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
        """The LM (or masked-LM) head of a model loaded with its head, applied to the last hidden state h:
        logits (B, T, V)."""
        raise NotImplementedError

    @staticmethod
    def linear_head(model, h: "torch.Tensor") -> "torch.Tensor":
        """``model.lm_head(h)`` for a bias-free linear head; rows h (n, d) inside
        :func:`~powerlens.core.scratch.reusing_scratch` (no autograd) are written into the scratch's ``logits``
        buffer: the value is read before the next call and never kept (steering's replayed passes, (n, V) with
        V = 262144 for Gemma 3). The same product: ``F.linear`` without a bias is ``matmul(h, W.T)``."""
        import torch

        from powerlens.core.scratch import scratch

        head, work = model.lm_head, scratch()
        if (work is None or h.dim() != 2 or type(head) is not torch.nn.Linear or head.bias is not None
                or torch.is_grad_enabled()):
            return head(h)
        W = head.weight  # (V, d)
        return torch.matmul(h, W.t(), out=work.torch("logits", (h.shape[0], W.shape[0]), W.dtype))  # (n, V)

    def tail(self, model, y: "torch.Tensor", head: bool, rows: "torch.Tensor | None" = None
             ) -> tuple["torch.Tensor", "torch.Tensor | None"]:
        """What the model computes after its last layer, from that layer's output y (B, T, d): the last
        hidden state as ``output_hidden_states`` reports it, and the head's logits (None if ``head`` is
        False): (B, T, V), or (n, V) at the n positions of the boolean mask ``rows`` (B, T) alone, the rows
        the full logits would give there (the head acts on each position by itself). With
        :meth:`layer_modules`, it lets a caller re-run the last layer alone on captured inputs (steering) and get
        what a full forward pass gives."""
        norm = self.final_norm(model)
        h = y if norm is None else norm(y)  # (B, T, d)
        if not head:
            return h, None
        return h, self.head_logits(model, h if rows is None else h[rows])  # (B, T, V) or (n, V)

    def size_terms(self, k: dict[str, Any]) -> dict[str, int]:
        """From a config's keyword arguments alone (no weights): ``params`` (base model, no LM head),
        ``d_model``, ``n_layers``, ``n_unique_layers``, ``attention_params`` (one layer's attention
        weights and biases) and ``layer_params`` (one layer)."""
        raise NotImplementedError

    #: The config.json keys :meth:`layer_map`, :meth:`n_heads` and :meth:`d_model` read, for reading W_V and W_O
    #: straight from a checkpoint (:mod:`powerlens.models.direct`); a config.json without one of them: the model
    #: is built instead.
    direct_config_keys: tuple[str, ...] = ()

    def direct_value_output(self, key: tuple[int, ...], read: "Callable[[str], np.ndarray | None]",
                            cfg) -> "tuple[np.ndarray, np.ndarray] | None":
        """W_V (H d_head, d), each key-value group repeated for its query heads as
        :meth:`~powerlens.models.weights.LayerWeights.v_per_head`, and W_O (d, H d_head) of unique layer ``key``,
        float64 numpy, in the convention of :meth:`extract_unique` (y = W x), read from a checkpoint without
        building the model (:mod:`powerlens.models.direct`): ``read(name)`` is the float64 tensor stored under
        ``name`` beneath the base model (a checkpoint with a head prefixes it, e.g. ``bert.``), None when it is
        missing, ambiguous or of a dtype numpy has not; ``cfg`` is config.json as attributes. None: the weights
        cannot be read this way (a tensor missing, a shape the configuration does not give), the model is built
        instead (whose loader names the problem)."""
        return None

    #: The leading eigenvalue's type the paper reports per size of this family (C5 (c)); empty: none.
    paper_leading_types: dict[str, str] = {}
    #: One layer's weights shared by every depth (ALBERT): the family claim C5 is about.
    shares_layers: bool = False

    def paper_size(self, meta: dict, paper_models: dict) -> str | None:
        """The paper's size name of a model of this family (C5 (c)), recognised from its configuration (hidden
        size, heads, layers in its weights.json) among ``paper_models`` (the paper's configurations), never from
        its name; None for a configuration the paper did not use, or a family without sizes."""
        return None

    def value_params(self, model: nn.Module, key: tuple[int, ...]) -> list[tuple["torch.Tensor", tuple]]:
        """The parameters that hold unique layer ``key``'s value projection (W_V and b_V), each with the index of
        its part where a parameter is fused (GPT-2's Q|K|V): what :meth:`scale_values` scales."""
        raise NotImplementedError

    def attention_weights(self, model: nn.Module, key: tuple[int, ...]) -> dict[str, "WeightPart"]:
        """Unique layer ``key``'s attention weights W_Q, W_K, W_V, W_O (no bias), each as a :class:`WeightPart`:
        what a matched control draws at random and rescales (paper.md section 4e)."""
        raise NotImplementedError

    def scale_values(self, model: nn.Module, key: tuple[int, ...], c: float) -> None:
        """Multiply unique layer ``key``'s value projection (weights and bias) by ``c`` in place: F = W_O W_V
        scales by ``c`` (a matched control's rescaling to the trained |lambda_1|, paper.md section 4d)."""
        import torch

        with torch.no_grad():
            for p, idx in self.value_params(model, key):
                p[idx] *= c

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
        for u, lw in enumerate(layers):  # the loader refuses non-finite weights; this guards the arithmetic too
            bad = [f.name for f in dataclasses.fields(lw) if _nonfinite(getattr(lw, f.name))]
            if bad:
                depths = [i for i, k in enumerate(keys) if k == unique[u]]
                raise PowerlensError(f"{self.arch}: unique layer {u} (depths {depths}): the extracted "
                                     f"{', '.join(bad)} hold NaN or inf",
                                     "check the checkpoint's weights at that layer (fetch it again)")
        return ModelWeights(arch=self.arch, norm=self.norm, causal=self.causal, d_model=self.d_model(cfg),
                            n_heads=self.n_heads(cfg), layers=layers, layer_map=[unique.index(k) for k in keys])


def _nonfinite(v) -> bool:
    import torch

    return torch.is_tensor(v) and v.is_floating_point() and not bool(torch.isfinite(v).all())


def _encoder_layer_params(h: int, inter: int) -> int:
    return 4 * (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h) + 2 * h


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
        return self.linear_head(model, h)

    def _size(self, h, v, n, positions, attn):
        f = 4 * h
        layer = 2 * h + attn + 2 * h + (h * f + f) + (f * h + h)
        return {"params": (v + positions) * h + n * layer + 2 * h, "d_model": h, "n_layers": n,
                "n_unique_layers": n, "attention_params": attn, "layer_params": layer}


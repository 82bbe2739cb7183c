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
TransformerLens has one conversion per architecture): where the attention weights are (in a built model,
and W_V, W_O by their names in a checkpoint's safetensors: ``direct_value_output``), the observation
sites that prove the extraction (``sites``), the layer modules of model-mode dynamics, x(0), the steering
site (``output_projection``), token vectors (``token_vector``), the transformers classes of twins and heads,
the size terms used for resource estimates (``size_terms``) and checks specific to the family. ``base`` holds the
:class:`Adapter` every class extends. Adding an
architecture is adding one file here (its class) and one line to ``ADAPTERS`` below, plus a tiny twin
configuration in :mod:`powerlens.models.archs` for the tests.
"""

from __future__ import annotations

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters.albert import AlbertAdapter
from powerlens.models.adapters.base import Adapter
from powerlens.models.adapters.bert import BertAdapter
from powerlens.models.adapters.gemma3 import Gemma3Adapter
from powerlens.models.adapters.gpt2 import GPT2Adapter
from powerlens.models.adapters.gpt_neo import GPTNeoAdapter
from powerlens.models.adapters.llama import LlamaAdapter

__all__ = ["ADAPTERS", "Adapter", "adapter_of_model_type", "get_adapter"]

ADAPTERS: dict[str, Adapter] = {a.arch: a for a in (AlbertAdapter(), BertAdapter(), GPT2Adapter(), GPTNeoAdapter(),
                                                    LlamaAdapter(), Gemma3Adapter())}


def get_adapter(arch: str) -> Adapter:
    try:
        return ADAPTERS[arch]
    except KeyError:
        raise PowerlensError(f"unknown architecture {arch!r}",
                             f"`arch` must be one of: {', '.join(sorted(ADAPTERS))}") from None


def adapter_of_model_type(model_type: str | None) -> Adapter | None:
    """The adapter of a transformers ``model_type`` (config.json, a GGUF header), or None if none has it."""
    return next((a for a in ADAPTERS.values() if a.model_type == model_type), None)

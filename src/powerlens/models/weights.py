"""Containers for extracted attention weights, saved as safetensors plus JSON metadata.

Conventions (TransformerLens names, column vectors as in ``nn.Linear``: ``y = W x + b``):

* ``W_Q``: ``(H d_head, d_model)``, ``W_K, W_V``: ``(H_kv d_head, d_model)``, ``W_O``: ``(d_model, H d_head)``;
  heads are stacked by rows of ``W_Q/W_K/W_V`` (head ``h`` owns rows ``h*d_head:(h+1)*d_head``) and by
  columns of ``W_O``. Without grouped-query attention ``H_kv = H`` and ``H d_head = d_model``.
* Grouped-query attention (Llama, Gemma 3): query head ``h`` reads key-value group
  ``g(h) = h // (H / H_kv)``.
* ``F = sum_h W_O^h W_V^{g(h)}`` (``= W_O W_V`` without GQA) is the layer matrix of the paper (biases
  dropped from ``F``, kept in the dynamics: the attention output is ``sum_j A_ij F x_j + W_O b_V + b_O``).
* ``ln_w, ln_b, ln_eps``: the norm that belongs to the attention sublayer: ``ln_1`` / ``input_layernorm``
  *before* attention in pre-norm models (GPT-2, GPT-Neo, Llama, Gemma 3), the LayerNorm *after* the
  residual add in post-LN models (BERT, ALBERT). ``norm_kind`` says which norm: ``layer`` (LayerNorm),
  ``rms`` (Llama's RMSNorm: gain applied in the model dtype) or ``rms_gemma`` (Gemma's RMSNorm: gain
  ``1 + w``, stored as ``ln_w`` already added, applied in float32). ``ln_b`` is zero for RMS norms.
* Gemma 3 extras: ``q_norm``/``k_norm`` (RMSNorm gains over d_head applied to queries and keys),
  ``post_w`` (the post-attention RMSNorm's gain, applied to the attention output before the residual add).
* ``rope_inv_freq`` (d_head/2,) and ``rope_scale``: rotary position embedding of queries and keys.
* ``*_fp32`` flags mirror steps the real module computes in float32 whatever the model dtype, so the float64
  proof of extraction is exact; the dynamics switch them off (:meth:`LayerWeights.exact`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from powerlens.core.io import (
    atomic_path,
    canonical_safetensors_header,
    read_json,
    reading_generated,
    sha256_file,
    write_json,
)

MATRICES = ("W_Q", "W_K", "W_V", "W_O")
VECTORS = ("b_Q", "b_K", "b_V", "b_O", "ln_w", "ln_b")
OPTIONAL = ("q_norm", "k_norm", "post_w", "rope_inv_freq")  # tensors only some architectures have
FP32_FLAGS = ("scores_fp32", "softmax_fp32", "norm_fp32")


@dataclass(kw_only=True)
class LayerWeights:
    """One attention sublayer, in the column-vector convention."""

    W_Q: torch.Tensor  # (H dh, d)
    W_K: torch.Tensor  # (H_kv dh, d)
    W_V: torch.Tensor  # (H_kv dh, d)
    W_O: torch.Tensor  # (d, H dh)
    b_Q: torch.Tensor  # (H dh,)
    b_K: torch.Tensor  # (H_kv dh,)
    b_V: torch.Tensor  # (H_kv dh,)
    b_O: torch.Tensor  # (d,)
    ln_w: torch.Tensor  # (d,)
    ln_b: torch.Tensor  # (d,)
    ln_eps: float
    attn_scale: float  # multiplies q.k (1/sqrt(d_head); 1.0 for GPT-Neo)
    window: int | None = None  # local attention: key j visible from query i iff 0 <= i - j < window
    has_bias: dict[str, bool] = field(default_factory=dict)
    scores_fp32: bool = False  # GPT-Neo computes q.k and the softmax in float32 whatever the model dtype
    d_head: int | None = None  # None: d_model / n_heads (no grouped-query attention)
    norm_kind: str = "layer"  # layer | rms | rms_gemma (see the module docstring)
    q_norm: torch.Tensor | None = None  # (dh,) Gemma 3: RMSNorm gain (1 + w) on each query head
    k_norm: torch.Tensor | None = None  # (dh,) Gemma 3: RMSNorm gain (1 + w) on each key head
    post_w: torch.Tensor | None = None  # (d,) Gemma 3: post-attention RMSNorm gain (1 + w)
    rope_inv_freq: torch.Tensor | None = None  # (dh/2,) rotary inverse frequencies (float32, as the model's)
    rope_scale: float = 1.0  # multiplies cos and sin (the model's attention_scaling)
    softmax_fp32: bool = False  # Llama, Gemma 3 (eager): softmax in float32 whatever the model dtype
    norm_fp32: bool = False  # RMSNorm computed in float32 whatever the model dtype

    @property
    def groups(self) -> int:
        """Query heads per key-value head, H / H_kv (1 without grouped-query attention)."""
        return self.W_O.shape[1] // self.W_V.shape[0]

    def v_per_head(self) -> torch.Tensor:
        """W_V with each key-value group's rows repeated for its query heads: (H dh, d)."""
        g = self.groups
        if g == 1:
            return self.W_V
        dh = self.d_head
        assert dh is not None and self.W_V.shape[0] % dh == 0, "grouped-query attention needs d_head"
        return self.W_V.view(-1, dh, self.W_V.shape[1]).repeat_interleave(g, dim=0).reshape(-1, self.W_V.shape[1])

    def b_v_per_head(self) -> torch.Tensor:
        g = self.groups
        return self.b_V if g == 1 else self.b_V.view(-1, self.d_head).repeat_interleave(g, dim=0).reshape(-1)

    @property
    def F(self) -> torch.Tensor:
        """Layer matrix F = sum_h W_O^h W_V^{g(h)} (d, d), in float64 (= W_O W_V without GQA)."""
        return self.W_O.double() @ self.v_per_head().double()

    @property
    def b_eff(self) -> torch.Tensor:
        """Constant term of the attention output: W_O b_V + b_O (rows of A sum to one)."""
        return self.W_O.double() @ self.b_v_per_head().double() + self.b_O.double()

    def folded_gains(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(input gain g, output gain p) of the norm-folded F~ = diag(p) F diag(g) of a pre-norm layer: g the
        pre-attention norm's gain, p Gemma 3's post-attention norm gain (None: identity)."""
        return self.ln_w, self.post_w

    def exact(self) -> "LayerWeights":
        """The same layer with every float32-mirroring flag off (the dynamics' exact float64 arithmetic)."""
        return dataclasses.replace(self, **{f: False for f in FP32_FLAGS})

    def to(self, dtype: torch.dtype, device: str | torch.device = "cpu") -> "LayerWeights":
        kw = {k: getattr(self, k).to(device=device, dtype=dtype) for k in MATRICES + VECTORS}
        opt = {k: (None if getattr(self, k) is None else getattr(self, k).to(device=device, dtype=dtype))
               for k in OPTIONAL if k != "rope_inv_freq"}
        inv = None if self.rope_inv_freq is None else self.rope_inv_freq.to(device=device)  # stays float32
        return dataclasses.replace(self, **kw, **opt, rope_inv_freq=inv, has_bias=dict(self.has_bias))


@dataclass(kw_only=True)
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
        return self.layers[0].d_head or self.d_model // self.n_heads

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

        tensors: dict[str, torch.Tensor] = {}
        for u, lw in enumerate(self.layers):
            for k in MATRICES + VECTORS + OPTIONAL:
                if getattr(lw, k) is not None:
                    tensors[f"layers.{u}.{k}"] = getattr(lw, k).detach().cpu().contiguous()
            tensors[f"layers.{u}.F"] = lw.F.detach().cpu().contiguous()
        meta = self.metadata(extra_meta)
        st_meta = {"format": "pt", "powerlens": json.dumps({k: meta[k] for k in (
            "arch", "model", "random_weights", "weights_label")}, sort_keys=True)}
        with atomic_path(st_path) as tmp:
            save_file(tensors, str(tmp), metadata=st_meta)
            canonical_safetensors_header(tmp)  # the same bytes in every run (safetensors orders metadata at random)
        meta["tensors_sha256"] = sha256_file(st_path)
        write_json(json_path, meta)

    def metadata(self, extra: dict | None = None) -> dict[str, Any]:
        meta = {
            "arch": self.arch, "norm": self.norm, "causal": self.causal, "d_model": self.d_model,
            "n_heads": self.n_heads, "d_head": self.d_head, "n_layers": self.n_layers,
            "n_unique_layers": len(self.layers), "layer_map": self.layer_map, "shared_weights": self.shared,
            "layers": [
                {"attn_scale": lw.attn_scale, "window": lw.window, "ln_eps": lw.ln_eps,
                 "has_bias": lw.has_bias, "scores_fp32": lw.scores_fp32, "softmax_fp32": lw.softmax_fp32,
                 "norm_fp32": lw.norm_fp32, "d_head": lw.d_head, "norm_kind": lw.norm_kind,
                 "rope_scale": lw.rope_scale, "groups": lw.groups,
                 "optional": [k for k in OPTIONAL if getattr(lw, k) is not None]}
                for lw in self.layers
            ],
            "convention": "column vectors, y = W x + b; heads stacked by rows of W_Q/W_K/W_V and "
                          "columns of W_O; F = sum_h W_O^h W_V^g(h) (= W_O W_V without grouped-query "
                          "attention; float64), biases dropped from F (our choice)",
            "ln_role": "norm before attention" if self.norm == "pre" else "LayerNorm after residual add",
        }
        meta.update(self.meta)
        meta.update(extra or {})
        meta.setdefault("model", None)
        meta.setdefault("random_weights", False)
        meta.setdefault("weights_label", "random weights" if meta["random_weights"] else "trained weights")
        return meta

    @classmethod
    def load(cls, st_path: str | Path, json_path: str | Path, lazy: bool = False) -> "ModelWeights":
        """Read a ``weights.safetensors`` + ``weights.json`` pair. ``lazy``: read each unique layer from the file
        when it is asked for (and not keep it), so a step that walks the layers one at a time holds one
        layer's tensors, never the whole model's (the file's keys are still checked at once)."""
        from safetensors import safe_open

        with reading_generated(json_path, "extract"):
            meta = read_json(json_path)
        # only the tensors a LayerWeights holds (the stored float64 F is the spectra step's: the same bits as
        # LayerWeights.F recomputes, checked by tests/unit/test_spectra_inputs.py)
        with reading_generated(st_path, "extract"):
            with safe_open(str(st_path), framework="pt") as f:
                keys = set(f.keys())
                tensors = {} if lazy else {k: f.get_tensor(k) for k in keys
                                           if k.rsplit(".", 1)[-1] in MATRICES + VECTORS + OPTIONAL}
            for u, lm in enumerate(meta["layers"]):
                missing = [k for k in _layer_keys(u, lm) if k not in keys]
                if missing:
                    raise KeyError(f"tensor {missing[0]} missing")
        if lazy:
            layers = _LazyLayers(Path(st_path), meta["layers"])
        else:
            layers = [_layer_from(u, lm, tensors.pop) for u, lm in enumerate(meta["layers"])]
        core = {"arch", "norm", "causal", "d_model", "n_heads", "layer_map"}
        return cls(arch=meta["arch"], norm=meta["norm"], causal=meta["causal"], d_model=meta["d_model"],
                   n_heads=meta["n_heads"], layers=layers, layer_map=meta["layer_map"],
                   meta={k: v for k, v in meta.items() if k not in core})


def _layer_keys(u: int, lm: dict) -> list[str]:
    return [f"layers.{u}.{k}" for k in MATRICES + VECTORS + tuple(lm.get("optional", []))]


def _layer_from(u: int, lm: dict, get) -> LayerWeights:
    """Unique layer u from its metadata ``lm`` and a getter of tensors by key."""
    kw = {k: get(f"layers.{u}.{k}") for k in MATRICES + VECTORS + tuple(lm.get("optional", []))}
    return LayerWeights(**kw, ln_eps=lm["ln_eps"], attn_scale=lm["attn_scale"], window=lm["window"],
                        has_bias=lm["has_bias"], scores_fp32=lm.get("scores_fp32", False),
                        softmax_fp32=lm.get("softmax_fp32", False), norm_fp32=lm.get("norm_fp32", False),
                        d_head=lm.get("d_head"), norm_kind=lm.get("norm_kind", "layer"),
                        rope_scale=lm.get("rope_scale", 1.0))


class _LazyLayers(Sequence):
    """The unique layers of a ``weights.safetensors``, each read from the file when indexed (not cached)."""

    def __init__(self, st_path: Path, metas: list[dict]):
        self.st_path, self.metas = st_path, metas

    def __len__(self) -> int:
        return len(self.metas)

    def __getitem__(self, u):
        if isinstance(u, slice):
            return [self[i] for i in range(*u.indices(len(self)))]
        from safetensors import safe_open

        u = range(len(self))[u]
        with reading_generated(self.st_path, "extract"):
            with safe_open(str(self.st_path), framework="pt") as f:
                return _layer_from(u, self.metas[u], f.get_tensor)

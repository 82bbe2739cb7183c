"""W_V and W_O read straight from a checkpoint's safetensors files, by the tensor names the architecture's
adapter declares (:meth:`~powerlens.models.adapters.base.Adapter.value_output_names`), without building the
transformers model: what ``powerlens inspect`` needs for the spectra of F = W_O W_V, in a fraction of the time
(numpy and safetensors only; no torch, no transformers). The pipeline never uses it: its extract step reads
every matrix from the built model and its check_extraction step proves them against the model's own output.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import get_adapter


def _locate(names: list[str], keys: dict[str, Path]) -> list[str] | None:
    """Each name's key in the checkpoint: the name itself or the name under one prefix (``bert.``)."""
    found = []
    for n in names:
        hits = [k for k in keys if k == n or k.endswith("." + n)]
        if len(hits) != 1:
            return None
        found.append(hits[0])
    return found


def direct_value_output(folder: Path, arch: str, cfg: dict):
    """``(layers, layer_map, n_heads)`` of a safetensors folder: per unique layer (W_V (H d_head, d), W_O
    (d, H d_head)) in float64, depth -> unique layer, and the head count; or None when the weights cannot be
    read this way (an adapter that declares no names, a config.json without a key the layer map needs, a
    tensor missing, or a dtype numpy has not, e.g. bfloat16): the caller then builds the model. Non-finite
    weights stop with the same message the model's loader gives."""
    from safetensors import safe_open

    adapter = get_adapter(arch)
    if not adapter.direct_config_keys or any(k not in cfg for k in adapter.direct_config_keys):
        return None
    ns = SimpleNamespace(**cfg)
    keys_by_depth = adapter.layer_map(ns)
    unique = list(dict.fromkeys(keys_by_depth))
    keys: dict[str, Path] = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="numpy") as st:
            keys.update(dict.fromkeys(st.keys(), f))
    d, layers = adapter.d_model(ns), []
    for key in unique:
        where = _locate(list(adapter.value_output_names(key)), keys)
        if where is None:
            return None
        mats = []
        for name in where:
            try:
                with safe_open(str(keys[name]), framework="numpy") as st:
                    W = st.get_tensor(name)
            except (TypeError, ValueError):  # a dtype numpy cannot hold (bfloat16): build the model instead
                return None
            if W.shape != (d, d):
                return None
            if not np.isfinite(W).all():
                raise PowerlensError(f"{folder}: tensor {name} holds NaN or inf",
                                     "check the checkpoint's weights (download or save it again)")
            mats.append(W.astype(np.float64))  # (out, in), y = W x
        layers.append(tuple(mats))
    return layers, [unique.index(k) for k in keys_by_depth], adapter.n_heads(ns)

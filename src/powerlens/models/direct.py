"""W_V and W_O read straight from a checkpoint's safetensors files by the architecture's adapter
(:meth:`~powerlens.models.adapters.base.Adapter.direct_value_output`: BERT, ALBERT, GPT-2, GPT-Neo, Llama, Gemma 3),
without building the transformers model: what ``powerlens inspect`` needs for the spectra of F = W_O W_V, in a
fraction of the time (numpy and safetensors only; no torch, no transformers). Here is what every architecture
shares (the files, the layer map, the dtypes, the refusal of NaN); where each keeps its tensors and how they become
W_V (H d_head, d) and W_O (d, H d_head) is in its adapter. The pipeline never uses it: its extract step reads every
matrix from the built model and its check_extraction step proves them against the model's own output.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import get_adapter
from powerlens.models.sources.coverage import weight_files


def _locate(names: list[str], keys: dict[str, Path]) -> list[str] | None:
    """Each name's key in the checkpoint: the name itself or the name under one prefix (``bert.``); None when
    one is missing or found under more than one prefix."""
    found = []
    for n in names:
        hits = [k for k in keys if k == n or k.endswith("." + n)]
        if len(hits) != 1:
            return None
        found.append(hits[0])
    return found


class _Unreadable(Exception):
    """A tensor of a dtype numpy has not (bfloat16): the model is built instead."""


def direct_value_output(folder: Path, arch: str, cfg: dict):
    """``(layers, layer_map, n_heads)`` of a safetensors folder: per unique layer (W_V (H d_head, d), each
    key-value group repeated for its query heads, W_O (d, H d_head)) in float64, depth -> unique layer, and the
    head count; or None when the weights cannot be read this way (a config.json without a key the layer map
    needs, a tensor missing or of a shape the configuration does not give, a dtype numpy has not, e.g.
    bfloat16): the caller then builds the model. Non-finite weights stop with the same message the model's
    loader gives."""
    from safetensors import safe_open

    adapter = get_adapter(arch)
    if not adapter.direct_config_keys or any(k not in cfg for k in adapter.direct_config_keys):
        return None
    ns = SimpleNamespace(**cfg)
    keys_by_depth = adapter.layer_map(ns)
    unique = list(dict.fromkeys(keys_by_depth))
    d, H = adapter.d_model(ns), adapter.n_heads(ns)
    with contextlib.ExitStack() as stack:
        files = {f: stack.enter_context(safe_open(str(f), framework="numpy"))
                 for f in weight_files(folder)}  # the files transformers loads, no stray backup
        keys = {k: f for f, st in files.items() for k in st.keys()}

        def read(name: str) -> np.ndarray | None:
            where = _locate([name], keys)
            if where is None:
                return None
            try:
                W = files[keys[where[0]]].get_tensor(where[0])
            except (TypeError, ValueError):  # a dtype numpy cannot hold (bfloat16)
                raise _Unreadable(where[0]) from None
            if not np.isfinite(W).all():
                raise PowerlensError(f"{folder}: tensor {where[0]} holds NaN or inf",
                                     "check the checkpoint's weights (download or save it again)")
            return W.astype(np.float64)

        layers = []
        for key in unique:
            try:
                got = adapter.direct_value_output(key, read, ns)
            except _Unreadable:
                return None
            if got is None:
                return None
            W_V, W_O = got
            assert W_V.dtype == W_O.dtype == np.float64, (W_V.dtype, W_O.dtype)
            assert W_V.ndim == 2 and W_V.shape[1] == d and W_V.shape[0] % H == 0, (W_V.shape, d, H)
            assert W_O.shape == (d, W_V.shape[0]), (W_O.shape, W_V.shape)
            layers.append((W_V, W_O))
    return layers, [unique.index(k) for k in keys_by_depth], H

"""Hooks on a transformers model: the observation sites of an attention sublayer (their inputs and outputs
during a forward pass) and a forward pass without a key-value cache."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch import nn


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


"""Proof of extraction: rebuild every attention sublayer's output from the extracted matrices and compare
it with what the real ``transformers`` module computed in an ordinary forward pass.

Forward hooks record, at each depth, the sublayer input x and the module output y during
``model(input_ids, attention_mask)`` on random multi-token inputs with right padding. Then
:func:`powerlens.models.attention.sublayer` recomputes y from x and the :class:`~powerlens.models.weights.ModelWeights`
alone (softmax attention, masks, scaling, biases, LayerNorm). A transposed matrix, a mis-sliced head, a
wrong scale or a wrong mask makes the error of order one; a correct extraction leaves only rounding
(about 1e-7 in float32, 1e-15 in float64).

The float64 proof never holds a float64 copy of the model (:func:`layerwise_errors`): the float32 pass
records each layer's inputs, and each layer in turn is copied to float64 alone and run on them (cast to
float64), so the peak is the float32 model plus one layer in float64.
"""

from __future__ import annotations

import contextlib
import copy

import torch

from powerlens.models.adapters import Adapter
from powerlens.models.attention import sublayer
from powerlens.models.hooks import Site, no_kv_cache, site_io
from powerlens.models.weights import ModelWeights


@contextlib.contextmanager
def record_sites(model: torch.nn.Module, adapter: Adapter):
    """Record (x, y) for every application of the attention sublayer, in call order."""
    records: list[dict] = []
    with site_io(adapter.sites(model), lambda i, x, y: records.append({"x": x, "y": y}), clone=True):
        yield records


def random_inputs(model, n_batch: int = 3, seq_len: int = 12, seed: int = 0):
    """Random token ids and a right-padded attention mask (row b keeps seq_len - 2b tokens)."""
    g = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (n_batch, seq_len), generator=g)
    mask = torch.ones(n_batch, seq_len, dtype=torch.long)
    for b in range(n_batch):
        mask[b, max(2, seq_len - 2 * b):] = 0
    return ids, mask


@torch.no_grad()
def reconstruction_errors(model: torch.nn.Module, adapter: Adapter, weights: ModelWeights,
                          n_batch: int = 3, seq_len: int = 12, seed: int = 0) -> list[float]:
    """Max |y_real - y_rebuilt| per depth, over the non-padded query positions."""
    model.eval()
    ids, mask = random_inputs(model, n_batch, seq_len, seed)
    with record_sites(model, adapter) as records:
        model(input_ids=ids, attention_mask=mask)
    assert len(records) == weights.n_layers, (len(records), weights.n_layers)
    dtype = next(model.parameters()).dtype
    errs = []
    valid = mask.bool()
    for t, rec in enumerate(records):
        lw = weights.layer(t).to(dtype)
        y = sublayer(rec["x"], lw, weights.n_heads, weights.norm, weights.causal, pad_mask=mask)
        errs.append(float((y - rec["y"])[valid].abs().max()))
    return errs


def _cast(v, dtype):
    """Floating tensors (in tuples, lists and dicts too) cast to ``dtype`` (a fresh copy; None: the same
    dtype); the rest as is."""
    if torch.is_tensor(v):
        if not v.is_floating_point():
            return v
        return v.clone() if dtype is None else v.to(dtype, copy=True)
    if isinstance(v, (tuple, list)):
        return type(v)(_cast(x, dtype) for x in v)
    if isinstance(v, dict):
        return {k: _cast(x, dtype) for k, x in v.items()}
    return v


@torch.no_grad()
def layerwise_errors(model: torch.nn.Module, adapter: Adapter, weights: ModelWeights, dtype=torch.float64,
                     n_batch: int = 3, seq_len: int = 12, seed: int = 0) -> list[float]:
    """Max |y_real - y_rebuilt| per depth in ``dtype``, one layer at a time: the loaded model's forward pass on
    :func:`random_inputs` records every layer's inputs (positional and keyword: hidden states, masks, rotary
    tables); then layer t alone is copied to ``dtype`` and run on its inputs cast to ``dtype``, and the
    attention sublayer seen there (its site) is rebuilt from the extracted matrices in ``dtype``. Peak memory:
    the model as loaded plus one layer in ``dtype``."""
    model.eval()
    ids, mask = random_inputs(model, n_batch, seq_len, seed)
    layers = adapter.layer_modules(model)
    sites = adapter.sites(model)
    calls: list[tuple] = []
    handles = [m.register_forward_pre_hook(lambda mod, a, k: calls.append((mod, _cast(a, None), _cast(k, None))),
                                           with_kwargs=True) for m in {id(m): m for m in layers}.values()]
    try:
        with no_kv_cache(model):
            model(input_ids=ids, attention_mask=mask)
    finally:
        for h in handles:
            h.remove()
    assert len(calls) == weights.n_layers, (len(calls), weights.n_layers)
    valid = mask.bool()
    errs = []
    held: tuple | None = None  # (module, its copy in dtype, the site in the copy, extracted matrices in dtype)
    for t, (mod, args, kwargs) in enumerate(calls):
        assert mod is layers[t], t
        if held is None or held[0] is not mod:  # a shared layer is copied once for all its depths
            held = None  # the previous layer's copy is freed before the next is made
            path = {id(m): n for n, m in mod.named_modules()}
            one = copy.deepcopy(mod).to(dtype)  # this layer alone in dtype
            site = Site(one.get_submodule(path[id(sites[t].input_module)]),
                        one.get_submodule(path[id(sites[t].output_module)]))
            held = (mod, one, site, weights.layer(t).to(dtype))
            del one
        _, one, site, lw = held
        rec: list[tuple] = []
        with site_io([site], lambda i, x, y: rec.append((x, y)), clone=True):
            one(*_cast(args, dtype), **_cast(kwargs, dtype))
        assert len(rec) == 1, (t, len(rec))
        x, y = rec[0]
        y_rebuilt = sublayer(x, lw, weights.n_heads, weights.norm, weights.causal, pad_mask=mask)
        errs.append(float((y_rebuilt - y)[valid].abs().max()))
    return errs

"""Edits of a loaded model, undone on exit: the rank-1 change of the last layer's output projection (restored
byte for byte, a checksum proves it) and hooks that edit or add at the last call of a site; the target u."""

from __future__ import annotations

import contextlib
import hashlib

import numpy as np
import torch

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import get_adapter
from powerlens.models.archs import has_lm_head


def checksum(module: torch.nn.Module) -> str:
    """sha256 over the module's state (each name, then its tensor's bytes, in name order). Each tensor is hashed
    through its buffer, not a ``tobytes`` copy: the same digest without copying the model (Gemma 3: 1 GB, 1.8 s
    of copies per checksum)."""
    h = hashlib.sha256()
    for name, p in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy())  # a C-contiguous array: its bytes, read in place
    return h.hexdigest()


def output_projection(model, arch: str):
    """(module, layout) of the last layer's output projection; layout 'linear' (out, in) or 'conv1d' (in, out)."""
    return get_adapter(arch).output_projection(model)


@contextlib.contextmanager
def rank1_output_edit(model, arch: str, u: np.ndarray, z: np.ndarray, scale: float):
    """Temporarily set O' = O + alpha u z^T on the last layer (in place); restore exactly on exit."""
    mod, layout = output_projection(model, arch)
    W = mod.weight
    saved = W.detach().clone()
    delta = scale * np.outer(u, z)  # (d, d) in the (out, in) convention
    if layout == "conv1d":
        delta = delta.T
    with torch.no_grad():
        W.add_(torch.as_tensor(delta, dtype=W.dtype, device=W.device))
    try:
        yield mod
    finally:
        with torch.no_grad():
            W.copy_(saved)


@contextlib.contextmanager
def last_call_edit(site, calls: int, u: np.ndarray | None = None, z: np.ndarray | None = None, scale: float = 0.0,
                   add: np.ndarray | None = None):
    """The rank-1 edit (``u``, ``z``, ``scale``: the site's output changed by scale u z^T h) or the baseline
    (``add``, a vector added to the output) at the last of the ``calls`` calls of a shared output projection
    per forward pass only, by a forward hook, the weights untouched: the whole-stack reference of
    ``shared_edit = "last_depth"`` (the steering step itself replays the last depth instead)."""
    if (add is None) == (z is None or u is None):
        raise ValueError("last_call_edit: give u and z (the rank-1 edit) or add (the baseline), not both")
    n = {"calls": 0}

    def hook(mod, args, out):
        n["calls"] += 1
        if n["calls"] % calls:
            return None
        if add is not None:
            return out + torch.as_tensor(add, dtype=out.dtype, device=out.device)
        h = args[0]
        hz = h @ torch.as_tensor(z, dtype=h.dtype, device=h.device)  # (B, T)
        return out + scale * hz[..., None] * torch.as_tensor(u, dtype=out.dtype, device=out.device)

    handle = site.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def target_vector(model, tokenizer, arch: str, kind: str, token: str | None = None, seed: int = 0,
                  d: int | None = None) -> tuple[np.ndarray, int | None]:
    """A unit target u in token space and the token id it stands for (None for random targets).

    embedding: the token's input embedding row (ALBERT: mapped by embedding_hidden_mapping_in's matrix);
    unembedding: the LM head row of the token seen through the final norm's gain (g * W_U[token]; Gemma's
    gain is 1 + w); random: a seeded Gaussian unit vector. The architecture's adapter knows where each is."""
    if kind == "random":
        rng = np.random.default_rng([seed, 7])
        u = rng.standard_normal(d)
        return u / np.linalg.norm(u), None
    if token is None:
        raise PowerlensError(f"steering target of kind {kind!r} needs a `token`", "add `token: <text>` to the target")
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = tokenizer.convert_ids_to_tokens(ids)
        raise PowerlensError(f"steering token {token!r} is split by the tokenizer into {pieces}",
                             "choose a token that is a single vocabulary entry (for GPT-2 often with a leading "
                             "space, e.g. ' the'), or use kind: random")
    tid = ids[0]
    if kind not in ("embedding", "unembedding"):
        raise PowerlensError(f"unknown steering target kind {kind!r}", "use embedding, unembedding or random")

    u = get_adapter(arch).token_vector(model, tid, kind).cpu().numpy()
    return u / np.linalg.norm(u), tid


def config_has_lm_head(model_config) -> bool:
    """:func:`powerlens.models.archs.has_lm_head` of a transformers config."""
    return has_lm_head(getattr(model_config, "architectures", None))


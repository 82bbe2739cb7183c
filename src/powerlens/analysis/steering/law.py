"""The attention-only law with the edit: the prefix up to the edited depths (cached), then the edited steps,
for shared-weight models at every depth or the last one only."""

from __future__ import annotations

import numpy as np
import torch

from powerlens.core.errors import PowerlensError
from powerlens.models.attention import attention_only_step, law_attention, law_norm

SHARED_EDITS = ("every_depth", "last_depth")


def edits_every_depth(weights, shared_edit: str) -> bool:
    """Whether the last layer's edit acts at every depth (so every pass runs the whole stack): shared
    weights with ``shared_edit = "every_depth"`` (the edited matrix is the shared layer's)."""
    if shared_edit not in SHARED_EDITS:
        raise PowerlensError(f"unknown steering.shared_edit {shared_edit!r}", f"use one of {', '.join(SHARED_EDITS)}")
    return bool(weights.shared) and shared_edit == "every_depth"


def edited_depths(weights, shared_edit: str) -> list[int]:
    """The depths the last layer's edit acts at: every depth (:func:`edits_every_depth`) or the last one."""
    L = weights.n_layers
    return list(range(L)) if edits_every_depth(weights, shared_edit) else [L - 1]


def intervention_sites(weights, shared_edit: str) -> str:
    """Where both methods act, in words (for the outputs)."""
    if edits_every_depth(weights, shared_edit):
        return ("every depth: the edited output matrix is the shared layer's, so both methods (the rank-1 edit "
                "and the baseline's beta u at the same output projection) act at every depth, in both dynamics "
                "modes (steering.shared_edit: every_depth)")
    if weights.shared:
        return ("the last depth only: the shared layer is applied unedited at every earlier depth, and both "
                "methods act at its last application, in both dynamics modes (steering.shared_edit: last_depth)")
    return "the last layer's output projection only, for both methods, in both dynamics modes"


@torch.no_grad()
def attention_only_prefix(x0s: list, weights, batches, depths: list[int], norm: str = "l2") -> list:
    """x entering the first of the edited ``depths`` (:func:`edited_depths`), per batch (float64): the paper's
    law through the unedited depths, computed once for every target and kappa. One layer's weights are held
    at a time (layers outer, batches inner: each batch's arithmetic is the same as batch by batch)."""
    xs = list(x0s)
    for t in range(depths[0]):
        lw = weights.layer(t).to(torch.float64).exact()
        for i, b in enumerate(batches):
            xs[i] = attention_only_step(xs[i], lw, weights.n_heads, weights.causal, b.mask, norm)
    return xs


class LawCache:
    """What every setting of :func:`attention_only_steering` shares, for one list of inputs ``x_ins``: the
    attention at the first edited depth (its input is x_ins for every target, kappa and method; the edit
    and the baseline act after it) and the unedited law's final states (kappa 0: alpha = beta = 0 leaves
    the law unedited for every target and both methods). Each is computed once, on first use, by the same
    arithmetic as without the cache, so the numbers are the same bit for bit."""

    def __init__(self, x_ins: list):
        self.x_ins = x_ins
        self.first: dict[int, tuple] = {}  # batch -> (attention output (B, T, d), concat_h(A^h V^h) (B, T, H dh))
        self.plain: dict[int, torch.Tensor] = {}  # batch -> x after the last depth, unedited (B, T, d)


@torch.no_grad()
def attention_only_steering(x_ins: list, weights, batches, u: np.ndarray, z: np.ndarray, scale: float,
                            depths: list[int], norm: str = "l2", cache: LawCache | None = None) -> dict:
    """The paper's law through the edited ``depths`` (:func:`edited_depths`: from the first to the last
    depth) with the rank-1 edit, and with the activation-addition baseline at matched norm of change, at the
    same site(s).

    x_ins: per batch, x entering the first edited depth (:func:`attention_only_prefix`, float64). ``cache``: a
    :class:`LawCache` of the same x_ins, shared by the calls of every target and kappa. Returns mean |cos(x,
    u)| after the last layer for both methods, the edit's mean norm of change at the site (last application)
    and the baseline's beta (= that norm)."""
    if list(depths) != list(range(depths[0], weights.n_layers)):
        raise PowerlensError(f"edited depths {depths} do not run to the last depth", "report this bug")
    if cache is not None and cache.x_ins is not x_ins:
        raise PowerlensError("the law's cache belongs to other inputs", "report this bug")
    law = _EditedLaw(weights=weights, depths=depths, norm=norm, cache=cache, u=u, z=z)
    cos = {"rank1": [0.0, 0], "actadd": [0.0, 0]}
    changes = []
    for i, (x0, b) in enumerate(zip(x_ins, batches)):
        x, ch = law.run(i, x0, b.mask, b.stat_mask, edit=scale)
        if ch is not None:
            changes.append(ch)
        _add_abs_cos(cos["rank1"], x[b.stat_mask], law.u)
    beta = float(torch.cat(changes).mean()) if changes else 0.0
    for i, (x0, b) in enumerate(zip(x_ins, batches)):  # the baseline, at the edit's mean norm of change
        x, _ = law.run(i, x0, b.mask, b.stat_mask, add=beta * law.u if beta else None)
        _add_abs_cos(cos["actadd"], x[b.stat_mask], law.u)
    return {"cos_rank1": cos["rank1"][0] / max(cos["rank1"][1], 1),
            "cos_actadd": cos["actadd"][0] / max(cos["actadd"][1], 1), "change_norm": beta, "beta": beta}


def _add_abs_cos(acc: list, x: torch.Tensor, u: torch.Tensor) -> None:
    """Add the |cos(x, u)| of counted tokens x (n, d) to a [sum, count] pair."""
    a = (x @ u).abs() / x.norm(dim=-1).clamp_min(1e-30)
    acc[0] += float(a.sum())
    acc[1] += int(a.numel())


class _EditedLaw:
    """The law through the edited depths, float64: the attention term of each step (the first edited depth's
    from the cache), then the edit alpha (z^T h) u or the baseline's addition, then the law's normalisation."""

    def __init__(self, *, weights, depths: list[int], norm: str, cache: LawCache | None, u: np.ndarray, z: np.ndarray):
        self.weights, self.depths, self.norm, self.cache = weights, depths, norm, cache
        self.layers = {k: weights.layers[k].to(torch.float64).exact() for k in {weights.layer_map[t] for t in depths}}
        self.u = torch.as_tensor(u, dtype=torch.float64)
        self.z = torch.as_tensor(z, dtype=torch.float64)

    def attend(self, x, lw, mask, i, t):
        """(attn(x) (B, T, d), concat_h(A^h V^h) (B, T, H dh)); the first edited depth's once per batch."""
        if self.cache is not None and t == self.depths[0]:
            if i not in self.cache.first:
                self.cache.first[i] = self.attend(x, lw, mask, i, None)
            return self.cache.first[i]
        ctx: list = []
        a = law_attention(x, lw, self.weights.n_heads, self.weights.causal, mask, context=ctx)  # (B, T, d)
        return a, ctx[0]

    def step(self, x, lw, mask, i, t, edit=0.0, add=None):
        a, ctx = self.attend(x, lw, mask, i, t)
        change = None
        if edit:  # O' = O + alpha u z^T adds alpha (z^T h) u to the output, h = concat_h(A^h V^h)
            hz = edit * (ctx @ self.z)  # (B, T): alpha z^T h, the attention computed once
            a = a + hz[..., None] * self.u
            change = hz.abs()  # (B, T): alpha |z^T h| (u is a unit vector)
        if add is not None:
            a = a + add
        return law_norm(x + a, lw, self.norm), change  # the law step's normalisation (attention_only_step)

    def run(self, i, x, mask, stat, edit=0.0, add=None):
        """Batch i through the edited depths; the edit's |change| at the last depth's counted tokens."""
        plain = not edit and add is None
        if plain and self.cache is not None and i in self.cache.plain:
            return self.cache.plain[i], None
        change = None
        for t in self.depths:
            x, c = self.step(x, self.layers[self.weights.layer_map[t]], mask, i, t, edit, add)
            if c is not None:
                change = c[stat]
        if plain and self.cache is not None:
            self.cache.plain[i] = x
        return x, change

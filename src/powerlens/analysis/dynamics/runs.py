"""The two modes' runs over the corpus' batches: the real forward pass (hooks) and the attention-only law
(shared-weight models iterated past their depth), with the Monte Carlo null's subspaces."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from powerlens.analysis.dynamics.accumulate import Accumulator, layer_io
from powerlens.analysis.dynamics.directions import LayerDirections, _dim
from powerlens.analysis.dynamics.probes import States, stream_rng
from powerlens.analysis.nulls import random_subspaces
from powerlens.core.progress import progress as _progress
from powerlens.models.attention import attention_only_step
from powerlens.models.hooks import site_io


class Collected(dict):
    """What a run accumulated: its arrays (the .npz) as a dict, and the counted tokens' ``states`` of the
    model's depths (None for the bias-free control) that the Monte Carlo tests are taken on."""

    def __init__(self, arrays: dict[str, np.ndarray], states: States | None):
        super().__init__(arrays)
        self.states = states


def null_sets(d: int, dirs: list[LayerDirections], R: int, seed: int, device) -> dict[int, torch.Tensor]:
    """The Accumulator's Monte Carlo null (the bias-free control's lead and the consensus subspace at a long
    run's final step): R random subspaces for every dimension these have, the first R draws of each
    :class:`~powerlens.analysis.dynamics.probes.Stream` of the main seed."""
    dims = {_dim(getattr(x, n)) for x in dirs for n in ("lead", "span_M") if getattr(x, n) is not None}
    return {r: torch.as_tensor(random_subspaces(d, r, R, stream_rng(seed, r)),
                               dtype=torch.float64, device=device) for r in sorted(dims)}


@torch.no_grad()
def run_model_mode(model, adapter, dirs, batches, n_prompts: int, nulls, device="cpu",
                   progress=True) -> dict[str, np.ndarray]:
    """The real forward pass; alignments read by hooks on every layer."""
    modules = adapter.layer_modules(model)
    L = len(modules)
    lmap = adapter.depth_to_unique(model.config)
    acc = Accumulator(dirs=dirs, layer_of=lambda t: lmap[t], stat_depths=L, final_depth=L - 1, n_prompts=n_prompts,
                      nulls=nulls, device=device, keep_states=True)
    mids: dict[int, torch.Tensor] = {}  # depth -> the residual stream after its attention sublayer (this batch)
    for b in _progress(batches, "model mode (batches)", enabled=progress):
        stat, rows = b.stat_mask.to(device), b.prompt_index.to(device)
        acc.new_batch()
        with site_io(adapter.sites(model), lambda t, x, y: mids.__setitem__(t, adapter.after_attention(x, y))), \
                layer_io(modules, lambda t, xi, xo: acc(t, xi, xo, stat, rows, mid=mids.pop(t))) as count:
            model(input_ids=b.ids.to(device), attention_mask=b.mask.to(device))
        if count[0] != L or mids:
            raise RuntimeError(f"the forward pass applied {count[0]} layers for {L} (sublayer sites left: {len(mids)})")
        acc.traj_row = None
    return Collected(acc.arrays(), states=acc.states())


def bias_free(lw):
    """The same layer with its attention biases removed (b_Q = b_K = b_V = b_O = 0): the control run."""
    return dataclasses.replace(lw, **{k: torch.zeros_like(getattr(lw, k)) for k in ("b_Q", "b_K", "b_V", "b_O")})


def l2_law_diagnostics(x, pattern, lw, stat) -> tuple[float, int, float, int, float]:
    """Attention entropy relative to log(visible keys), summed over heads and counted tokens (queries with
    one visible key excluded); ||F x_mean|| summed over prompts (x_mean: a prompt's mean counted token);
    ||b_eff|| = ||W_O b_V + b_O||. Float64."""
    A, allowed = pattern  # (B, H, T, T), (B or 1, 1, T, T)
    A = A.double()
    n_vis = allowed.sum(-1).double()  # (B or 1, 1, T)
    ent = -(A * torch.log(A.clamp_min(1e-300))).sum(-1)  # (B, H, T)
    ok = (n_vis > 1) & stat[:, None, :]  # (B, 1, T)
    rel = torch.where(ok, ent / torch.log(n_vis.clamp_min(2)), torch.zeros_like(ent))
    cnt = stat.sum(-1)  # (B,)
    xs = x.double() * stat[..., None]
    xm = xs.sum(1)[cnt > 0] / cnt[cnt > 0, None]  # (P, d)
    fx = (xm @ lw.v_per_head().double().T) @ lw.W_O.double().T  # (P, d): F x_mean
    return (float(rel.sum()), int(ok.expand_as(rel).sum()), float(fx.norm(dim=-1).sum()), int(xm.shape[0]),
            float(lw.b_eff.norm()))


def long_run_subset(n_prompts: int, k: int, seed: int) -> list[int]:
    """The prompts that continue past the model's depth in a long shared-weight run: a seeded sample of
    ``k`` of the corpus's ``n_prompts`` (all of them when k >= n_prompts), in corpus order."""
    if k >= n_prompts:
        return list(range(n_prompts))
    rng = np.random.default_rng([seed, 11])
    return sorted(int(i) for i in rng.choice(n_prompts, size=k, replace=False))


def _regroup(carried: list[tuple], size: int) -> list[tuple]:
    """Rows (x (T, d), mask (T,), stat (T,), prompt) carried past the model's depth, in their order, as
    right-padded batches of at most ``size`` rows (padded to each batch's longest row)."""
    out = []
    for s in range(0, len(carried), size):
        part = carried[s:s + size]
        n = [int(m.sum()) for _, m, _, _ in part]
        T, d = max(n), part[0][0].shape[-1]
        x = part[0][0].new_zeros((len(part), T, d))  # (B, T, d)
        mask = part[0][1].new_zeros((len(part), T))
        stat = part[0][2].new_zeros((len(part), T))
        for j, (xr, mr, sr, _) in enumerate(part):
            x[j, :n[j]], mask[j, :n[j]], stat[j, :n[j]] = xr[:n[j]], mr[:n[j]], sr[:n[j]]
        out.append((x, mask, stat, torch.stack([p for *_, p in part])))
    return out


@torch.no_grad()
def run_attention_only(embed, weights, dirs, batches, steps: int, n_prompts: int, nulls, norm: str = "l2",
                       device="cpu", dtype=torch.float64, progress=True,
                       control: bool = False, long_run_prompts: list[int] | None = None) -> dict[str, np.ndarray]:
    """The attention-only law for ``steps`` steps (layer t mod L at step t).

    ``embed(ids)`` gives x(0) of a batch; or ``embed`` is a list with one precomputed x(0) per batch (so the
    caller can free the model before the attention weights are loaded). ``control``: run the bias-free law
    instead (attention biases removed), over the model's depth only. ``long_run_prompts``: when ``steps``
    goes past the model's depth, only these prompts (corpus indices, :func:`long_run_subset`) continue past
    it, regrouped into batches; every depth of the model itself uses every prompt. The trajectory kept for
    the rotation figure is then the first such prompt's (else the first batch's first row)."""
    L = weights.n_layers
    depth = min(L, steps)
    acc = Accumulator(dirs=dirs, layer_of=lambda t: weights.layer_map[t % L], stat_depths=depth, final_depth=steps - 1,
                      n_prompts=n_prompts, nulls=nulls, device=device, keep_tokens=not control,
                      leads=("lead",) if control else (), keep_states=not control)
    # scores in the dynamics' own dtype (GPT-Neo's float32 scores are a detail of its module, mirrored only
    # by the extraction proof)
    layers = [lw.to(dtype, device).exact() for lw in weights.layers]
    if control:
        layers = [bias_free(lw) for lw in layers]
    if not callable(embed):
        assert len(embed) == len(batches), (len(embed), len(batches))
    subset = set(long_run_prompts) if long_run_prompts is not None and steps > depth else None
    traj_prompt = int(batches[0].prompt_index[0]) if batches else -1
    if subset:
        traj_prompt = next(int(p) for b in batches for p in b.prompt_index if int(p) in subset)
    carried = []  # rows of the subset's prompts at the model's depth, to go on past it
    desc = "attention-only, bias-free control (batches)" if control else "attention-only (batches)"

    def run_steps(x, mask, stat, rows, t0, t1):
        for t in range(t0, t1):
            lw = layers[weights.layer_map[t % L]]
            pat = [] if t < depth else None
            y = attention_only_step(x, lw, weights.n_heads, weights.causal, mask, norm, pat)
            acc(t, x, y, stat, rows)
            if pat is not None:
                acc.diagnostics(t, *l2_law_diagnostics(x, pat, lw, stat))
            x = y
        return x

    for i, b in enumerate(_progress(batches, desc, enabled=progress)):
        ids, mask, stat, rows = b.ids.to(device), b.mask.to(device), b.stat_mask.to(device), b.prompt_index.to(device)
        x = (embed(ids) if callable(embed) else embed[i].to(device)).to(dtype)  # (B, T, d)
        acc.new_batch()
        prompts = [int(p) for p in b.prompt_index]
        acc.traj_row = prompts.index(traj_prompt) if traj_prompt in prompts else None
        x = run_steps(x, mask, stat, rows, 0, depth if subset is not None else steps)
        if subset is not None:
            carried += [(x[j], mask[j], stat[j], rows[j]) for j, p in enumerate(prompts) if p in subset]
    if subset is not None:
        for x, mask, stat, rows in _progress(_regroup(carried, max(len(b.ids) for b in batches)),
                                             f"attention-only past depth {depth}, {len(subset)} prompts (batches)",
                                             enabled=progress):
            acc.new_batch()
            prompts = [int(p) for p in rows]
            acc.traj_row = prompts.index(traj_prompt) if traj_prompt in prompts else None
            run_steps(x, mask, stat, rows, depth, steps)
    return Collected(acc.arrays(), states=None if control else acc.states())


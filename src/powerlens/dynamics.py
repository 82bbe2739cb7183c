"""Token dynamics over a prompt corpus, in two modes (paper.md section 5).

``model``           the real pretrained forward pass (FFN and LayerNorm included); forward hooks read the
                    input x(t) and output x(t+1) of every layer.
``attention-only``  the paper's law, FFN removed:
                    x_i(t+1) = N( x_i(t) + sum_h W_O^h sum_j A^h_ij(t) (W_V^h x_j(t) + b_V^h) + b_O ),
                    A from the layer's own W_Q, W_K (causal masks for GPT models, GPT-Neo's unscaled
                    scores and local windows); N = L2 normalisation (default) or the layer's own norm
                    (LayerNorm or RMSNorm, :func:`~powerlens.attention.law_norm`).
                    x(0) is the model's embedding output (ALBERT: after its embedding projection).
                    Shared-weight models iterate their one layer for ``steps`` steps.

For every depth t the tokens' alignment with layer t's leading direction D_t (paper.md section 4) is
measured before and after the layer: a_i(t) = align(x_i(t), D_t), a_i(t+1) = align(x_i(t+1), D_t), in
float64 whatever the dynamics dtype. From them, per depth: gamma_t = mean a_i(t+1), rho_t = share of tokens
whose alignment increases, and the tilt = mean (a_i(t+1) - a_i(t)). Directions measured on the same tokens:

* ``lead``    F_t's leading eigenvector (or the plane of a complex leading pair): the paper's direction;
* ``lead_M``  the leading direction of M_t = I + F_t (the matrix one residual step iterates);
* ``lead_Ft`` pre-norm models: the leading direction of the norm-folded F~_t = F_t diag(g);
* ``null_eig`` a seeded random non-leading eigen-direction of F_t of the lead's dimension (a second null);
* the Monte Carlo null (:mod:`powerlens.nulls`): R random subspaces of each lead's dimension, drawn once per
  model; every statistic of every lead is tested against the same statistic of the R draws.

Only per-token alignments of the model's own depth and per-depth sums are kept, never the d-dimensional
states (except a few trajectories for the rotation figure), so memory stays flat whatever the model size.
Long shared-weight runs (``steps`` past the model's depth) keep per-depth sums for the lead only, plus the
null of the consensus subspace at the final step (claim C5).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .adapters import Site, site_io
from .alignment import align, eig_direction, orthonormal_basis, plane_angle
from .attention import attention_output, law_norm, visible_keys
from .nulls import random_subspaces, subspace_alignments
from .progress import progress as _progress
from .spectra import leading_type

if TYPE_CHECKING:
    import pandas as pd

NAMED = ("lead", "lead_M", "lead_Ft", "null_eig")  # directions measured per token
LEADS = ("lead", "lead_M", "lead_Ft")  # directions tested against the Monte Carlo null


@dataclass
class LayerDirections:
    """Per unique layer: orthonormal bases (d, r) of the directions the statistics use (None: not defined)."""

    lead: np.ndarray  # leading eigenvector of F (r = 1) or plane of a complex leading pair (r = 2)
    lead_M: np.ndarray  # leading direction of M = I + F
    lead_Ft: np.ndarray | None  # leading direction of F~ = F diag(g) (pre-norm models)
    null_eig: np.ndarray | None  # random non-leading eigen-direction of the lead's dimension
    null_eig_index: int
    span12: np.ndarray  # span of the real and imaginary parts of v_1 and v_2 (of F)
    span_M: np.ndarray  # consensus subspace of M: its leading plane, or span(v_1, v_2) of M (claim C5)
    plane2: np.ndarray  # (d, 2): plane the rotation is measured in (see layer_directions)
    lam1: complex
    mu1: complex  # leading eigenvalue of I + F (the matrix one residual step iterates)
    folded_lam1: complex | None = None


def layer_directions(z: dict, seed: int = 0) -> list[LayerDirections]:
    """Directions of every unique layer from a spectra .npz (arrays as written by steps.spectra)."""
    out = []
    for u in range(z["eigvals"].shape[0]):
        ev, V = z["eigvals"][u], z["vecs"][u]
        lead = eig_direction(V[:, 0])
        r = lead.shape[1]
        j = int(z["null_eig_index"][u])
        null_eig = eig_direction(z["null_eig_vec"][u]) if j >= 0 else None
        span12 = orthonormal_basis(np.stack([V[:, 0].real, V[:, 0].imag, V[:, 1].real, V[:, 1].imag], 1))
        rvec = z["residual_vec"][u]
        lead_M = eig_direction(rvec)
        if lead_M.shape[1] == 2:
            span_M = lead_M
        else:
            r2 = z["residual_vec2"][u]
            span_M = orthonormal_basis(np.stack([rvec.real, r2.real, r2.imag], 1))
        if lead_M.shape[1] == 2:
            # one residual step iterates I + F: tokens rotate in the plane of its leading pair
            plane2 = lead_M
        elif r == 2:
            plane2 = lead
        else:
            plane2 = orthonormal_basis(np.stack([V[:, 0].real, V[:, 1].real], 1))
            if plane2.shape[1] < 2:
                plane2 = orthonormal_basis(np.stack([V[:, 0].real, V[:, 1].imag], 1))
            plane2 = plane2 * np.sign(plane2[:, :1].T @ V[:, :1].real)  # first axis along v_1
        ridx = int(z["residual_index"][u])
        fe = z["folded_eigvals"][u] if z["folded_eigvals"].shape[1] else None
        lead_Ft = eig_direction(z["folded_vec"][u]) if fe is not None else None
        out.append(LayerDirections(lead, lead_M, lead_Ft, null_eig, j, span12, span_M, plane2, complex(ev[0]),
                                   complex(1 + ev[ridx]), complex(fe[0]) if fe is not None else None))
    return out


def layer_io(modules: list[torch.nn.Module], callback):
    """Call ``callback(t, x_in, x_out)`` for every layer application, in depth order."""
    return site_io([Site(m, m) for m in modules], callback)


def _dim(D) -> int:
    return 0 if D is None else int(D.shape[1])


class Accumulator:
    """Per-depth sums (float64) of every statistic, per-token alignments of the model's own depth, the Monte
    Carlo null's per-draw sums, per-prompt counts, and a few trajectories.

    ``stat_depths``: the depths with per-token arrays and the Monte Carlo null (the model's own depth);
    ``final_depth``: the last depth of the run, where the consensus subspace is tested against its null."""

    def __init__(self, dirs: list[LayerDirections], layer_of, stat_depths: int, final_depth: int, n_prompts: int,
                 nulls: dict[int, torch.Tensor], device, n_traj: int = 12, keep_tokens: bool = True,
                 leads: tuple = LEADS):
        self.dirs = dirs
        self.layer_of = layer_of  # depth -> unique layer
        f64 = dict(dtype=torch.float64, device=device)
        self.T = {name: [None if getattr(d, name) is None else torch.as_tensor(getattr(d, name), **f64)
                         for d in dirs] for name in NAMED + ("span12", "span_M", "plane2")}
        self.nulls = nulls  # r -> (d, R * r) float64
        self.stat_depths, self.final_depth, self.n_prompts = stat_depths, final_depth, n_prompts
        self.keep_tokens = keep_tokens
        self.leads = leads  # the leads tested against the Monte Carlo null
        self.tok: dict[tuple, list] = {}  # (name, in/out, t) -> per-token float32 alignments
        # quantity -> (float64 sums, seen) over depths 0..final_depth: preallocated arrays, so a long run's
        # memory grows by what its output keeps (a few floats per step), not by a dict entry per value
        self.sums: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.mc: dict[tuple, np.ndarray] = {}  # (name, quantity, t) -> (R,) per-draw sums
        self.prompt: dict[tuple, np.ndarray] = {}  # (quantity, t) -> (n_prompts,) per-prompt sums
        self.n_traj = n_traj
        self.traj: dict[int, np.ndarray] = {}
        self.traj_row: int | None = 0  # row of the current batch whose trajectory is kept (None: no row)
        self._cache: tuple | None = None  # (x_out of the previous call, {r: null alignments}) for reuse

    def _slot(self, q: str) -> tuple[np.ndarray, np.ndarray]:
        if q not in self.sums:
            n = self.final_depth + 1
            self.sums[q] = (np.zeros(n, dtype=np.float64), np.zeros(n, dtype=bool))
        return self.sums[q]

    def _add(self, key, value):
        (q, t) = key
        v, seen = self._slot(q)
        v[t] = v[t] + float(value)  # from 0.0, as a running float64 sum
        seen[t] = True

    def _set(self, key, value):
        (q, t) = key
        v, seen = self._slot(q)
        v[t], seen[t] = float(value), True

    def _add_arr(self, store, key, value: torch.Tensor):
        v = value.detach().cpu().numpy().astype(np.float64)
        store[key] = store[key] + v if key in store else v

    def new_batch(self):
        self._cache = None

    def _null_align(self, x_full, x, r, reuse):
        if reuse is not None and r in reuse:
            return reuse[r]
        return subspace_alignments(x, self.nulls[r], r)

    def __call__(self, t: int, x_in: torch.Tensor, x_out: torch.Tensor, stat: torch.Tensor,
                 prompt_of_row: torch.Tensor) -> None:
        u = self.layer_of(t)
        xi = x_in[stat].to(torch.float64)  # (n, d): statistics in float64 whatever the dynamics dtype
        xo = x_out[stat].to(torch.float64)
        n = xi.shape[0]
        rows = prompt_of_row if prompt_of_row.dim() == 2 else prompt_of_row[:, None].expand_as(stat)
        pid = rows[stat].to(xi.device)  # (n,) prompt of each token
        self._add(("n", t), n)
        in_depth = t < self.stat_depths  # past the model's depth (long runs): the lead only
        for name in NAMED if in_depth else ("lead",):
            D = self.T[name][u]
            if D is None:
                continue
            a0, a1 = align(xi, D), align(xo, D)  # (n,) float64
            inc, dec = a1 > a0, a1 < a0
            self._add((f"{name}:out", t), a1.sum())
            self._add((f"{name}:tilt", t), (a1 - a0).sum())
            self._add((f"{name}:inc", t), inc.sum())
            self._add((f"{name}:dec", t), dec.sum())
            if name == "lead" and in_depth:
                P = self.n_prompts
                for q, v in (("inc", inc.double()), ("dec", dec.double()), ("tilt", a1 - a0),
                             ("n", torch.ones_like(a1))):
                    self._add_arr(self.prompt, (q, t), torch.zeros(P, dtype=torch.float64, device=xi.device)
                                  .index_add_(0, pid, v))
            if self.keep_tokens and t < self.stat_depths:
                self.tok.setdefault((name, "in", t), []).append(a0.float().cpu())
                self.tok.setdefault((name, "out", t), []).append(a1.float().cpu())
        for name in ("span12", "span_M"):
            self._add((f"{name}:out", t), align(xo, self.T[name][u]).sum())
        # pairwise cosines among the tokens of each prompt (signed and absolute)
        xn = x_out.to(torch.float64)
        xn = xn / xn.norm(dim=-1, keepdim=True).clamp_min(1e-300) * stat[..., None]
        G = xn @ xn.transpose(-1, -2)  # (B, T, T)
        cnt = stat.sum(-1).double()
        self._add(("pair_sum", t), (G.sum((-1, -2)) - cnt).sum())
        self._add(("pair_abs_sum", t), (G.abs().sum((-1, -2)) - cnt).sum())
        self._add(("pair_n", t), (cnt * (cnt - 1)).sum())
        P2 = self.T["plane2"][u]
        dth = torch.remainder(plane_angle(xo, P2) - plane_angle(xi, P2) + math.pi, 2 * math.pi) - math.pi
        self._add(("dtheta", t), dth.sum())
        # Monte Carlo null: the same statistics for R random subspaces of each lead's dimension
        mc_here = t < self.stat_depths
        need = {_dim(self.T[name][u]) for name in self.leads if self.T[name][u] is not None} if mc_here else set()
        first = self.T["lead"][self.layer_of(0)]
        if t == self.stat_depths - 1:
            need.add(_dim(first))  # no accumulation (C6): last output against the first layer's lead
        if t == self.final_depth:
            need.add(_dim(self.T["span_M"][u]))  # consensus subspace (C5)
        reuse = None
        if self._cache is not None and self._cache[0] is x_in:
            reuse = self._cache[1]
        A_out = {}
        for r in sorted(need):
            N1 = self._null_align(x_out, xo, r, None)  # (n, R)
            A_out[r] = N1
            self._add_arr(self.mc, ("out", r, t), N1.sum(0))
            if mc_here:
                N0 = self._null_align(x_in, xi, r, reuse)
                self._add_arr(self.mc, ("tilt", r, t), (N1 - N0).sum(0))
                self._add_arr(self.mc, ("inc", r, t), (N1 > N0).sum(0))
                self._add_arr(self.mc, ("dec", r, t), (N1 < N0).sum(0))
        self._cache = (x_out, A_out)
        if t == self.stat_depths - 1:
            self._add(("first_lead:out", t), align(xo, first).sum())
        if self.traj_row is not None:
            r = self.traj_row
            row = stat[r]
            for key, x in ((t, x_in[r][row]), (t + 1, x_out[r][row])):
                if key not in self.traj:
                    x = x[: self.n_traj].to(torch.float64)
                    xn1 = x / x.norm(dim=-1, keepdim=True)
                    self.traj[key] = (xn1 @ P2).cpu().numpy()

    def diagnostics(self, t: int, ent_sum: float, ent_n: int, fx_sum: float, fx_n: int, b_eff: float):
        """Attention-only L2-law diagnostics of one batch: attention entropy and the bias's weight."""
        self._add(("ent_sum", t), ent_sum)
        self._add(("ent_n", t), ent_n)
        self._add(("fx_sum", t), fx_sum)
        self._add(("fx_n", t), fx_n)
        self._set(("b_eff", t), b_eff)

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything the statistics need, as arrays (the .npz): per-depth sums, per-draw null sums of the
        model's depth, per-prompt sums, per-token alignments of the model's depth, trajectories."""
        any_seen = np.zeros(self.final_depth + 1, dtype=bool)
        for _, seen in self.sums.values():
            any_seen |= seen
        depths = [int(t) for t in np.flatnonzero(any_seen)]
        L = len(depths)
        out = {"depth": np.array(depths), "unique_layer": np.array([self.layer_of(t) for t in depths])}
        for q in sorted(self.sums):
            v, seen = self.sums[q]
            out["sum_" + q.replace(":", "_")] = np.where(seen, v, np.nan)[depths]
        S = min(self.stat_depths, L)
        for name in NAMED:
            if (name, "in", 0) in self.tok:
                out[f"a_in_{name}"] = np.stack([torch.cat(self.tok[(name, "in", t)]).numpy() for t in range(S)])
                out[f"a_out_{name}"] = np.stack([torch.cat(self.tok[(name, "out", t)]).numpy() for t in range(S)])
        for q in ("inc", "dec", "tilt", "n"):
            out[f"prompt_{q}"] = np.stack([self.prompt[(q, t)] for t in range(S)])  # (S, n_prompts)
        # per-draw null sums for each lead's dimension at each stat depth: (S, R) per (quantity, lead)
        for name in self.leads:
            dims = [_dim(self.T[name][self.layer_of(t)]) for t in range(S)]
            if not any(dims):
                continue
            for q in ("out", "tilt", "inc", "dec"):
                out[f"null_{q}_{name}"] = np.stack([self.mc[(q, r, t)] if r else np.full(self._R(), np.nan)
                                                    for t, r in zip(range(S), dims)])
        rf = _dim(self.T["lead"][self.layer_of(0)])
        out["null_out_first_lead"] = self.mc[("out", rf, S - 1)]
        fu = self.layer_of(self.final_depth)
        out["null_out_span_M_final"] = self.mc[("out", _dim(self.T["span_M"][fu]), self.final_depth)]
        out["trajectory"] = np.stack([self.traj[t] for t in range(L + 1)])  # (L+1, n_traj, 2)
        return out

    def _R(self) -> int:
        r, U = next(iter(self.nulls.items()))
        return U.shape[1] // r


def null_sets(d: int, dirs: list[LayerDirections], R: int, seed: int, device) -> dict[int, torch.Tensor]:
    """The Monte Carlo null: R random subspaces for every dimension the leads and consensus subspaces have."""
    dims = {_dim(getattr(x, n)) for x in dirs for n in LEADS + ("span_M",) if getattr(x, n) is not None}
    return {r: torch.as_tensor(random_subspaces(d, r, R, np.random.default_rng([seed, 9, r])),
                               dtype=torch.float64, device=device) for r in sorted(dims)}


@torch.no_grad()
def run_model_mode(model, adapter, dirs, batches, n_prompts: int, nulls, device="cpu",
                   progress=True) -> dict[str, np.ndarray]:
    """The real forward pass; alignments read by hooks on every layer."""
    modules = adapter.layer_modules(model)
    L = len(modules)
    lmap = adapter.depth_to_unique(model.config)
    acc = Accumulator(dirs, lambda t: lmap[t], L, L - 1, n_prompts, nulls, device)
    for b in _progress(batches, "model mode (batches)", enabled=progress):
        stat, rows = b.stat_mask.to(device), b.prompt_index.to(device)
        acc.new_batch()
        with layer_io(modules, lambda t, xi, xo: acc(t, xi, xo, stat, rows)) as count:
            model(input_ids=b.ids.to(device), attention_mask=b.mask.to(device))
        assert count[0] == L, (count[0], L)
        acc.traj_row = None
    return acc.arrays()


@torch.no_grad()
def attention_only_step(x, lw, n_heads, causal, pad_mask, norm: str, pattern: list | None = None):
    """One step of the paper's law: x <- N(x + attn(x)); x (B, T, d)."""
    allowed = visible_keys(x.shape[1], causal, lw.window, pad_mask, device=x.device)
    y = x + attention_output(x, lw, n_heads, allowed, pattern)  # (B, T, d)
    if pattern is not None:
        pattern.append(allowed)
    return law_norm(y, lw, norm)


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
    acc = Accumulator(dirs, lambda t: weights.layer_map[t % L], depth, steps - 1, n_prompts, nulls, device,
                      keep_tokens=not control, leads=("lead",) if control else LEADS)
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
    return acc.arrays()


def _mc_columns(prefix: str, value: float, null: np.ndarray | None, seed: int, depth: int) -> dict:
    from .nulls import SATURATED_TIES, mc_test, tie_uniform

    if null is None:
        return {prefix: value}
    m = mc_test(value, null, tie_uniform(seed, depth, prefix))
    return {prefix: value, f"{prefix}_null_median": m["null_median"], f"{prefix}_null_q95": m["null_q95"],
            f"{prefix}_pct": m["pct"], f"{prefix}_p": m["p"], f"{prefix}_ties": m["ties"],
            f"{prefix}_saturated": bool(m["ties"] >= SATURATED_TIES)}


def layer_stats(arr: dict[str, np.ndarray], dirs: list[LayerDirections], suffix: str = "",
                seed: int = 0) -> "pd.DataFrame":
    """Per-depth statistics: gamma_t, rho_t and the tilt for every lead (F, M = I + F, F~), each with the Monte
    Carlo null (median, 95th percentile, the lead's percentile, p with seeded randomised tie-breaking, the
    share of draws tied with the lead and "saturated" where it is at least half, Holm across the model's depth);
    the non-leading-eigenvector null; secondary token- and prompt-level tests (named as such, never a
    verdict's basis); consensus and rotation measures; L2-law diagnostics (attention-only)."""
    import pandas as pd
    from scipy.stats import wilcoxon

    from .stats import holm, sign_test

    def col(q, i):
        k = "sum_" + q.replace(":", "_")
        return float(arr[k][i]) if k in arr else float("nan")

    S = arr["prompt_n"].shape[0]
    rows = []
    for i, t in enumerate(arr["depth"]):
        u = int(arr["unique_layer"][i])
        n = col("n", i)
        row = {"layer": int(t), "unique_layer": u, "leading_type": leading_type(dirs[u].lam1),
               "leading_type_M": leading_type(dirs[u].mu1), "null_eig_index": dirs[u].null_eig_index,
               "n_tokens": int(n)}
        for name in NAMED:
            key = "" if name == "lead" else f"_{name.replace('lead_', '')}"
            if name == "null_eig":
                key = "_null_eig"
            inc, dec = col(f"{name}:inc", i), col(f"{name}:dec", i)
            vals = {"gamma": col(f"{name}:out", i) / n, "rho": inc / (inc + dec) if inc + dec else float("nan"),
                    "tilt": col(f"{name}:tilt", i) / n}
            for q, v in vals.items():
                null = None
                if name in LEADS and i < S and f"null_out_{name}" in arr:
                    ninc, ndec = arr[f"null_inc_{name}"][i], arr[f"null_dec_{name}"][i]
                    null = {"gamma": arr[f"null_out_{name}"][i] / n,
                            "rho": np.where(ninc + ndec > 0, ninc / np.maximum(ninc + ndec, 1), np.nan),
                            "tilt": arr[f"null_tilt_{name}"][i] / n}[q]
                    if np.isnan(v):
                        null = None
                row.update(_mc_columns(f"{q}{key}", v, null, seed, int(t)))
            if name == "lead":
                row["rho_p_token_sign"] = sign_test(int(inc), int(inc + dec)) if i < S else float("nan")
                if i < S:
                    pi, pd_, pt, pn = (arr[f"prompt_{q}"][i] for q in ("inc", "dec", "tilt", "n"))
                    ok = (pi + pd_) > 0
                    rp = pi[ok] / (pi[ok] + pd_[ok])
                    above, below = int(np.sum(rp > 0.5)), int(np.sum(rp < 0.5))
                    row["n_prompts"] = int(np.sum(pn > 0))
                    row["rho_p_prompt_sign"] = sign_test(above, above + below)
                    tilt_p = pt[pn > 0] / pn[pn > 0]
                    row["tilt_p_prompt_wilcoxon"] = (float(wilcoxon(tilt_p, alternative="greater").pvalue)
                                                     if np.any(tilt_p != 0) and len(tilt_p) > 1 else float("nan"))
        row["span12_alignment"] = col("span12:out", i) / n
        row["span_M_alignment"] = col("span_M:out", i) / n
        row["span_M_dim"] = int(dirs[u].span_M.shape[1])
        pn_ = col("pair_n", i)
        row["pairwise_cos"] = col("pair_sum", i) / pn_ if pn_ > 0 else float("nan")  # not defined for 1 token
        row["pairwise_abs_cos"] = col("pair_abs_sum", i) / pn_ if pn_ > 0 else float("nan")
        row["mean_dtheta"] = col("dtheta", i) / n
        row["rotation_plane"] = ("I+F leading pair" if leading_type(dirs[u].mu1 - 1) == "complex pair" else
                                 "F leading pair" if row["leading_type"] == "complex pair" else "span(v1, v2)")
        row["arg_lambda1"] = float(np.angle(dirs[u].lam1))
        row["arg_mu1"] = float(np.angle(dirs[u].mu1))
        # rotation per step predicted in the plane mean_dtheta is measured in: the argument of the eigenvalue
        # of I + F that owns the plane (none for span(v1, v2) of a real lead)
        row["predicted_dtheta"] = {"I+F leading pair": row["arg_mu1"],
                                   "F leading pair": float(np.angle(1 + dirs[u].lam1))}.get(row["rotation_plane"], 0.0)
        if "sum_ent_n" in arr and i < len(arr["sum_ent_n"]) and not np.isnan(arr["sum_ent_n"][i]):
            row["attn_entropy_rel"] = col("ent_sum", i) / max(col("ent_n", i), 1)
            row["bias_ratio"] = col("b_eff", i) / max(col("fx_sum", i) / max(col("fx_n", i), 1), 1e-300)
        if i == S - 1:
            v = col("first_lead:out", i) / n
            row.update(_mc_columns("first_lead_gamma", v, arr["null_out_first_lead"] / n, seed, int(t)))
        if i == len(arr["depth"]) - 1:
            row.update(_mc_columns("span_M_final", row["span_M_alignment"], arr["null_out_span_M_final"] / n, seed,
                                   int(t)))
            row["span_M_final_null_q99"] = float(np.quantile(arr["null_out_span_M_final"] / n, 0.99))
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in [c for c in df.columns if c.endswith("_p") and c.split("_")[0] in ("gamma", "rho", "tilt")]:
        stat_rows = df.index < S
        adj = np.full(len(df), np.nan)
        adj[stat_rows] = holm(df.loc[stat_rows, c].to_numpy(dtype=float))
        df[c + "_holm"] = adj
    if suffix:
        df = df.rename(columns={c: c + suffix for c in df.columns if c not in ("layer", "unique_layer")})
    return df

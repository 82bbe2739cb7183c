"""The Accumulator: per-token alignments before and after every depth, per-depth sums, the Monte Carlo
null's statistics, read from hooks (model mode) or from the law's steps (attention-only mode)."""

from __future__ import annotations

import math

import numpy as np
import torch

from powerlens.analysis.alignment import align, plane_angle
from powerlens.analysis.dynamics.directions import NAMED, LayerDirections, _dim
from powerlens.analysis.dynamics.probes import States
from powerlens.analysis.nulls import subspace_alignments
from powerlens.core.errors import PowerlensError
from powerlens.models.hooks import Site, site_io


def layer_io(modules: list[torch.nn.Module], callback):
    """Call ``callback(t, x_in, x_out)`` for every layer application, in depth order."""
    return site_io([Site(m, m) for m in modules], callback)


class Accumulator:
    """Per-depth sums (float64) of every statistic, per-token alignments of the model's own depth, the Monte
    Carlo null's per-draw sums, per-prompt counts, and a few trajectories.

    ``stat_depths``: the depths with per-token arrays and the Monte Carlo null (the model's own depth);
    ``final_depth``: the last depth of the run, where the consensus subspace is tested against its null;
    ``leads``: the directions whose statistics are tested here against the Monte Carlo null (F's own lead is
    tested by :mod:`~powerlens.analysis.dynamics.decided`, on the states kept with ``keep_states``)."""

    def __init__(self, *, dirs: list[LayerDirections], layer_of, stat_depths: int, final_depth: int, n_prompts: int,
                 nulls: dict[int, torch.Tensor], device, n_traj: int = 12, keep_tokens: bool = True,
                 leads: tuple = (), keep_states: bool = False):
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
        # the counted tokens' states of the model's depths (run dtype), per depth a list of per-batch blocks
        self.keep_states = keep_states
        self._x: list[list[torch.Tensor]] = [[] for _ in range(stat_depths + 1)] if keep_states else []
        self._mid: list[list[torch.Tensor]] = [[] for _ in range(stat_depths)] if keep_states else []
        self._prompt: list[torch.Tensor] = []

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

    def _null_align(self, x, r, reuse):
        if reuse is not None and r in reuse:
            return reuse[r]
        return subspace_alignments(x, self.nulls[r], r)

    def __call__(self, t: int, x_in: torch.Tensor, x_out: torch.Tensor, stat: torch.Tensor,
                 prompt_of_row: torch.Tensor, mid: torch.Tensor | None = None) -> None:
        """Add one depth t of one batch: x_in, x_out (B, T, d) the layer's input and output, ``stat`` (B, T) the
        counted tokens, ``prompt_of_row`` each row's (or token's) prompt, ``mid`` (B, T, d) the residual stream
        after the layer's attention sublayer (real forward pass)."""
        u = self.layer_of(t)
        xi = x_in[stat].to(torch.float64)  # (n, d): statistics in float64 whatever the dynamics dtype
        xo = x_out[stat].to(torch.float64)
        for name, x, at in (("input", xi, t), ("output", xo, t)):
            if not bool(torch.isfinite(x).all()):  # every statistic of this depth on would be NaN
                raise PowerlensError(
                    f"depth {at} (layer {u}): the layer's {name} holds NaN or inf in "
                    f"{int((~torch.isfinite(x)).any(-1).sum())} of {x.shape[0]} counted tokens",
                    "the weights or the dtype overflow there: check the checkpoint, or run in float32/float64")
        rows = prompt_of_row if prompt_of_row.dim() == 2 else prompt_of_row[:, None].expand_as(stat)
        if self.keep_states and t < self.stat_depths:
            self._keep(t, x_in, x_out, mid, stat, rows)
        self._add(("n", t), xi.shape[0])
        in_depth = t < self.stat_depths  # past the model's depth (long runs): the lead only
        for name in NAMED if in_depth else ("lead",):
            if self.T[name][u] is not None:
                self._direction(name, t, u, xi, xo, rows[stat].to(xi.device), in_depth)
        self._consensus(t, u, x_out, xi, xo, stat)
        self._monte_carlo(t, u, x_in, x_out, xi, xo)
        if self.traj_row is not None:
            self._trajectory(t, u, x_in, x_out, stat)

    def _keep(self, t: int, x_in, x_out, mid, stat, rows) -> None:
        """Keep the counted tokens' states of depth t (x(0) at t = 0; x(t) must be depth t - 1's output)."""
        if t == 0:
            self._x[0].append(x_in[stat].detach().cpu().clone())
            self._prompt.append(rows[stat].detach().cpu().clone())
        elif not torch.equal(x_in[stat].detach().cpu(), self._x[t][-1]):
            raise RuntimeError(f"depth {t}'s input is not depth {t - 1}'s output: the layers do not chain")
        self._x[t + 1].append(x_out[stat].detach().cpu().clone())
        if mid is not None:
            self._mid[t].append(mid[stat].detach().cpu().clone())

    def states(self) -> States:
        """The kept states (:class:`~powerlens.analysis.dynamics.probes.States`), batches concatenated."""
        x = [torch.cat(b) for b in self._x]
        mid = [torch.cat(b) for b in self._mid] if self._mid and self._mid[0] else None
        return States(x=x, mid=mid, prompt=torch.cat(self._prompt).numpy().astype(np.int64))

    def _direction(self, name: str, t: int, u: int, xi, xo, pid, in_depth: bool) -> None:
        """Alignments with one direction before and after the layer: their sums, per prompt (F's lead) and per
        token (the model's own depths)."""
        a0, a1 = align(xi, self.T[name][u]), align(xo, self.T[name][u])  # (n,) float64
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

    def _consensus(self, t: int, u: int, x_out, xi, xo, stat) -> None:
        """Alignment with the consensus subspaces, pairwise cosines among each prompt's tokens (signed and
        absolute), rotation angle in the layer's plane."""
        for name in ("span12", "span_M"):
            self._add((f"{name}:out", t), align(xo, self.T[name][u]).sum())
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

    def _monte_carlo(self, t: int, u: int, x_in, x_out, xi, xo) -> None:
        """The Monte Carlo null: the same statistics for R random subspaces of each lead's dimension (and, at
        the last own depth and the final step, of the first layer's lead and the consensus subspace)."""
        mc_here = t < self.stat_depths
        need = {_dim(self.T[name][u]) for name in self.leads if self.T[name][u] is not None} if mc_here else set()
        if t == self.final_depth:
            need.add(_dim(self.T["span_M"][u]))  # consensus subspace (C5)
        reuse = self._cache[1] if self._cache is not None and self._cache[0] is x_in else None
        A_out = {}
        for r in sorted(need):
            N1 = self._null_align(xo, r, None)  # (n, R)
            A_out[r] = N1
            self._add_arr(self.mc, ("out", r, t), N1.sum(0))
            if mc_here:
                N0 = self._null_align(xi, r, reuse)
                self._add_arr(self.mc, ("tilt", r, t), (N1 - N0).sum(0))
                self._add_arr(self.mc, ("inc", r, t), (N1 > N0).sum(0))
                self._add_arr(self.mc, ("dec", r, t), (N1 < N0).sum(0))
        self._cache = (x_out, A_out)

    def _trajectory(self, t: int, u: int, x_in, x_out, stat) -> None:
        """The first tokens of the kept row, projected on the layer's plane, before and after the layer."""
        r = self.traj_row
        row = stat[r]
        for key, x in ((t, x_in[r][row]), (t + 1, x_out[r][row])):
            if key not in self.traj:
                x = x[: self.n_traj].to(torch.float64)
                xn1 = x / x.norm(dim=-1, keepdim=True)
                self.traj[key] = (xn1 @ self.T["plane2"][u]).cpu().numpy()

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
        fu = self.layer_of(self.final_depth)
        out["null_out_span_M_final"] = self.mc[("out", _dim(self.T["span_M"][fu]), self.final_depth)]
        out["trajectory"] = np.stack([self.traj[t] for t in range(L + 1)])  # (L+1, n_traj, 2)
        return out

    def _R(self) -> int:
        r, U = next(iter(self.nulls.items()))
        return U.shape[1] // r


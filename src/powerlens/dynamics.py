"""Token dynamics over a prompt corpus, in two modes (paper.md section 5).

``model``           the real pretrained forward pass (FFN and LayerNorm included); forward hooks read the
                    input x(t) and output x(t+1) of every layer.
``attention-only``  the paper's law, FFN removed:
                    x_i(t+1) = N( x_i(t) + sum_h W_O^h sum_j A^h_ij(t) (W_V^h x_j(t) + b_V^h) + b_O ),
                    A from the layer's own W_Q, W_K (causal masks for GPT models, GPT-Neo's unscaled
                    scores and local windows); N = L2 normalisation (default) or the layer's LayerNorm.
                    x(0) is the model's embedding output (ALBERT: after its embedding projection).
                    Shared-weight models iterate their one layer for ``steps`` steps.

For every depth t the tokens' alignment with layer t's leading direction D_t (paper.md section 4) is
measured before and after the layer: a_i(t) = align(x_i(t), D_t), a_i(t+1) = align(x_i(t+1), D_t). Two
null directions are measured on the same tokens: a seeded random subspace of the same dimension, and a
random non-leading eigenvector of F_t. Only per-token alignments are kept, never the d-dimensional states
(except a few trajectories for the rotation figure), so memory stays flat whatever the model size.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from .adapters import Site, site_io
from .alignment import align, eig_direction, mean_pairwise_cosine, orthonormal_basis, plane_angle, random_subspace
from .attention import attention_output, layer_norm, visible_keys
from .spectra import leading_type

DIRS = ("lead", "null_random", "null_eig")


@dataclass
class LayerDirections:
    """Per unique layer: orthonormal bases (d, r) of the directions the statistics use."""

    lead: np.ndarray  # leading eigenvector (r = 1) or plane of a complex leading pair (r = 2)
    null_random: np.ndarray  # seeded random subspace, same r
    null_eig: np.ndarray  # a random non-leading eigenvector (r = 1 or 2)
    null_eig_index: int
    span12: np.ndarray  # span of the real and imaginary parts of v_1 and v_2
    plane2: np.ndarray  # (d, 2): plane the rotation is measured in (see layer_directions)
    lam1: complex
    mu1: complex  # leading eigenvalue of I + F (the matrix one residual step iterates)


def layer_directions(z: dict, seed: int) -> list[LayerDirections]:
    """Directions of every unique layer from a spectra .npz (arrays as written by steps.spectra)."""
    out = []
    for u in range(z["eigvals"].shape[0]):
        ev, V = z["eigvals"][u], z["vecs"][u]
        d, k = V.shape
        rng = np.random.default_rng([seed, u])
        lead = eig_direction(V[:, 0])
        r = lead.shape[1]
        first = 2 if r == 2 else 1
        cand = [j for j in range(first, k)]
        j = int(rng.choice(cand)) if cand else first
        null_eig = eig_direction(V[:, j])
        span12 = orthonormal_basis(np.stack([V[:, 0].real, V[:, 0].imag, V[:, 1].real, V[:, 1].imag], 1))
        rvec = z["residual_vec"][u]
        if eig_direction(rvec).shape[1] == 2:
            # one residual step iterates I + F: tokens rotate in the plane of its leading pair
            plane2 = eig_direction(rvec)
        elif r == 2:
            plane2 = lead
        else:
            plane2 = orthonormal_basis(np.stack([V[:, 0].real, V[:, 1].real], 1))
            if plane2.shape[1] < 2:
                plane2 = orthonormal_basis(np.stack([V[:, 0].real, V[:, 1].imag], 1))
            plane2 = plane2 * np.sign(plane2[:, :1].T @ V[:, :1].real)  # first axis along v_1
        ridx = int(z["residual_index"][u])
        out.append(LayerDirections(lead, random_subspace(d, r, rng), null_eig, j, span12, plane2, complex(ev[0]),
                                   complex(1 + ev[ridx])))
    return out


def layer_io(modules: list[torch.nn.Module], callback):
    """Call ``callback(t, x_in, x_out)`` for every layer application, in depth order."""
    return site_io([Site(m, m) for m in modules], callback)


class Accumulator:
    """Per-depth, per-token alignments (before/after) for each direction, plus per-step extras."""

    def __init__(self, dirs: list[LayerDirections], layer_of, device, dtype, n_traj: int = 12):
        self.dirs = dirs
        self.layer_of = layer_of  # depth -> unique layer
        self.T = {name: [torch.as_tensor(getattr(d, name), dtype=dtype, device=device) for d in dirs]
                  for name in DIRS + ("span12", "plane2")}
        self.a_in: dict[str, dict[int, list]] = {n: {} for n in DIRS}
        self.a_out: dict[str, dict[int, list]] = {n: {} for n in DIRS}
        self.span12: dict[int, list] = {}
        self.pair_sum: dict[int, float] = {}
        self.pair_n: dict[int, int] = {}
        self.dtheta: dict[int, list] = {}
        self.n_traj = n_traj
        self.traj: dict[int, np.ndarray] = {}
        self.first_batch = True

    def __call__(self, t: int, x_in: torch.Tensor, x_out: torch.Tensor, stat: torch.Tensor) -> None:
        u = self.layer_of(t)
        x_in, x_out = x_in.to(self.T["lead"][u].dtype), x_out.to(self.T["lead"][u].dtype)
        sel_in, sel_out = x_in[stat], x_out[stat]  # (n, d)
        for name in DIRS:
            D = self.T[name][u]
            self.a_in[name].setdefault(t, []).append(align(sel_in, D).float().cpu())
            self.a_out[name].setdefault(t, []).append(align(sel_out, D).float().cpu())
        self.span12.setdefault(t, []).append(align(sel_out, self.T["span12"][u]).float().cpu())
        s, n = mean_pairwise_cosine(x_out, stat)
        self.pair_sum[t] = self.pair_sum.get(t, 0.0) + s
        self.pair_n[t] = self.pair_n.get(t, 0) + n
        P = self.T["plane2"][u]
        dth = torch.remainder(plane_angle(sel_out, P) - plane_angle(sel_in, P) + math.pi, 2 * math.pi) - math.pi
        self.dtheta.setdefault(t, []).append(dth.float().cpu())
        if self.first_batch:
            row = stat[0]
            for key, x in ((t, x_in[0][row]), (t + 1, x_out[0][row])):
                if key not in self.traj:
                    xn = x[: self.n_traj] / x[: self.n_traj].norm(dim=-1, keepdim=True)
                    self.traj[key] = (xn @ P).double().cpu().numpy()

    def arrays(self) -> dict[str, np.ndarray]:
        depths = sorted(self.a_in["lead"])
        out = {"depth": np.array(depths), "unique_layer": np.array([self.layer_of(t) for t in depths])}
        for name in DIRS:
            out[f"a_in_{name}"] = np.stack([torch.cat(self.a_in[name][t]).numpy() for t in depths])  # (L, n)
            out[f"a_out_{name}"] = np.stack([torch.cat(self.a_out[name][t]).numpy() for t in depths])
        out["a_out_span12"] = np.stack([torch.cat(self.span12[t]).numpy() for t in depths])
        out["dtheta"] = np.stack([torch.cat(self.dtheta[t]).numpy() for t in depths])
        out["pairwise_cos"] = np.array([self.pair_sum[t] / max(self.pair_n[t], 1) for t in depths])
        out["trajectory"] = np.stack([self.traj[t] for t in range(len(depths) + 1)])  # (L+1, n_traj, 2)
        return out


@torch.no_grad()
def run_model_mode(model, adapter, dirs, batches, device="cpu", progress=True) -> dict[str, np.ndarray]:
    """The real forward pass; alignments read by hooks on every layer."""
    modules = adapter.layer_modules(model)
    L = len(modules)
    lmap = layer_map_of(adapter, model)
    acc = Accumulator(dirs, lambda t: lmap[t], device, torch.float64)
    for b in tqdm(batches, desc="model mode (batches)", disable=not progress, mininterval=5):
        stat = b.stat_mask.to(device)
        with layer_io(modules, lambda t, xi, xo: acc(t, xi, xo, stat)) as count:
            model(input_ids=b.ids.to(device), attention_mask=b.mask.to(device))
        assert count[0] == L, (count[0], L)
        acc.first_batch = False
    return acc.arrays()


def layer_map_of(adapter, model) -> list[int]:
    keys = adapter.layer_map(model.config)
    uniq = list(dict.fromkeys(keys))
    return [uniq.index(k) for k in keys]


@torch.no_grad()
def attention_only_step(x, lw, n_heads, causal, pad_mask, norm: str):
    """One step of the paper's law: x <- N(x + attn(x)); x (B, T, d)."""
    allowed = visible_keys(x.shape[1], causal, lw.window, pad_mask, device=x.device)
    y = x + attention_output(x, lw, n_heads, allowed)  # (B, T, d)
    if norm == "l2":
        return y / y.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    return layer_norm(y, lw.ln_w, lw.ln_b, lw.ln_eps)


@torch.no_grad()
def run_attention_only(embed, weights, dirs, batches, steps: int, norm: str = "l2", device="cpu",
                       dtype=torch.float64, progress=True) -> dict[str, np.ndarray]:
    """The attention-only law for ``steps`` steps (layer t mod L at step t).

    ``embed(ids)`` gives x(0) of a batch; or ``embed`` is a list with one precomputed x(0) per batch (so the
    caller can free the model before the attention weights are loaded).
    """
    L = weights.n_layers
    acc = Accumulator(dirs, lambda t: weights.layer_map[t % L], device, dtype)
    # scores in the dynamics' own dtype (GPT-Neo's float32 scores are a detail of its module, mirrored only
    # by the extraction proof)
    layers = [dataclasses.replace(lw.to(dtype, device), scores_fp32=False) for lw in weights.layers]
    if not callable(embed):
        assert len(embed) == len(batches), (len(embed), len(batches))
    for i, b in enumerate(tqdm(batches, desc="attention-only (batches)", disable=not progress, mininterval=5)):
        ids, mask, stat = b.ids.to(device), b.mask.to(device), b.stat_mask.to(device)
        x = (embed(ids) if callable(embed) else embed[i].to(device)).to(dtype)  # (B, T, d)
        for t in range(steps):
            lw = layers[weights.layer_map[t % L]]
            y = attention_only_step(x, lw, weights.n_heads, weights.causal, mask, norm)
            acc(t, x, y, stat)
            x = y
        acc.first_batch = False
    return acc.arrays()


def layer_stats(arr: dict[str, np.ndarray], dirs: list[LayerDirections]) -> "pd.DataFrame":
    """gamma_t, rho_t, sign-test p (Holm-corrected across layers) for the lead and both null directions."""
    import pandas as pd

    from .stats import holm, sign_test

    rows = []
    for i, t in enumerate(arr["depth"]):
        u = int(arr["unique_layer"][i])
        row = {"layer": int(t), "unique_layer": u, "leading_type": leading_type(dirs[u].lam1),
               "null_eig_index": dirs[u].null_eig_index}
        for name in DIRS:
            a0, a1 = arr[f"a_in_{name}"][i], arr[f"a_out_{name}"][i]
            inc, dec = int(np.sum(a1 > a0)), int(np.sum(a1 < a0))
            key = "" if name == "lead" else f"_{name}"
            row[f"n{key}"] = inc + dec
            row[f"gamma{key}"] = float(np.mean(a1))
            row[f"rho{key}"] = inc / (inc + dec) if inc + dec else float("nan")
            row[f"p{key}"] = sign_test(inc, inc + dec)
        row["span12_alignment"] = float(np.mean(arr["a_out_span12"][i]))
        row["pairwise_cos"] = float(arr["pairwise_cos"][i])
        row["mean_dtheta"] = float(np.mean(arr["dtheta"][i]))
        row["rotation_plane"] = ("I+F leading pair" if leading_type(dirs[u].mu1 - 1) == "complex pair" else
                                 "F leading pair" if row["leading_type"] == "complex pair" else "span(v1, v2)")
        row["arg_lambda1"] = float(np.angle(dirs[u].lam1))
        row["arg_mu1"] = float(np.angle(dirs[u].mu1))
        rows.append(row)
    df = pd.DataFrame(rows)
    for name in DIRS:
        key = "" if name == "lead" else f"_{name}"
        df[f"p_holm{key}"] = holm(df[f"p{key}"].to_numpy())
    return df

"""Spectra of the layer matrices F_t = W_O W_V, in float64 on the CPU.

Ordering and phase conventions (paper.md section 4, and our choices where it is silent):

* eigenvalues sorted by modulus, largest first, ties (conjugate pairs) broken by argument, smallest first
  (so the pair lambda, conj(lambda) is stored as (a - ib, a + ib)); moduli are compared after rounding to
  12 significant digits so round-off never splits a pair;
* eigenvectors have unit norm and a canonical phase: the largest-magnitude component is real and positive;
* leading type: "complex pair" when |Im lambda_1| > 1e-9 |lambda_1|, else "real positive"/"real negative";
  for a complex pair the direction is the plane P = span(Re v_1, Im v_1), stored as an orthonormal basis;
* spectral gap |lambda_1| - |lambda_2| and power-method ratio |lambda_2| / |lambda_1|; a complex pair has
  gap 0 by construction, so the gap to the next eigenvalue outside the pair is reported too;
* residual view M = I + F (the paper's law keeps the residual): its eigenvectors are F's, its leading
  eigenvalue is the lambda maximising |1 + lambda|, which need not be F's leading one;
* per-head spectra from the d_head x d_head product W_V^h W_O^h, whose eigenvalues are the non-zero
  eigenvalues of the d x d head matrix W_O^h W_V^h (AB and BA share their non-zero spectrum);
* solver accuracy: relative residual ||F v - lambda v|| / ||F||_F for every stored eigenpair;
* the gap that matters for the power method is to the first eigenvalue *beyond* the lead's conjugate
  partner: ``ratio_next = |lambda_next| / |lambda_1|`` (the pair convention ``ratio`` is 1 for every complex
  lead by conjugacy, so it says nothing about the rate);
* a second null direction for the dynamics: a seeded random non-leading eigen-direction of the lead's
  dimension (a real eigenvector for a real lead, a pair's plane for a complex lead), drawn from the whole
  spectrum;
* the eigen-direction null of the dynamics (paper.md section 4c, revision 4): *all* other eigen-directions with
  |lambda| > 1e-9 |lambda_1| (:func:`eigen_null_members`);
* pre-norm models (attention reads N(x)): the norm-folded F~ = O V diag(g) (g the norm's gain) is solved
  beside F, as TransformerLens folds norms; F stays the main result.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

COMPLEX_TOL = 1e-9


def sort_order(vals: np.ndarray) -> np.ndarray:
    """Indices sorting eigenvalues by modulus (descending), then argument (ascending)."""
    mod = np.abs(vals)
    scale = mod.max() if mod.size and mod.max() > 0 else 1.0
    key_mod = np.round(mod / scale, 12)
    return np.lexsort((np.angle(vals), -key_mod))


def canonical_phase(v: np.ndarray) -> np.ndarray:
    """Unit vector(s) with the largest-magnitude component real and positive (columns if 2-D)."""
    v = np.asarray(v, dtype=np.complex128)
    if v.ndim == 2:
        return np.stack([canonical_phase(v[:, j]) for j in range(v.shape[1])], axis=1)
    v = v / np.linalg.norm(v)
    i = int(np.argmax(np.round(np.abs(v), 12)))
    return v * (np.conj(v[i]) / abs(v[i]))


def leading_type(lam: complex, tol: float = COMPLEX_TOL) -> str:
    if abs(lam.imag) > tol * max(abs(lam), 1e-300):
        return "complex pair"
    return "real positive" if lam.real >= 0 else "real negative"


def plane_basis(v: np.ndarray) -> np.ndarray:
    """Orthonormal basis (d, 2) of span(Re v, Im v), each column with its largest component positive."""
    Q, _ = np.linalg.qr(np.stack([v.real, v.imag], axis=1))
    for j in range(2):
        i = int(np.argmax(np.round(np.abs(Q[:, j]), 12)))
        Q[:, j] *= np.sign(Q[i, j]) or 1.0
    return Q


@dataclass(repr=False, kw_only=True)
class Spectrum:
    """The spectrum of one layer matrix F (d x d)."""

    eigvals: np.ndarray  # (d,) complex128, sorted
    vecs: np.ndarray  # (d, k) complex128: eigenvectors of eigvals[:k], canonical phase
    plane: np.ndarray  # (d, 2) float64: basis of span(Re v1, Im v1), or (v1, 0) for a real leading pair
    residual_index: int  # index (in eigvals) of the eigenvalue maximising |1 + lambda|
    residual_vec: np.ndarray  # (d,) complex128: its eigenvector
    rel_residual: float  # max over stored eigenpairs of ||F v - lambda v|| / ||F||_F
    head_eigvals: np.ndarray  # (H, d_head) complex128, each row sorted
    # (d,) M = I + F: eigenvector of the next |1 + lambda| beyond the lead's pair
    residual_vec2: np.ndarray | None = None
    null_eig_index: int = -1  # index (in eigvals) of the random non-leading eigenvalue of the lead's type, -1 if none
    null_eig_vec: np.ndarray | None = None  # (d,) complex128: its eigenvector (zeros if none)
    folded_eigvals: np.ndarray | None = None  # (d,) eigenvalues of F~ = F diag(g) (pre-norm models), sorted
    folded_vec: np.ndarray | None = None  # (d,) leading eigenvector of F~
    eig_r1: np.ndarray | None = None  # (d, K1) eigen-direction null members of one column (real lead)
    eig_r2: np.ndarray | None = None  # (d, 2 K2) members of two columns, consecutive pairs

    def __repr__(self) -> str:
        ev = self.eigvals
        lead = ", ".join(f"{v.real:.4g}{v.imag:+.4g}j" if abs(v.imag) > 0 else f"{v.real:.4g}" for v in ev[:3])
        return (f"Spectrum(d={len(ev)}, leading={leading_type(ev[0])}, |lambda_1|={abs(ev[0]):.4g}, "
                f"first eigenvalues=[{lead}, ...], eigenvectors={self.vecs.shape[1]})")

    def summary(self) -> dict:
        ev = self.eigvals
        l1, l2 = ev[0], ev[1]
        typ = leading_type(l1)
        nxt = ev[2] if typ == "complex pair" and len(ev) > 2 else l2
        r = ev[self.residual_index]
        res_sorted = np.sort(np.abs(1 + ev))[::-1]
        fold = {}
        if self.folded_eigvals is not None and len(self.folded_eigvals):
            fe = self.folded_eigvals
            ft = leading_type(fe[0])
            fn = fe[2] if ft == "complex pair" and len(fe) > 2 else fe[1]
            fold = {"folded_leading_type": ft, "folded_abs_lambda1": abs(fe[0]),
                    "folded_ratio_next": abs(fn) / abs(fe[0]) if abs(fe[0]) > 0 else np.nan}
        return {
            "lambda1_re": l1.real, "lambda1_im": l1.imag, "lambda2_re": l2.real, "lambda2_im": l2.imag,
            "abs_lambda1": abs(l1), "abs_lambda2": abs(l2), "gap": abs(l1) - abs(l2),
            "ratio": abs(l2) / abs(l1) if abs(l1) > 0 else np.nan,
            "gap_beyond_pair": abs(l1) - abs(nxt), "abs_lambda_next": abs(nxt),
            "ratio_next": abs(nxt) / abs(l1) if abs(l1) > 0 else np.nan,
            "leading_type": typ, "spectral_radius": abs(l1),
            "rel_residual": self.rel_residual,
            "residual_lambda_re": r.real, "residual_lambda_im": r.imag,
            "residual_leading_type": leading_type(r),
            "residual_same_as_F": bool(self.residual_index == 0
                                       or (typ == "complex pair" and self.residual_index == 1)),
            "residual_ratio": res_sorted[1] / res_sorted[0] if res_sorted[0] > 0 else np.nan,
            "null_eig_index": self.null_eig_index,
            "null_eig_candidates": len(null_eig_candidates(ev)),
            "eig_null_members": (0 if self.eig_r1 is None else self.eig_r1.shape[1])
            + (0 if self.eig_r2 is None else self.eig_r2.shape[1] // 2),
            **fold,
        }


def head_spectra(W_V: np.ndarray, W_O: np.ndarray, n_heads: int) -> np.ndarray:
    """Eigenvalues of W_V^h W_O^h (d_head x d_head) per head: the non-zero spectrum of W_O^h W_V^h.
    ``W_V`` (H d_head, d) has one block of rows per query head (grouped-query layers: repeated per group)."""
    dh = W_V.shape[0] // n_heads
    out = np.empty((n_heads, dh), dtype=np.complex128)
    for h in range(n_heads):
        B = W_V[h * dh:(h + 1) * dh, :] @ W_O[:, h * dh:(h + 1) * dh]  # (dh, dh)
        ev = np.linalg.eigvals(B)
        out[h] = ev[sort_order(ev)]
    return out


def partner_index(vals: np.ndarray, i: int) -> int | None:
    """Index of the conjugate partner of eigenvalue i (sorted as by :func:`sort_order`), None if real."""
    if leading_type(complex(vals[i])) != "complex pair":
        return None
    cands = [j for j in (i - 1, i + 1) if 0 <= j < len(vals) and abs(vals[j] - np.conj(vals[i])) <=
             1e-8 * max(abs(vals[i]), 1e-300)]
    return cands[0] if cands else None


NULL_EIG_REL_FLOOR = 1e-9  # paper.md section 4: the second null draws among |lambda| > 1e-9 |lambda_1|


def null_eig_candidates(vals: np.ndarray) -> list[int]:
    """Indices of the eigenvalues the second null may draw: non-leading, of the lead's type (real for a real
    lead; one per conjugate pair, the one with positive imaginary part, for a complex lead), from the whole
    spectrum, with |lambda| > 1e-9 |lambda_1| (paper.md section 4, revision 3: with grouped-query attention
    most of the spectrum is V's kernel, numerically zero eigenvalues whose directions F never moves)."""
    lead_complex = leading_type(complex(vals[0])) == "complex pair"
    skip = {0, partner_index(vals, 0)}
    floor = NULL_EIG_REL_FLOOR * abs(vals[0])
    return [j for j in range(len(vals)) if j not in skip and abs(vals[j]) > floor
            and (leading_type(complex(vals[j])) == "complex pair") == lead_complex
            and (not lead_complex or vals[j].imag > 0)]


def eigen_null_members(vals: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The eigen-direction null (paper.md section 4c): every eigen-direction of F but the lead (and its
    conjugate partner) with |lambda| > 1e-9 |lambda_1|, as blocks of the lead's kind, so each member's
    alignment ||B^T x|| / ||x|| is measured like the lead's. Our choices where the spec is silent:

    * real lead (one column): a real eigenvector is its unit column; a complex pair (once: Im lambda > 0) is
      the two columns [Re v, Im v] of its unit complex eigenvector v, so its alignment is |v^H x| / ||x|| (the
      complex modulus of the projection; for isotropic x its mean square is 1/d, as for a unit real vector);
    * complex lead (a plane): another pair's plane span(Re v, Im v) (orthonormal), and the real eigenvectors
      paired in order of modulus, each pair's plane (orthonormal; an odd one out is left out).

    Returns (d, K1) one-column members and (d, 2 K2) two-column members (consecutive column pairs)."""
    d = V.shape[0]
    lead_complex = leading_type(complex(vals[0])) == "complex pair"
    skip = {0, partner_index(vals, 0)}
    floor = NULL_EIG_REL_FLOOR * abs(vals[0])
    keep = [j for j in range(len(vals)) if j not in skip and abs(vals[j]) > floor]
    real = [j for j in keep if leading_type(complex(vals[j])) != "complex pair"]
    pairs = [j for j in keep if leading_type(complex(vals[j])) == "complex pair" and vals[j].imag > 0]
    one: list[np.ndarray] = []
    two: list[np.ndarray] = []
    for j in pairs:
        v = canonical_phase(V[:, j])
        two.append(plane_basis(v) if lead_complex else np.stack([v.real, v.imag], axis=1))
    if lead_complex:
        for a, b in zip(real[0::2], real[1::2]):
            two.append(orthonormal_plane(V[:, a].real, V[:, b].real))
    else:
        one = [V[:, j].real / np.linalg.norm(V[:, j].real) for j in real]
    return (np.stack(one, axis=1) if one else np.zeros((d, 0)),
            np.concatenate(two, axis=1) if two else np.zeros((d, 0)))


def orthonormal_plane(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Orthonormal basis (d, 2) of span(a, b)."""
    Q, _ = np.linalg.qr(np.stack([a, b], axis=1))
    return Q


def null_eig_choice(vals: np.ndarray, rng: np.random.Generator) -> int:
    """One of :func:`null_eig_candidates`, drawn uniformly; -1 if there is none."""
    cands = null_eig_candidates(vals)
    return int(rng.choice(cands)) if cands else -1


def layer_spectrum(F: np.ndarray, k: int, W_V: np.ndarray | None = None, W_O: np.ndarray | None = None,
                   n_heads: int | None = None, rng: np.random.Generator | None = None,
                   gain: np.ndarray | None = None, post_gain: np.ndarray | None = None) -> Spectrum:
    """Full float64 eigendecomposition of F; keeps the top-k eigenvectors, the two leading directions of
    M = I + F, a random non-leading eigenvector of the lead's type (``rng``) and, given the pre-norm gain g,
    the spectrum of the norm-folded F~ = diag(p) F diag(g) (``post_gain`` p: Gemma 3's post-attention norm)."""
    F = np.asarray(F, dtype=np.float64)
    vals, V = np.linalg.eig(F)
    order = sort_order(vals)
    vals, V = vals[order], V[:, order]
    k = min(k, len(vals))
    vecs = canonical_phase(V[:, :k])
    mod1 = np.round(np.abs(1 + vals), 12)
    ridx = int(np.argmax(mod1))
    rvec = canonical_phase(V[:, ridx])
    rest = np.argsort(-mod1, kind="stable")
    rest = [j for j in rest if j not in (ridx, partner_index(vals, ridx))]
    rvec2 = canonical_phase(V[:, rest[0]]) if rest else np.zeros(len(vals), np.complex128)
    j = null_eig_choice(vals, rng) if rng is not None else -1
    nvec = canonical_phase(V[:, j]) if j >= 0 else np.zeros(len(vals), np.complex128)
    e1, e2 = eigen_null_members(vals, V)
    fvals = fvec = None
    if gain is not None:
        Ff = F * np.asarray(gain, dtype=np.float64)[None, :]  # F diag(g)
        if post_gain is not None:
            Ff = np.asarray(post_gain, dtype=np.float64)[:, None] * Ff  # diag(p) F diag(g)
        fv, FV = np.linalg.eig(Ff)
        fo = sort_order(fv)
        fvals, fvec = fv[fo], canonical_phase(FV[:, fo[0]])
    fn = np.linalg.norm(F)
    keep = np.concatenate([vecs, rvec[:, None]], axis=1)
    lam = np.concatenate([vals[:k], vals[ridx:ridx + 1]])
    rel = float(np.max(np.linalg.norm(F @ keep - keep * lam, axis=0)) / fn) if fn > 0 else 0.0
    if leading_type(vals[0]) == "complex pair":
        plane = plane_basis(vecs[:, 0])
    else:
        plane = np.stack([vecs[:, 0].real, np.zeros(len(vals))], axis=1)
    heads = head_spectra(W_V, W_O, n_heads) if W_V is not None else np.zeros((0, 0), np.complex128)
    return Spectrum(eigvals=vals, vecs=vecs, plane=plane, residual_index=ridx, residual_vec=rvec, rel_residual=rel,
                    head_eigvals=heads, residual_vec2=rvec2, null_eig_index=j, null_eig_vec=nvec, folded_eigvals=fvals,
                    folded_vec=fvec, eig_r1=e1, eig_r2=e2)


@dataclass(frozen=True)
class LayerMatrices:
    """What the spectra of one unique layer read, as float64 numpy arrays: ``F`` (d, d), ``V`` = W_V with each
    key-value group repeated for its query heads (H d_head, d), ``W_O`` (d, H d_head), and for pre-norm models
    the gains of the norm-folded F~ = diag(post_gain) F diag(gain) (None otherwise)."""

    F: np.ndarray  # (d, d)
    V: np.ndarray  # (H dh, d)
    W_O: np.ndarray  # (d, H dh)
    gain: np.ndarray | None = None  # (d,)
    post_gain: np.ndarray | None = None  # (d,)


def layer_matrices(weights) -> list[LayerMatrices]:
    """The spectra's inputs of a :class:`~powerlens.models.weights.ModelWeights` (torch tensors, as the adapters
    extract them): F computed as the extract step computes the F it stores."""
    prenorm = weights.norm == "pre"
    out = []
    for lw in weights.layers:
        g, p = lw.folded_gains()
        out.append(LayerMatrices(F=lw.F.numpy(), V=lw.v_per_head().double().numpy(), W_O=lw.W_O.double().numpy(),
                                 gain=g.double().numpy() if prenorm else None,
                                 post_gain=p.double().numpy() if prenorm and p is not None else None))
    return out


def read_layer_matrices(st_path, meta: dict) -> list[LayerMatrices]:
    """The spectra's inputs from the extract step's ``weights.safetensors`` (its stored float64 F, the weights
    it holds) and its ``weights.json`` (``meta``), with numpy alone: no torch."""
    from safetensors.numpy import load_file

    t = load_file(str(st_path))
    prenorm = meta["norm"] == "pre"
    out = []
    for u, lm in enumerate(meta["layers"]):
        W_V = t[f"layers.{u}.W_V"]  # (H_kv dh, d)
        g = int(lm.get("groups", 1))
        if g > 1:  # each key-value group's rows repeated for its query heads, as LayerWeights.v_per_head
            W_V = np.repeat(W_V.reshape(-1, int(lm["d_head"]), W_V.shape[1]), g, axis=0).reshape(-1, W_V.shape[1])
        post = t.get(f"layers.{u}.post_w")
        out.append(LayerMatrices(F=np.array(t[f"layers.{u}.F"], dtype=np.float64), V=W_V.astype(np.float64),
            W_O=t[f"layers.{u}.W_O"].astype(np.float64),
            gain=t[f"layers.{u}.ln_w"].astype(np.float64) if prenorm else None,
            post_gain=post.astype(np.float64) if prenorm and post is not None else None))
    return out


def model_spectra(layers: list[LayerMatrices], *, n_heads: int, k: int, threads: int, seed: int) -> list[Spectrum]:
    """Spectra of every unique layer (:func:`layer_matrices` of extracted weights, or
    :func:`read_layer_matrices` of the extract step's file; shared layers once).

    Layers are solved in parallel on up to ``threads`` Python threads (LAPACK releases the GIL), each
    LAPACK call on ``threads // workers`` BLAS threads: many layers use one BLAS thread per layer (the
    result is then independent of the thread count), a single shared layer (ALBERT) gets them all.
    """
    from threadpoolctl import threadpool_limits

    workers = max(1, min(threads, len(layers)))
    blas = max(1, threads // workers)

    def one(u):
        m = layers[u]
        return layer_spectrum(m.F, k, m.V, m.W_O, n_heads, rng=np.random.default_rng([seed, 11, u]), gain=m.gain,
                              post_gain=m.post_gain)

    with threadpool_limits(blas):
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, range(len(layers))))


def spectra_table(specs: list[Spectrum], layer_map: list[int]):
    """The one spectra table, one row per depth: ``layer`` (the depth), ``unique_layer`` (its unique layer, the
    same for every depth of ALBERT) and :meth:`Spectrum.summary`. The spectra step writes it (with the model and
    its weights label), :meth:`powerlens.Lens.spectra` returns it and ``powerlens inspect`` prints its view of it."""
    import pandas as pd

    return pd.DataFrame([{"layer": t, "unique_layer": u, **specs[u].summary()} for t, u in enumerate(layer_map)])


def spectra_arrays(specs: list[Spectrum], layer_map: list[int]) -> dict[str, np.ndarray]:
    """The arrays of a spectra .npz file."""
    return {
        "eigvals": np.stack([s.eigvals for s in specs]),  # (U, d) complex128
        "vecs": np.stack([s.vecs for s in specs]),  # (U, d, k) complex128
        "plane": np.stack([s.plane for s in specs]),  # (U, d, 2) float64
        "residual_index": np.array([s.residual_index for s in specs]),  # (U,)
        "residual_vec": np.stack([s.residual_vec for s in specs]),  # (U, d) complex128
        "head_eigvals": np.stack([s.head_eigvals for s in specs]),  # (U, H, d_head) complex128
        "layer_map": np.array(layer_map),  # (L,) depth -> unique layer
        "residual_vec2": np.stack([s.residual_vec2 for s in specs]),  # (U, d) complex128
        "null_eig_index": np.array([s.null_eig_index for s in specs]),  # (U,)
        "null_eig_vec": np.stack([s.null_eig_vec for s in specs]),  # (U, d) complex128
        "folded_eigvals": (np.stack([s.folded_eigvals for s in specs]) if specs[0].folded_eigvals is not None
                           else np.zeros((len(specs), 0), np.complex128)),  # (U, d) or (U, 0)
        **_padded("eig_null_r1", [s.eig_r1 for s in specs]),  # (U, d, K1 max), counts (U,)
        **_padded("eig_null_r2", [s.eig_r2 for s in specs]),  # (U, d, 2 K2 max), column counts (U,)
        "folded_vec": (np.stack([s.folded_vec for s in specs]) if specs[0].folded_vec is not None
                       else np.zeros((len(specs), 0), np.complex128)),  # (U, d) or (U, 0)
    }


def _padded(name: str, blocks: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-layer column blocks of different widths as one zero-padded array and each layer's width."""
    width = max(b.shape[1] for b in blocks)
    out = np.zeros((len(blocks), blocks[0].shape[0], width))
    for i, b in enumerate(blocks):
        out[i, :, :b.shape[1]] = b
    return {name: out, name + "_n": np.array([b.shape[1] for b in blocks])}


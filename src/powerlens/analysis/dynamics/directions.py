"""Each layer's directions: F_t's lead, M_t's, the folded F~_t's, a non-leading eigen-direction, the
consensus subspace and the rotation plane, read from a spectra .npz."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerlens.analysis.alignment import eig_direction, orthonormal_basis

NAMED = ("lead", "lead_M", "lead_Ft", "null_eig")  # directions measured per token


LEADS = ("lead", "lead_M", "lead_Ft")  # directions tested against the Monte Carlo null


@dataclass(kw_only=True)
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
    eig_r1: np.ndarray | None = None  # eigen-direction null: one-column members (d, K1) (spectra.eigen_null_members)
    eig_r2: np.ndarray | None = None  # two-column members (d, 2 K2), consecutive pairs


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
        out.append(LayerDirections(lead=lead, lead_M=lead_M, lead_Ft=lead_Ft, null_eig=null_eig, null_eig_index=j,
                                   span12=span12, span_M=span_M, plane2=plane2, lam1=complex(ev[0]),
                                   mu1=complex(1 + ev[ridx]), folded_lam1=complex(fe[0]) if fe is not None else None,
                                   eig_r1=_members(z, "eig_null_r1", u), eig_r2=_members(z, "eig_null_r2", u)))
    return out


def _members(z: dict, name: str, u: int) -> np.ndarray | None:
    if name not in z:
        return None
    return np.ascontiguousarray(z[name][u][:, : int(z[name + "_n"][u])])


def _dim(D) -> int:
    return 0 if D is None else int(D.shape[1])


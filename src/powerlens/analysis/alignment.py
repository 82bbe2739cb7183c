"""Alignment of tokens with a direction or a plane (paper.md section 4).

A direction set is an orthonormal basis D (d, r): r = 1 for a real eigenvector, r = 2 for the plane
span(Re v_1, Im v_1) of a complex leading pair. The alignment of token x is ||D^T x|| / ||x||: |cos| for
r = 1, the norm of the projection onto the plane for r = 2. It is invariant to the scale of x and to the
sign (or phase) of the eigenvector, so it applies to pre-LN residual streams and post-LN states alike.
"""

from __future__ import annotations

import numpy as np
import torch


def orthonormal_basis(cols: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Orthonormal basis (d, r) of the span of the columns (rank-revealing SVD)."""
    U, s, _ = np.linalg.svd(cols, full_matrices=False)
    r = int(np.sum(s > tol * max(s.max(), 1e-300)))
    return U[:, :r]


def eig_direction(vec: np.ndarray, complex_tol: float = 1e-9) -> np.ndarray:
    """Basis of a (canonical-phase) eigenvector: (d, 1) if real, the plane (d, 2) if complex."""
    if np.max(np.abs(vec.imag)) <= complex_tol * np.max(np.abs(vec)):
        v = vec.real
        return (v / np.linalg.norm(v))[:, None]
    return orthonormal_basis(np.stack([vec.real, vec.imag], axis=1))


def align(x: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """Alignment (..., ) of tokens x (..., d) with the subspace of orthonormal basis D (d, r)."""
    proj = x @ D  # (..., r)
    return proj.norm(dim=-1) / x.norm(dim=-1).clamp_min(1e-30)


def plane_angle(x: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """Angle (..., ) of the projection of x onto the plane with orthonormal basis P (d, 2)."""
    c = x @ P  # (..., 2)
    return torch.atan2(c[..., 1], c[..., 0])

"""Theory checks (claims C2, C3, C4) against their analytic predictions, under full attention."""

import numpy as np
import pytest

from powerlens import theory as th
from powerlens.tables import theory_table


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_consensus_rate_is_the_power_method_rate(seed):
    r, curves = th.experiment_real(d=32, n_heads=4, n_tokens=16, steps=120, seed=seed)
    assert r.detail["steps_fitted"] >= 5
    assert abs(r.measured - r.predicted) <= 0.05 * r.predicted, (r.measured, r.predicted)
    assert curves["err"][-1] < 1e-12  # consensus on +-v1


@pytest.mark.parametrize("seed", [0, 1])
def test_b_closed_orbit_in_the_leading_plane(seed):
    dist, angle, c = th.experiment_complex(d=32, n_heads=4, n_tokens=16, steps=150, seed=seed)
    assert dist.measured < 1e-6
    assert abs(angle.measured - angle.predicted) < 1e-3
    assert angle.predicted == pytest.approx(-0.4)  # arg(mu_1) as constructed (pair stored a - ib first)
    # a steady rotation on the plane's unit circle: the same angle every step (a closed orbit)
    assert angle.detail["angle_spread_last20"] < 1e-9


def test_c_bipartite_fixed_point_and_table():
    res, curves = th.experiment_bipartite(d=24, heads_list=[1, 4], n_tokens=12, steps=60, seed=0, runs=8,
                                          epsilon=1e-3)
    full = [r for r in res if r.attention == "full"]
    assert len(full) == 2 and all(r.detail["fixed_point_residual"] < 1e-10 for r in full)
    soft1 = next(r for r in res if r.attention == "softmax" and r.detail["heads"] == 1)
    assert soft1.detail["fixed_point_residual"] < 1e-10  # one head: still a fixed point with softmax
    for r in res:
        assert r.detail["runs"] == 8 and 0 <= r.measured <= 1 and r.detail["left"] == round(r.measured * 8)
    t = theory_table([{**r.__dict__, "rel_error": r.rel_error} for r in res])
    assert t["notes"].str.contains("/8 runs left").all()


def test_prescribed_spectrum():
    rng = np.random.default_rng(0)
    F = th.prescribed_matrix(10, [2.0 + 1.0j, 1.5], rest_radius=0.5, rng=rng)
    vals = np.sort_complex(np.linalg.eigvals(F))
    assert np.allclose(sorted(np.abs(vals))[-3:], [1.5, np.sqrt(5), np.sqrt(5)])
    lw = th.synthetic_layer(F, 2, rng)
    assert np.allclose(lw.F.numpy(), F, atol=1e-10)

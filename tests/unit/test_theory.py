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


def test_c_multi_head_bipartite_equilibrium_is_a_fixed_point_before_it_is_perturbed():
    """With 4 softmax heads +-v_1 is not a fixed point (the old test's artefact: the state moved at step 1);
    the equilibrium found by iterating is one to 1e-10, and the epsilon = 0 control stays antipodal."""
    d, n = 24, 12
    rng = np.random.default_rng([0, 3])
    F = th.prescribed_matrix(d, [3.0], rest_radius=-0.1, rng=rng, rest_min=-0.9)
    v = th.leading_pair(th.step_matrix(F, True))[1][:, 0].real
    lw = th.synthetic_layer(F, 4, np.random.default_rng([0, 3, 4, True]), "softmax", qk_scale=2.0)
    X0 = th.bipartite_state(v, n)
    moved = np.abs(th.iterate(X0, lw, 4, 1, True)[1] - X0).max()
    assert moved > 1e-6  # +-v_1 is not an equilibrium with several softmax heads
    Xs, res, steps = th.bipartite_equilibrium(X0, lw, 4, True)
    assert res < 1e-10 and steps > 1
    signs = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    assert th.antipodal(th.iterate(Xs, lw, 4, 50, True), signs).all()
    # a state that is not antipodal is seen as broken
    Xb = Xs.copy()
    Xb[1] = Xs[0]
    assert not th.antipodal(Xb[None], signs)[0]


def test_c_bipartite_experiment_and_table():
    res, curves = th.experiment_bipartite(d=24, heads_list=[1, 4], n_tokens=12, steps=60, seed=0, runs=8,
                                          epsilon=1e-3)
    assert [r.detail["heads"] for r in res] == [1, 4]
    for r in res:
        assert r.detail["fixed_point_residual"] < 1e-10  # the perturbed runs start at an equilibrium
        # an epsilon = 0 control that breaks (rounding errors grow: unstable) must fail the row
        assert r.passed == r.detail["control_stays"]
        assert r.detail["runs"] == 8 and 0 <= r.measured <= 1 and r.detail["broke"] == round(r.measured * 8)
    assert set(curves) == {"softmax-H1", "softmax-H4"}
    t = theory_table([{**r.__dict__, "rel_error": r.rel_error} for r in res])
    assert t["notes"].str.contains("/8 runs broke").all()


def test_prescribed_spectrum():
    rng = np.random.default_rng(0)
    F = th.prescribed_matrix(10, [2.0 + 1.0j, 1.5], rest_radius=0.5, rng=rng)
    vals = np.sort_complex(np.linalg.eigvals(F))
    assert np.allclose(sorted(np.abs(vals))[-3:], [1.5, np.sqrt(5), np.sqrt(5)])
    lw = th.synthetic_layer(F, 2, rng)
    assert np.allclose(lw.F.numpy(), F, atol=1e-10)

"""The dynamics table's contract: its columns, pinned (as TransformerLens pins its hook names), generated for the
tests from their declarations (:mod:`powerlens.analysis.verdict_tests`), each written by one path, and read
through one definition of "the model's own depth"."""

import numpy as np
import pandas as pd
import pytest

from powerlens.analysis.nulls import EigenDirections, RankingNull, register, unregister
from powerlens.analysis.verdict_tests import TESTS, Field, own_depth
from powerlens.analysis.verdict_tests import tested as rows_tested  # not "test*": pytest would collect it

#: The per-depth values of the run's sums (:func:`powerlens.analysis.dynamics.layer_stats`): the contract readers
#: (figures, tables, claims, the article) rely on. A rename here is a change of every output's schema.
SUMS = ("layer", "unique_layer", "leading_type", "leading_type_M", "null_eig_index", "n_tokens",
        *(f"{q}{k}" for k in ("", "_M", "_Ft", "_null_eig") for q in ("gamma", "rho", "tilt")),
        "rho_p_token_sign", "n_prompts", "rho_p_prompt_sign", "tilt_p_prompt_wilcoxon",
        "span12_alignment", "span_M_alignment", "span_M_dim", "pairwise_cos", "pairwise_abs_cos", "mean_dtheta",
        "rotation_plane", "arg_lambda1", "arg_mu1", "predicted_dtheta",
        "span_M_final", "span_M_final_null_median", "span_M_final_null_q95", "span_M_final_pct", "span_M_final_p",
        "span_M_final_ties", "span_M_final_saturated", "span_M_final_null_q99")
LAW = ("attn_entropy_rel", "bias_ratio")  # the attention-only law's diagnostics
CONTROL = tuple(f"{c}_nobias" for q in ("gamma", "rho", "tilt") for c in (
    q, f"{q}_null_median", f"{q}_null_q95", f"{q}_pct", f"{q}_p", f"{q}_ties", f"{q}_saturated", f"{q}_p_holm")) + (
    "rho_p_token_sign_nobias", "rho_p_prompt_sign_nobias", "tilt_p_prompt_wilcoxon_nobias")
#: Which tests each mode decides (probes: the sublayers exist only in the real pass)
MODEL_TESTS = tuple(s.prefix for s in TESTS)
LAW_TESTS = ("gamma", "rho", "tilt", "first_lead_gamma", "gamma_M", "rho_M", "tilt_M", "gamma_Ft", "rho_Ft", "tilt_Ft")


def test_each_test_declares_its_columns_in_one_place():
    """A test's columns come from its declaration: the value, the random-direction fields (a lower test has no
    null median or 95th percentile: the upper test of the same value has them), the eigen fields where it ranks the
    lead among F's other eigen-directions, then Holm and the marks."""
    tilt = next(s for s in TESTS if s.prefix == "tilt")
    assert tilt.columns[:3] == ("tilt", "tilt_p", "tilt_R") and "tilt_eig_rank" in tilt.columns
    assert tilt.columns[-1] == "tilt_sig"
    neg = next(s for s in TESTS if s.prefix == "attn_tilt_neg")
    assert neg.columns[0] == "attn_tilt" and "attn_tilt_neg_null_q95" not in neg.columns
    gamma = next(s for s in TESTS if s.prefix == "gamma")
    assert not any("_eig_" in c for c in gamma.columns)  # gamma's specificity is not read: no eigen fields
    all_cols = [c for s in TESTS for c in s.columns if c != s.value]
    assert len(all_cols) == len(set(all_cols))  # no two tests write one column


@pytest.fixture(scope="module")
def tables(prepared_twin):
    """A tiny GPT-2 twin's dynamics in both modes (the bias-free control in attention-only), by the API."""
    import powerlens

    _, rec = prepared_twin("tiny-gpt2")
    lens = powerlens.Lens.from_pretrained(rec["path"])
    prompts = ["The cat sat on the mat.", "Water boils at one hundred degrees.", "A b c d e f g h."]
    return {mode: lens.dynamics(prompts, mode=mode, max_tokens=16, steps=6, bias_free_control=True)
            for mode in ("model", "attention-only")}


def _declared(tests: tuple, extra: tuple) -> set:
    return set(SUMS) | set(extra) | {c for s in TESTS if s.prefix in tests for c in s.columns}


def test_the_dynamics_table_holds_exactly_the_declared_columns(tables):
    """The column set of both modes, pinned: the sums' values, the declared tests' columns, the law's
    diagnostics and the bias-free control (attention-only). A column added, renamed or dropped fails here."""
    model, law = tables["model"], tables["attention-only"]
    assert set(model.columns) == _declared(MODEL_TESTS, ()), set(model.columns) ^ _declared(MODEL_TESTS, ())
    assert set(law.columns) == _declared(LAW_TESTS, LAW + CONTROL), set(law.columns) ^ _declared(LAW_TESTS,
                                                                                                 LAW + CONTROL)
    assert len(model.columns) == len(set(model.columns))


def test_the_tests_own_the_models_depths_and_a_long_run_has_no_test_past_them(prepared_twin):
    """A shared-weight law run past the model's depth: every depth has its values, only the model's own depths
    have tests (one writer per cell: the tests there, the sums after), and own_depth finds exactly those."""
    import powerlens

    _, rec = prepared_twin("tiny-albert")
    lens = powerlens.Lens.from_pretrained(rec["path"])
    df = lens.dynamics(["The cat sat on the mat.", "Water boils.", "A b c.", "One two three."], mode="attention-only",
                       max_tokens=12,
                       steps=9, long_run_prompts=2, bias_free_control=False)
    L = lens.weights.n_layers
    assert len(df) == 9 > L  # every step of the long run
    assert df["tilt"].notna().all() and df["gamma"].notna().all()
    assert own_depth(df)["layer"].tolist() == list(range(L))
    ps = [s.col(Field.P) for s in TESTS if s.col(Field.P) in df]  # ALBERT is post-norm: no F~ tests
    assert len(ps) == 7 and df.loc[df["layer"] >= L, ps].isna().all().all()


def test_own_depth_and_tested_read_only_the_tested_rows():
    """own_depth: the rows where the verdict tests were taken; tested: a test's own rows, none for a test the
    table lacks (a constructed table: a long run's step 3 has a value and no test)."""
    df = pd.DataFrame({"layer": [0, 1, 2, 3], "tilt": [0.1, 0.2, 0.3, 0.4], "tilt_p": [0.01, 0.02, 0.5, np.nan]})
    assert own_depth(df)["layer"].tolist() == [0, 1, 2]
    spec = next(s for s in TESTS if s.prefix == "attn_tilt")
    assert len(rows_tested(df, spec)) == 0


class AxisDirections(RankingNull):
    """A toy ranking null: the first coordinate axes (planes of axis pairs for a complex lead)."""

    name, key, label = "coordinate axes", "axis", "specificity against the axes"
    plural, nobody = "coordinate axes", "no axis"

    def members(self, d, dim):
        E = np.eye(d.lead.shape[0])[:, :12]
        return E[:, :6] if dim == 1 else E  # 6 axes, or 6 planes (e0, e1), (e2, e3), ...


class EigenMirror(EigenDirections):
    """A second registration of F's other eigen-directions under another key: the same members."""

    key = "eigmirror"


@pytest.fixture
def toy_nulls():
    added = [register(AxisDirections()), register(EigenMirror())]
    yield added
    for n in added:
        unregister(n.key)


def test_a_null_added_by_its_registration_alone_reaches_the_table_and_the_claims(prepared_twin, toy_nulls):
    """Two ranking nulls registered from this test module, nothing else touched: every test that ranks its lead
    writes their columns (generated from the declarations), the mirror of F's eigen-directions counts exactly what
    the built-in null counts (the same members through the same path), and a claim reading that needs
    specificity reads each null's p (its decision and power name them)."""
    import powerlens
    from powerlens.analysis import decisions as dc
    from powerlens.analysis.claims import parts

    _, rec = prepared_twin("tiny-gpt2")
    lens = powerlens.Lens.from_pretrained(rec["path"])
    df = lens.dynamics(["The cat sat on the mat.", "Water boils at one hundred degrees.", "A b c d e f g h."],
                       mode="model", max_tokens=16)
    ranked = [s for s in TESTS if s.ranked]
    for key in ("axis", "eigmirror"):
        assert {c for c in df.columns if f"_{key}_" in c} == {s.col(f"{key}_{f}") for s in ranked
                                                            for f in RankingNull.FIELDS + RankingNull.CHAIN_FIELDS}
    own = own_depth(df)
    assert (own["tilt_axis_M"] == 6).all() and (own["tilt_axis_beaten"] + own["tilt_axis_tied"] <= 6).all()
    for f in ("M", "beaten", "tied", "chains", "chains_ge_hi", "dep"):  # the same members, the same chains
        assert own[f"tilt_eigmirror_{f}"].tolist() == own[f"tilt_eig_{f}"].tolist()
    crit = {"C7_share_layers": 0.5, "alpha": 0.05, "null_draws_cap": 200_000}
    part = parts(df, "C7", crit)[0]
    assert set(part.specs) == {"eig", "axis", "eigmirror"} and part.spec is part.specs["eig"]
    assert part.specs["eigmirror"].p == pytest.approx(part.specs["eig"].p, abs=0.5)  # same counts, own tie-break
    assert "specificity against the axes: " in part.power
    assert part.decision == dc.both(part.conj.decision, *(s.decision for s in part.specs.values()))


def test_a_null_key_is_registered_once():
    with pytest.raises(ValueError, match="registered already"):
        register(EigenDirections())

"""C9 by revision 6 (paper.md sections 4d and 4e): judged in the real forward pass with the law beside it, where
the claim can be met: underpowered where a norm caps |cos| below the bound at any kappa, inconclusive where the
sweep stopped while the alignment still rose; activation addition (at matched KL on unrelated prompts with an LM
head, never extrapolated) reported beside the verdict, not part of it."""

import numpy as np
import pandas as pd

from powerlens.analysis import claims
from powerlens.analysis.claims.criteria import aa_at_kl

CRIT = {"C9_alignment": 0.9, "alpha": 0.05}


def _rows(cos_edit=(0.3, 0.95), kl_edit=(0.05, 0.5), sweep=((0.01, 0.2), (0.1, 0.5), (0.5, 0.8), (2.0, 0.97)),
          head=True, **extra):
    """One target's steering.csv: rank-1 and activation addition at matched norm at kappas 0, 4, 64, then the
    beta sweep as (KL, alignment) points."""
    rows = []
    for k, c, kl in zip((0, 4, 64), (0.1, *cos_edit), (0.0, *kl_edit)):
        common = {"model": "m", "target": "unembedding: x", "kappa": k, "u_principal": k > 0,
                  "cos_after_layer_attention_only": min(1.0, c + 0.05), **extra}
        rows.append({**common, "method": "rank-1 (last layer O')", "cos_after_layer_model": c,
                     "kl_unrelated": kl if head else np.nan})
        rows.append({**common, "method": "activation addition (beta u, matched norm)",
                     "cos_after_layer_model": c - 0.05, "kl_unrelated": 3 * kl if head else np.nan})
    if head:
        rows += [{"model": "m", "target": "unembedding: x", "kappa": np.nan,
                  "method": "activation addition (beta sweep)", "cos_after_layer_model": c, "kl_unrelated": kl}
                 for kl, c in sweep]
    return pd.DataFrame(rows)


def test_the_baseline_at_matched_kl_is_the_best_alignment_within_the_edits_kl_never_extrapolated():
    sw = pd.DataFrame({"kl_unrelated": [0.01, 0.1, 1.0], "cos_after_layer_model": [0.2, 0.6, 0.9]})
    assert aa_at_kl(sw, 0.1) == 0.6 and aa_at_kl(sw, 0.55) == 0.75  # interpolated at the edit's KL
    assert aa_at_kl(sw, 5.0) == 0.9  # past the sweep: its best within the budget
    # below the sweep's first KL: no point at or under the edit's KL, so none is credited (revision 5 took 0.2,
    # alignment reached at a KL ten times the edit's)
    assert np.isnan(aa_at_kl(sw, 0.001))


def test_c9_passes_where_activation_addition_reaches_less_at_the_same_kl():
    v = claims.c9(_rows(), CRIT)
    assert v.word == "reproduced" and "at matched KL on unrelated prompts" in v.null
    assert "the law beside it (attention-only, same kappa): min |cos| 1" in v.measured


def test_activation_addition_is_reported_beside_c9_never_part_of_it():
    """Revision 6: the paper claims the rank-1 edit aligns the tokens; activation addition aligning more at the
    same KL is reported (the difference in the row), and does not fail the claim."""
    v = claims.c9(_rows(sweep=((0.01, 0.2), (0.2, 0.97), (0.5, 0.98))), CRIT)
    assert v.word == "reproduced" and "rank-1 minus activation addition at matched KL" in v.measured
    assert "unembedding: x -0.03" in v.measured and "(reported, not judged)" in v.null  # 0.95 - 0.98


def test_without_an_lm_head_c9_compares_at_matched_norm_and_says_when_the_curve_is_flat():
    v = claims.c9(_rows(cos_edit=(0.74, 0.741), head=False), CRIT)
    assert v.word == "not reproduced" and "at matched norm of change" in v.null
    assert "from kappa 4 to 64 the real pass moved only from 0.74 to 0.741" in v.flip and "flattens" in v.flip


def test_a_sweep_that_stops_while_the_alignment_rises_is_no_evidence():
    """SmolLM2's shape at kappa 256 (0.07 -> 0.43 over the last step, 0.93 at kappa 4096): the criterion is not
    met, but a larger kappa could meet it, so the verdict is "inconclusive", never "not reproduced"; a curve that
    gains less than 0.005 per doubling is flat and fails."""
    v = claims.c9(_rows(cos_edit=(0.07, 0.43), head=False), CRIT)
    assert v.word == "inconclusive" and "still rose (0.07 -> 0.43 from kappa 4 to 64)" in v.failed
    assert claims.c9(_rows(cos_edit=(0.42, 0.43), head=False), CRIT).word == "not reproduced"  # 0.0025 a doubling


def test_a_capped_change_states_its_saturation_and_the_cos_ceiling_that_makes_the_flip_impossible():
    """Gemma 3's shape: a post-attention norm caps the change; the edit's output along p * u is 98.5% of its
    saturation value and no change of that size can lift mean |cos| above 0.34: the flip is impossible."""
    df = _rows(cos_edit=(0.02, 0.0153), post_norm_cap=1830.0, cos_pu_after_layer_model=0.9,
               saturation_share=0.985, post_norm_saturation_u=646.0, cos_ceiling=0.34)
    v = claims.c9(df, CRIT)
    assert v.word == "underpowered" and "the largest mean |cos| any kappa allows is 0.34 < 0.9" in v.underpowered
    assert "98.5% of 646" in v.measured and "largest mean |cos| any change of that size" in v.measured
    assert "it cannot: the cap allows at most 0.34 at any kappa" in v.flip

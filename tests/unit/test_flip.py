"""What would flip a verdict (issue 40): the margins are counted from the criterion's own numbers, and a
margin applied to the constructed case does flip it."""

import math

from powerlens.analysis import decisions as dc
from powerlens.analysis.claims import flip as fl


def _at_least(yes: int, need: int) -> str:
    return dc.YES if yes >= need else dc.NO


def test_a_count_margin_is_exactly_what_flips_the_count():
    for yes in range(0, 7):
        text = fl.at_least(yes, 0, 6, 0.5 * 6, "law")
        if _at_least(yes, 3) == dc.YES:  # losing the stated number of layers flips it, one fewer does not
            k = int(text.split(": ")[1].split(" layer")[0])
            assert _at_least(yes - k, 3) == dc.NO and _at_least(yes - k + 1, 3) == dc.YES
        else:
            k = int(text.split(": ")[1].split(" more")[0])
            assert _at_least(yes + k, 3) == dc.YES and _at_least(yes + k - 1, 3) == dc.NO


def test_a_count_that_must_stay_under_a_limit():
    """C10's FFN clause (a clause of absence read as a per-layer Holm count): its flip text from its part."""
    from powerlens.analysis.claims.layer_criteria import _part_flip
    from powerlens.analysis.parts import Part
    from powerlens.analysis.verdict_tests import reading

    assert fl.below(1, 0, 8, 2, "FFN").startswith("FFN: 1 more of the 8 layers")
    assert "3 layers of the 4 significant would have to lose" in fl.below(4, 0, 8, 2, "FFN")
    assert "undecided" in fl.below(1, 2, 8, 2, "FFN")
    part = Part(reading("C10", "FFN"), dc.YES, True, "", yes=1, undecided=0, of=8, limit=2)
    assert _part_flip(part, 0.05) == "FFN: significant layers: 1 more of the 8 layers would have to be significant " \
                                     "(fails at 2)"


def test_a_claim_p_flips_at_alpha():
    """A claim judged by one p flips when that p crosses alpha, in either direction."""
    from powerlens.analysis.across_layers import partial_conjunction
    from powerlens.analysis.claims.layer_criteria import _part_flip
    from powerlens.analysis.parts import Part
    from powerlens.analysis.verdict_tests import reading

    conj = partial_conjunction([0.01, 0.02], [0.01, 0.02], [0.01, 0.02], 1, 0.05, 200_000)
    part = Part(reading("C6", "(a)"), dc.YES, True, "", conj=conj)
    assert _part_flip(part, 0.05) == "(a): claim p 0.02 would have to rise to 0.05"


def test_a_threshold_says_which_way_and_a_failure_lists_only_its_failed_parts():
    assert fl.threshold(0.698, 0.05, "Fisher p", above=False) == "Fisher p 0.698 would have to fall below 0.05"
    assert fl.threshold(0.01, 0.05, "p", above=False) == "p 0.01 would have to rise to 0.05"
    assert fl.threshold(0.9, 0.5, "|cos|") == "|cos| 0.9 would have to fall to 0.5"
    parts = [("a moves", dc.YES), ("b moves", dc.NO), ("c moves", dc.NO)]
    assert fl.join(parts, dc.NO) == "each of: b moves; c moves"
    assert fl.join(parts, dc.YES) == "any one of: a moves; b moves; c moves"
    assert fl.join([("a", dc.YES)], dc.YES) == "a" and fl.join([], dc.NO) == "-"
    assert math.ceil(0.5 * 7) == 4 and "needs 4 of 7" in fl.at_least(5, 0, 7, 3.5, "x")

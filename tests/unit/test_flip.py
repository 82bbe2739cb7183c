"""What would flip a verdict (issue 40): the margins are counted from the criterion's own numbers, and a
margin applied to the constructed case does flip it."""

import math

from powerlens.analysis import decisions as dc
from powerlens.analysis.claims import flip as fl
from powerlens.analysis.claims.criteria import Count


def test_a_count_margin_is_exactly_what_flips_the_count():
    for yes in range(0, 7):
        c = Count(yes, 0, 6, 0, 100)
        state = c.at_least(0.5 * 6)
        text = c.flip_at_least(0.5 * 6, "law")
        if state == dc.YES:  # losing the stated number of layers flips it, one fewer does not
            k = int(text.split(": ")[1].split(" layer")[0])
            assert Count(yes - k, 0, 6, 0, 100).at_least(3) == dc.NO
            assert Count(yes - k + 1, 0, 6, 0, 100).at_least(3) == dc.YES
        else:
            k = int(text.split(": ")[1].split(" more")[0])
            assert Count(yes + k, 0, 6, 0, 100).at_least(3) == dc.YES
            assert Count(yes + k - 1, 0, 6, 0, 100).at_least(3) == dc.NO


def test_a_count_that_must_stay_under_a_limit():
    c = Count(1, 0, 8, 0, 100)  # FFN undoes the tilt in 1 of 8; must be under 25% (2 layers)
    assert c.below(2) == dc.YES and c.flip_below(2, "FFN").startswith("FFN: 1 more of the 8 layers")
    c = Count(4, 0, 8, 0, 100)
    assert c.below(2) == dc.NO and "3 layers of the 4 significant would have to lose" in c.flip_below(2, "FFN")
    assert "undecided" in Count(1, 2, 8, 0, 100).flip_below(2, "FFN")


def test_a_threshold_says_which_way_and_a_failure_lists_only_its_failed_parts():
    assert fl.threshold(0.698, 0.05, "Fisher p", above=False) == "Fisher p 0.698 would have to fall below 0.05"
    assert fl.threshold(0.01, 0.05, "p", above=False) == "p 0.01 would have to rise to 0.05"
    assert fl.threshold(0.9, 0.5, "|cos|") == "|cos| 0.9 would have to fall to 0.5"
    parts = [("a moves", dc.YES), ("b moves", dc.NO), ("c moves", dc.NO)]
    assert fl.join(parts, dc.NO) == "each of: b moves; c moves"
    assert fl.join(parts, dc.YES) == "any one of: a moves; b moves; c moves"
    assert fl.join([("a", dc.YES)], dc.YES) == "a" and fl.join([], dc.NO) == "-"
    assert math.ceil(0.5 * 7) == 4 and "needs 4 of 7" in fl.at_least(5, 0, 7, 3.5, "x")

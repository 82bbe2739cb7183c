"""The article's reading of its evidence (powerlens.outputs.evidence): the pattern sentence chosen by rules on
constructed verdict tables (law yes / real no; controls pass too; controls pass where the trained model fails; all
fail), the per-cell sentence, the counts the sentence shows read back as the article traces them, and each claim's
method named in the modelling choices."""

from __future__ import annotations

import pandas as pd
import pytest

from powerlens.analysis.claims import JUDGED_IN, OTHER, TRAINING_P
from powerlens.analysis.claims.criteria import LAW, REAL_PASS, SYNTHETIC
from powerlens.outputs import evidence as ev

R, NR, UP = "reproduced", "not reproduced", "underpowered"
FAMS = ("BERT (trained)", "Llama (trained, 4-bit)")


def cell(claim, fam, outcome, where, k="-", n="-", other=("-", "-", "-"), tp="-"):
    return {"claim": claim, "family": fam, "models": f"model-{fam.split()[0]} (trained weights)", "outcome": outcome,
            JUDGED_IN: where, OTHER[0]: other[0], OTHER[1]: other[1], OTHER[2]: other[2],
            "control seeds passing": str(k), "control seeds": str(n), TRAINING_P: tp, "p value": "0.5"}


def table(rows) -> pd.DataFrame:
    synth = [cell(c, "synthetic", R, SYNTHETIC) for c in ("C2", "C3", "C4")]
    return pd.DataFrame(rows + synth + [cell("C5", "-", "not judged", LAW)]).astype(str)


def law_yes_real_no():
    rows = []
    for f in FAMS:
        rows.append(cell("C1", f, R, LAW, 0, 3, (REAL_PASS, NR, "0.4"), "0.01"))
        rows += [cell(c, f, NR, REAL_PASS, 0, 3) for c in ("C6", "C7", "C8", "C10")]
    return table(rows)


def test_the_law_reading_of_c9_is_counted_beside_the_pattern():
    df = law_yes_real_no()
    extra = pd.DataFrame([cell("C9", f, NR, REAL_PASS, other=(LAW, R if f == FAMS[0] else NR, "-")) for f in FAMS])
    s, f = text(pd.concat([df, extra.astype(str)], ignore_index=True))
    assert f.kind == ev.LAW_NOT_REAL and "(read in the law, C9's edit passes on 1 of 2)" in s


def controls_too():
    rows = []
    for f in FAMS:
        rows.append(cell("C1", f, R, LAW, 3, 3, (REAL_PASS, R, "0.01"), "0.6"))
        rows += [cell("C7", f, R, REAL_PASS, 3, 3), cell("C8", f, NR, REAL_PASS, 0, 3)]
    return table(rows)


def controls_beat_trained():
    rows = []
    for f in FAMS:
        rows.append(cell("C1", f, R, LAW, 0, 3, (REAL_PASS, NR, "0.4"), "0.01"))
        rows += [cell("C6", f, NR, REAL_PASS, 2, 3), cell("C7", f, NR, REAL_PASS, 0, 3)]
    return table(rows)


def all_fail():
    rows = []
    for f in FAMS:
        rows.append(cell("C1", f, NR, LAW, 0, 3, (REAL_PASS, NR, "0.9")))
        rows += [cell(c, f, NR, REAL_PASS, 0, 3) for c in ("C6", "C7")] + [cell("C9", f, UP, REAL_PASS)]
    return table(rows)


def text(df: pd.DataFrame) -> tuple[str, ev.Finding]:
    f = ev.pattern(df)
    num = lambda k: str(f.n[k])  # noqa: E731
    name = lambda c, fam: [c, " on ", fam]  # noqa: E731
    return "".join(ev.sentence(f, num, name)), f


def test_law_yes_real_no():
    s, f = text(law_yes_real_no())
    assert f.kind == ev.LAW_NOT_REAL and f.beaten == ()
    assert "the paper's simplified layer behaves as the paper says, the real forward pass of these trained models " \
           "does not" in s
    assert "2 of 2 cells judged in the attention-only law pass, against 0 of 8 judged in the real forward pass" in s
    assert "rerun on the real forward pass passes on 0 of 2 models. " in s
    assert "Random attention passes" not in s


def test_controls_pass_too():
    s, f = text(controls_too())
    assert f.kind == ev.CONTROLS_TOO and f.n["reproduced"] == 4 and f.n["every_seed"] == 4
    assert "every one of the 4 passes on a trained model is matched by its random-attention controls" in s


def test_controls_pass_where_trained_fails():
    s, f = text(controls_beat_trained())
    assert f.kind == ev.LAW_NOT_REAL  # the law passes, the real pass fails ...
    assert f.beaten == (("C6", FAMS[0]), ("C6", FAMS[1]))  # ... and the controls beat the trained model there
    assert ("Random attention passes where the trained model fails in C6 on BERT (trained) and C6 on Llama "
            "(trained, 4-bit)") in s
    rows = ev.trained_cells(controls_beat_trained())
    said = ev.follows(rows[(rows["claim"] == "C6")].iloc[0], 0.05)
    assert said.startswith("Fails, while random attention passes in some seeds")


def test_all_fail():
    s, f = text(all_fail())
    assert f.kind == ev.ALL_FAIL
    assert s.startswith("What the pattern says: no claim holds on a trained model here; all 2 cells judged in the "
                        "attention-only law and all 6 judged in the real forward pass fail.")


def test_no_trained_model_no_sentence():
    df = table([])
    assert ev.pattern(df).kind is None and text(df)[0] == ""


def test_a_real_pass_that_holds_is_not_the_law_pattern():
    rows = []
    for f in FAMS:
        rows.append(cell("C1", f, R, LAW, 0, 3, (REAL_PASS, R, "0.01"), "0.01"))
        rows += [cell("C7", f, R, REAL_PASS, 0, 3), cell("C8", f, NR, REAL_PASS, 0, 3)]
    s, f = text(table(rows))
    assert f.kind == ev.REAL_HOLDS and "real forward pass shows what the paper says in 2 of 4 cells" in s


@pytest.mark.parametrize("row,want", [
    (cell("C1", FAMS[0], R, LAW, 3, 3), "Holds, but random attention passes in every seed too"),
    (cell("C1", FAMS[0], R, LAW, 0, 3, (REAL_PASS, NR, "0.4"), "0.01"),
     "Holds where random attention fails, and the trained lead beats the controls'"),
    (cell("C1", FAMS[0], R, LAW, 0, 3, tp="0.3"), "Holds where random attention fails, though the training p"),
    (cell("C9", FAMS[0], NR, REAL_PASS, other=(LAW, R, "-")), "Fails in the real forward pass; the attention-only "
                                                              "law passes."),
    (cell("C9", FAMS[0], UP, REAL_PASS), "No evidence either way"),
    ({**cell("C1", FAMS[0], R, LAW, 0, 3), "control seeds undecided": "2"}, "Holds; random attention passes in no "
                                                                            "seed but is undecided in some"),
    (cell("C7", FAMS[0], NR, REAL_PASS, 0, 3), "Fails in the real forward pass, and so do its random-attention"),
])
def test_what_follows_from_one_cell(row, want):
    assert ev.follows(pd.Series(row), 0.05).startswith(want)
    if row[OTHER[1]] == NR and row["outcome"] == R:
        assert "Only in the attention-only law: the real forward pass does not show it." in ev.follows(
            pd.Series(row), 0.05)


def test_the_counts_read_back_as_the_article_traces_them(tmp_path):
    """The sentence's counts are row_count locators over table_claims: read from a written CSV they give the
    numbers the rules used (the article's read-back compares the same)."""
    from powerlens.outputs.trace import count_word, row_count

    df = controls_beat_trained()
    df.to_csv(tmp_path / "t.csv", index=False)
    f = ev.pattern(df)
    for key, where in ev.COUNTS.items():
        assert row_count("t.csv", tmp_path, where).text == str(f.n[key]), key
    assert count_word("t.csv", tmp_path, "reproduced", "every seed").text == str(f.n["every_seed"])


def test_each_claims_method_is_named_in_the_modelling_choices():
    """The article and the modelling choices name the same method for every claim (the registry's `method`):
    the modelling choices' text holds it, and so does the article's text for that claim (its criterion, where
    and power, or the article's methods)."""
    from powerlens.analysis.claims.registry import CLAIMS
    from powerlens.outputs.article import METHODS
    from powerlens.pipeline.config import schema_defaults
    from powerlens.pipeline.steps.provenance import modelling_choices

    choices = " ".join(modelling_choices({})).lower()
    methods = " ".join(p for b in METHODS if b[0] == "p" for p in b[1] if isinstance(p, str)).lower()
    crit = {**schema_defaults()["claims"], "alpha": 0.05}
    for c in CLAIMS:
        assert c.method, c.id
        assert c.method.lower() in choices, (c.id, c.method)
        words = " ".join([c.where, c.power, c.criterion.wording(crit) if c.criterion else "", methods]).lower()
        assert c.method.lower() in words, (c.id, c.method)
    assert "fisher" not in choices  # C4 is the exact conditional (Cochran-Mantel-Haenszel) test, everywhere

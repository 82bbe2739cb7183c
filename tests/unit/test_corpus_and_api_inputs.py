"""Issue #52 (fifth pass), the corpus and the Python API: repeated, invisible and too few prompts are refused at
read time naming the line; Lens.from_pretrained refuses what is not a model id; spectra takes numpy integers;
inside ``lens.steer`` the lens's matrices are the edited ones."""

import re

import numpy as np
import pytest
import yaml

from powerlens.core.corpus import MIN_PROMPTS, check_prompt_list, prompt_key, read_prompts
from powerlens.core.errors import PowerlensError

from ..conftest import REPO


def corpus(tmp_path, *lines: str):
    p = tmp_path / "p.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


# 1. repeated prompts ---------------------------------------------------------------------------------------------

def test_repeated_prompts_are_refused_naming_both_lines(tmp_path):
    """24 copies of one prompt took the prompt-level p from 0.5 to 6e-8: a repeat, even in another case, with
    other whitespace or a zero-width space inside, is refused with the line of its first copy."""
    p = corpus(tmp_path, "The cat sat on the mat.", "A dog ran.", "Water boils.",
               "  the  CAT sat on\tthe mat. ", "A\u200b dog ran.", "Rain fell.")
    with pytest.raises(PowerlensError, match=r"2 repeated prompt\(s\): line 1 \('The cat sat on the mat\.'\) again "
                                             r"at line 4; line 2 \('A dog ran\.'\) again at line 5") as e:
        read_prompts(p)
    assert e.value.problem.endswith("again at line 5")
    assert "keep each prompt once" in e.value.fix and "prompt-level tests" in e.value.fix
    with pytest.raises(PowerlensError, match=r"prompt 1 \('The cat sat\.'\) again at prompt 3"):
        check_prompt_list(["The cat sat.", "A dog.", "THE CAT SAT."])
    # 24 copies: a short message all the same
    with pytest.raises(PowerlensError) as e:
        read_prompts(corpus(tmp_path, *["The cat sat on the mat."] * 24))
    assert e.value.problem.endswith("23 repeated prompt(s): line 1 ('The cat sat on the mat.') again at line 2, "
                                    "line 3, line 4, line 5, line 6, line 7, ...")


def test_distinct_prompts_stay_distinct_and_as_written():
    assert prompt_key("The cat") != prompt_key("The cats") and prompt_key("a b") != prompt_key("ab")
    assert prompt_key("\uff34he cat") == prompt_key("the cat")  # NFKC: a full-width letter is the letter
    assert check_prompt_list(["The cat.", "the dog."]) == ["The cat.", "the dog."]  # nothing rewritten


def test_shipped_corpora_load_and_hold_no_repeat():
    """Every corpus a shipped config names (and the default) loads: no repeat, enough prompts."""
    names = {"config/prompts.txt"} | {c["prompts"] for f in sorted((REPO / "config").glob("*.yaml"))
                                      if isinstance(c := yaml.safe_load(f.read_text()), dict) and "prompts" in c}
    assert "config/prompts_test.txt" in names
    for name in names:
        ps = read_prompts(REPO / name)
        assert len({prompt_key(x) for x in ps}) == len(ps) >= MIN_PROMPTS


# 2. too few prompts -----------------------------------------------------------------------------------------------

def test_the_smallest_corpus_is_the_one_every_third_has_a_prompt_of():
    """MIN_PROMPTS is where the thirds split (prompts j, j + 3, ...) stops leaving a third empty."""
    from powerlens.analysis.dynamics.probes import subset_weights

    thirds = [f"third{j}" for j in range(3)]
    assert subset_weights(np.arange(MIN_PROMPTS), thirds).sum(1).min() > 0
    assert subset_weights(np.arange(MIN_PROMPTS - 1), thirds).sum(1).min() == 0


@pytest.mark.parametrize("n", [1, 2])
def test_a_corpus_too_small_for_the_thirds_is_refused_with_the_reason(tmp_path, n):
    p = corpus(tmp_path, *[f"Prompt number {i} of the corpus." for i in range(n)])
    with pytest.raises(PowerlensError, match=rf"holds {n} prompt\(s\); the analysis needs at least 3: .*thirds") as e:
        read_prompts(p)
    assert "add distinct natural-language prompts" in e.value.fix
    assert len(read_prompts(corpus(tmp_path, "One.", "Two.", "Three."))) == 3


# 3. invisible prompts ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line,name", [("\u200b\u200b", "U+200B ZERO WIDTH SPACE"),
                                       ("\ufeff", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
                                       ("\u2060 \u00ad", "U+2060 WORD JOINER, U+00AD SOFT HYPHEN"),
                                       ("\u3164", "U+3164 HANGUL FILLER"),
                                       ("\u00a0\ufe0f", "U+FE0F VARIATION SELECTOR-16")])
def test_a_prompt_of_invisible_characters_is_refused_naming_the_line(tmp_path, line, name):
    p = corpus(tmp_path, "The cat sat.", line, "A dog ran.", "Water boils.")
    with pytest.raises(PowerlensError, match=rf"line 2: the prompt is only invisible characters \({re.escape(name)}\)"
                       ) as e:
        read_prompts(p)
    assert "visible text" in e.value.fix
    with pytest.raises(PowerlensError, match=r"^prompt 2: the prompt is only invisible"):
        check_prompt_list(["The cat sat.", line])


def test_invisible_characters_inside_text_and_blank_lines_stay_as_they_were(tmp_path):
    p = corpus(tmp_path, "The cat\u200b sat.", "", "  \u3000 ", "A dog ran.", "Water boils.")
    assert read_prompts(p) == ["The cat\u200b sat.", "A dog ran.", "Water boils."]


# 4 - 6. the API ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpt2(prepared_twin):
    import powerlens

    return powerlens.Lens.from_pretrained(prepared_twin("tiny-gpt2")[1]["path"])


@pytest.mark.parametrize("arg,match", [(None, r"is None \(a NoneType\)"), ("", "an empty string"),
                                       ("   ", "an empty string"), (3, r"is 3 \(a int\)"),
                                       (np.float64(1.5), r"\(a float64\)")])
def test_from_pretrained_refuses_what_is_not_a_model_id(monkeypatch, arg, match):
    import powerlens
    from powerlens import api

    def no_hub(*a, **k):
        raise AssertionError("sent to the hub")

    monkeypatch.setattr(api, "fetch_hf", no_hub)
    with pytest.raises(PowerlensError, match=match) as e:
        powerlens.Lens.from_pretrained(arg)
    assert e.value.fix.startswith("pass ")


def test_from_pretrained_of_a_loaded_model_says_to_wrap_it(gpt2):
    import powerlens

    with pytest.raises(PowerlensError, match=r"\(a GPT2LMHeadModel\), not a folder path") as e:
        powerlens.Lens.from_pretrained(gpt2.model)
    assert "Lens(model, tokenizer)" in e.value.fix


@pytest.mark.parametrize("tok", ["abc", 3, {"a": 1}])
def test_lens_refuses_what_is_not_a_tokenizer(gpt2, tok):
    """#69: Lens(model, tokenizer="abc") ended in an AttributeError traceback."""
    import powerlens

    with pytest.raises(PowerlensError, match="is not a tokenizer") as e:
        powerlens.Lens(gpt2.model, tok)
    assert "AutoTokenizer" in e.value.fix
    assert powerlens.Lens(gpt2.model, gpt2.tokenizer).tokenizer is gpt2.tokenizer  # a real one passes


def test_from_pretrained_still_takes_a_path_object(prepared_twin):
    from pathlib import Path

    import powerlens

    assert powerlens.Lens.from_pretrained(Path(prepared_twin("tiny-gpt2")[1]["path"])).arch == "gpt2"


def test_spectra_takes_numpy_integers_and_refuses_other_numbers(gpt2):
    got = gpt2.spectra(k=np.int64(3), threads=np.int32(1), seed=np.int64(0))
    ref = gpt2.spectra(k=3, threads=1, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(got.eigenvectors, ref.eigenvectors))
    assert got.eigenvectors[0].shape[1] == 3
    for k in (True, np.bool_(True), 3.0, np.float64(3), "3", 0, np.int64(0), -1, 10 ** 6):
        with pytest.raises(PowerlensError, match=r"^k .* is not a number of leading eigenvectors"):
            gpt2.spectra(k=k)
    for t in (True, 1.0, 0):
        with pytest.raises(PowerlensError, match="is not a positive integer"):
            gpt2.spectra(threads=t)


@pytest.mark.parametrize("twin", ["tiny-gpt2", "tiny-albert"])
def test_inside_steer_the_lens_sees_the_edited_layer(prepared_twin, twin):
    """F' = (W_O + alpha u z^T) V = F + alpha u (V^T z)^T: F(-1) and spectra() inside the edit are the edited
    layer's (ALBERT's one shared layer is every depth's); on exit the unedited ones, bit for bit."""
    import powerlens
    from powerlens.analysis.steering import rank1_z

    lens = powerlens.Lens.from_pretrained(prepared_twin(twin)[1]["path"])
    F = [lens.F(t) for t in range(len(lens.weights.layer_map))]
    before = lens.spectra()
    W_V = lens.weights.layers[-1].v_per_head().double().numpy()
    with lens.steer("random", kappa=16) as edit:
        want = F[-1] + edit["scale"] * np.outer(edit["u"], W_V.T @ rank1_z(W_V, edit["u"]))
        assert np.abs(lens.F(-1) - want).max() <= 1e-5 * np.abs(want).max()
        assert not np.allclose(lens.F(-1), F[-1])
        shared = lens.weights.shared
        assert np.array_equal(lens.F(0), lens.F(-1)) if shared else np.array_equal(lens.F(0), F[0])
        sp = lens.spectra()
        lead = sp[len(sp) - 1].eigvals[0]
        assert abs(lead - edit["principal"]["lambda1"]) <= 1e-5 * abs(lead)
        assert abs(lead) > 2 * abs(before[len(before) - 1].eigvals[0])
    assert all(np.array_equal(lens.F(t), F[t]) for t in range(len(F)))
    after = lens.spectra()
    assert all(np.array_equal(a, b) for a, b in zip(after.eigenvalues, before.eigenvalues))

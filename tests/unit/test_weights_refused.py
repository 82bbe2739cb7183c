"""Issue #52 (round five), weights: random weights are known from the folder itself (its twin marker), a config
and weights that disagree in either direction are refused, token ids stay within the embedding, an untied
model without its LM head and a GGUF whose header contradicts its tensors are refused at fetch, and a shape
mismatch is shown, not referred to "the above report"."""

import json
import shutil

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_json
from powerlens.models import sources
from powerlens.models.sources.files import from_pretrained_checked
from powerlens.pipeline.config import add_matched_controls, check_models
from powerlens.pipeline.steps.extract import extract
from powerlens.pipeline.steps.fetch_model import fetch_model

from ..conftest import write_gguf


@pytest.fixture(scope="module")
def twin_dir(tmp_path_factory):
    """A tiny GPT-2 twin (2 layers, 320 embedding rows) fetched by the pipeline's own step: its folder holds
    the twin marker."""
    d = tmp_path_factory.mktemp("twin")
    rec = fetch_model("t", {"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2", "seed": 1}, d / "m.json")
    return rec["path"]


def _copy(twin_dir, tmp_path, marker=False):
    """A copy of the twin's folder, without its marker unless ``marker`` (a "trained" model for the checks)."""
    d = tmp_path / "model"
    shutil.copytree(twin_dir, d)
    if not marker:
        (d / sources.TWIN_MARKER).unlink()
    return d


def _edit_config(d, **kw):
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(kw)
    (d / "config.json").write_text(json.dumps(cfg))


def _local(d):
    return {"arch": "gpt2", "source": "local", "path": str(d)}


# ------------------------------------------------------------------ 1. random weights known from the folder
def test_twin_folder_given_as_local_is_random_in_every_label(twin_dir, tmp_path):
    d = _copy(twin_dir, tmp_path, marker=True)
    entry = _local(d)
    assert sources.random_weights(entry)  # at DAG time, from the config entry's path
    man = fetch_model("twin-local", entry, tmp_path / "run" / "manifest.json")
    assert man["random_weights"] is True and man["weights_label"] == "random weights"
    assert sources.random_weights(read_json(tmp_path / "run" / "manifest.json"))
    extract(tmp_path / "run" / "manifest.json", tmp_path / "w.safetensors", tmp_path / "w.json", threads=1)
    meta = read_json(tmp_path / "w.json")
    assert meta["random_weights"] is True and meta["weights_label"] == "random weights"
    from powerlens.analysis.claims import families, family_of
    from powerlens.outputs.tables import models_table

    assert models_table([meta])["weights"].tolist() == ["random weights"]
    # the verdict column of a family is named from its trained models only: a twin adds no "(trained)" column
    assert family_of("gpt2", [meta["weights_label"]]) == family_of("gpt2", [])
    assert all("trained" not in f for f in families({"twin-local": meta}))


def test_twin_folder_given_as_local_gets_no_control_and_no_quantization(twin_dir, tmp_path):
    d = _copy(twin_dir, tmp_path, marker=True)
    config = {"models": {"g": _local(d)}, "matched_controls": True}
    add_matched_controls(config)
    assert list(config["models"]) == ["g"]  # a matched control stands beside trained models only
    with pytest.raises(PowerlensError, match="'g' has random weights"):
        check_models({"models": {"g": _local(d)}, "quantization": {"models": ["g"]}})


def test_a_folder_without_marker_stays_trained(twin_dir, tmp_path):
    man = fetch_model("m", _local(_copy(twin_dir, tmp_path)), tmp_path / "run" / "manifest.json")
    assert man["random_weights"] is False and man["weights_label"] == "trained weights"


def test_a_copied_controls_marker_keeps_its_label(twin_dir, tmp_path):
    d = _copy(twin_dir, tmp_path, marker=True)
    (d / sources.TWIN_MARKER).write_text(json.dumps({"weights_label": "random layer weights"}))
    assert sources.marker_label(d) == "random layer weights"
    (d / sources.TWIN_MARKER).write_text("<script>not json")  # unreadable: still random, never "trained"
    assert sources.marker_label(d) == "random weights"


# ------------------------------------------------------------------ 2. config and weights disagree
def test_config_with_fewer_layers_than_the_weights_is_refused(twin_dir, tmp_path):
    d = _copy(twin_dir, tmp_path)
    _edit_config(d, n_layer=1)
    with pytest.raises(PowerlensError) as e:
        fetch_model("cut", _local(d), tmp_path / "run" / "manifest.json")
    assert "1 layer(s)" in e.value.problem and "transformer.h.0 to transformer.h.1" in e.value.problem
    assert "dropped" in e.value.problem and "config.json" in e.value.fix
    with pytest.raises(PowerlensError, match="describes a model of 1 layer"):
        check_models({"models": {"g": _local(d)}})  # at DAG time, before any job
    with pytest.raises(PowerlensError, match=r"has no place for .*transformer\.h\.1\..*; layer transformer\.h\.1\)"):
        from_pretrained_checked(transformers.AutoModel, d, "m", "FIX")  # the load refuses it too


def test_unknown_extra_tensors_are_refused_at_load(twin_dir, tmp_path):
    d = _copy(twin_dir, tmp_path)
    st = load_file(str(d / "model.safetensors"))
    for extra in ("transformer.h.0.attn.extra", "junk.weight"):
        save_file({**st, extra: torch.zeros(3)}, str(d / "model.safetensors"), metadata={"format": "pt"})
        with pytest.raises(PowerlensError, match=f"has no place for \\({extra}[;)]") as e:
            from_pretrained_checked(transformers.AutoModelForCausalLM, d, "m", "FIX")
        assert e.value.fix == "FIX"


def test_the_heads_a_base_model_leaves_out_still_load(tmp_path):
    rec = fetch_model("b", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "m.json")
    model = from_pretrained_checked(transformers.AutoModel, rec["path"], "b", "FIX", unused=("pooler",))
    assert model.config.model_type == "bert"  # its MLM head (cls.*) is a head, not a misplaced tensor


# ------------------------------------------------------------------ 4. a shape mismatch is shown
def test_mismatched_shapes_are_named_with_both_shapes(twin_dir, tmp_path):
    d = _copy(twin_dir, tmp_path)
    _edit_config(d, vocab_size=400)
    with pytest.raises(PowerlensError) as e:
        from_pretrained_checked(transformers.AutoModel, d, "m", "FIX")
    assert "wte.weight: files (320, 32), config (400, 32)" in e.value.problem
    assert "above report" not in e.value.problem and e.value.fix == "FIX"


# ------------------------------------------------------------------ 3. token ids beyond the embedding
def test_token_ids_beyond_the_embedding_are_refused_at_fetch_and_load(twin_dir, tmp_path):
    d = _copy(twin_dir, tmp_path)
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["model"]["vocab"]["powerlens"] = 5000
    (d / "tokenizer.json").write_text(json.dumps(tj))
    with pytest.raises(PowerlensError) as e:
        fetch_model("m", _local(d), tmp_path / "run" / "manifest.json")
    assert "ids up to 5000" in e.value.problem and "320 rows" in e.value.problem and "'powerlens' = 5000" in \
        e.value.problem
    assert not (tmp_path / "run" / "manifest.json").exists()
    with pytest.raises(PowerlensError, match="ids up to 5000"):
        sources.load_tokenizer({"path": str(d), "model": "m"})  # a manifest written before the check
    from powerlens.api import Lens

    with pytest.raises(PowerlensError, match="ids up to 5000 but the model's embedding has 320 rows"):
        Lens.from_pretrained(d)  # before Lens.dynamics could end in an IndexError


# ------------------------------------------------------------------ 5. untied model without its LM head
def _untied_llama(tmp_path, keep_head: bool):
    rec = fetch_model("l", {"arch": "llama", "source": "random", "twin_of": "tiny-llama"}, tmp_path / "t" / "m.json")
    d = tmp_path / f"untied-{keep_head}"
    shutil.copytree(rec["path"], d)
    (d / sources.TWIN_MARKER).unlink()
    _edit_config(d, tie_word_embeddings=False)
    if keep_head:
        st = load_file(str(d / "model.safetensors"))
        save_file({**st, "lm_head.weight": st["model.embed_tokens.weight"].clone()}, str(d / "model.safetensors"),
                  metadata={"format": "pt"})
    return {"arch": "llama", "source": "local", "path": str(d)}


def test_untied_model_without_lm_head_is_refused_at_fetch(tmp_path):
    with pytest.raises(PowerlensError) as e:
        fetch_model("l", _untied_llama(tmp_path, keep_head=False), tmp_path / "run" / "manifest.json")
    assert "no lm_head.weight" in e.value.problem and "tie_word_embeddings" in e.value.fix
    man = fetch_model("l", _untied_llama(tmp_path, keep_head=True), tmp_path / "run2" / "manifest.json")
    assert man["weights_label"] == "trained weights"


# ------------------------------------------------------------------ 6. a GGUF whose header lies
@pytest.mark.parametrize("kw,said", [({"width": 64}, "llama.embedding_length 64 but tensor token_embd.weight"),
                                     ({"width": 16, "blocks": 3}, "llama.block_count 3 but its tensors hold 1"),
                                     ({"width": 16, "n_tokens": 12}, "12 tokens but token_embd.weight has 8 rows")])
def test_gguf_header_contradicting_its_tensors_is_named_as_the_files_fault(tmp_path, kw, said):
    from powerlens.models.sources.gguf import describe

    with pytest.raises(PowerlensError) as e:
        describe(write_gguf(tmp_path / "m.gguf", **kw), "g", given_path=True)
    assert said in e.value.problem and "inconsistent" in e.value.problem
    assert "accelerate" not in e.value.fix and "another GGUF file" in e.value.fix
    assert describe(write_gguf(tmp_path / "ok.gguf", 16), "g")["n_tensors"] == 2  # a consistent header passes


def test_the_fetch_step_command_refuses_with_exit_2_and_no_traceback(twin_dir, tmp_path):
    import subprocess
    import sys

    d = _copy(twin_dir, tmp_path)
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["model"]["vocab"]["powerlens"] = 5000
    (d / "tokenizer.json").write_text(json.dumps(tj))
    r = subprocess.run([sys.executable, "-m", "powerlens", "fetch_model", "--name", "m", "--entry",
                        json.dumps(_local(d)), "--out", str(tmp_path / "run" / "manifest.json"), "--lock", ""],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "ERROR: model 'm'" in r.stderr and "ids up to 5000" in r.stderr and "  fix: " in r.stderr

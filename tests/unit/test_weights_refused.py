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
    (d / sources.TWIN_MARKER).write_text(json.dumps({"weights_label": "random attention weights"}))
    assert sources.marker_label(d) == "random attention weights"
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


# ------------------------------------------------------------------ #69 (7): one rule for which files are the model


def test_a_stray_safetensors_beside_the_model_is_read_by_no_reader(twin_dir, tmp_path):
    """#69: with a `zz-backup.safetensors` (other weights) beside `model.safetensors`, inspect's direct read took
    the backup's W_V (|lambda_1| 147.2) while Lens, fetch and extract read the model (1.472). Every reader now takes
    the files transformers loads (coverage.weight_files)."""
    import json as _json

    from powerlens.models.direct import direct_value_output
    from powerlens.models.sources.coverage import safetensors_shapes, weight_files

    d = _copy(twin_dir, tmp_path)
    tensors = load_file(d / "model.safetensors")
    save_file({k: v * 100 for k, v in tensors.items()}, d / "zz-backup.safetensors")
    assert weight_files(d) == [d / "model.safetensors"]
    cfg = _json.loads((d / "config.json").read_text())
    got = direct_value_output(d, "gpt2", cfg)
    (d / "zz-backup.safetensors").unlink()
    want = direct_value_output(d, "gpt2", cfg)
    import numpy as np

    assert got is not None and len(got[0]) == len(want[0])
    assert all(np.array_equal(a, b) for pa, pb in zip(got[0], want[0]) for a, b in zip(pa, pb))  # (W_V, W_O)
    assert set(safetensors_shapes(d)) == set(tensors)


def test_shards_without_their_index_are_refused_naming_the_files(twin_dir, tmp_path):
    """#69: 8 shards without index (one missing) passed the fetch as "trained weights"."""
    d = _copy(twin_dir, tmp_path)
    tensors = load_file(d / "model.safetensors")
    (d / "model.safetensors").unlink()
    names = sorted(tensors)
    for i in range(2):
        save_file({k: tensors[k] for k in names[i::2]}, d / f"model-0000{i + 1}-of-00002.safetensors")
    with pytest.raises(PowerlensError) as e:
        fetch_model("t", _local(d), tmp_path / "m.json")
    assert "holds no model.safetensors (nor model.safetensors.index.json)" in e.value.problem
    assert "model-00001-of-00002.safetensors" in e.value.problem
    index = {"weight_map": {k: f"model-0000{names.index(k) % 2 + 1}-of-00002.safetensors" for k in names}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    (d / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(PowerlensError, match=r"names 2 weight shard\(s\); 1 missing .*model-00002-of-00002"):
        fetch_model("t", _local(d), tmp_path / "m.json")


def test_an_integer_re_save_is_refused_as_codes_not_weights(twin_dir, tmp_path):
    """#69: an int8 re-save passed inspect, fetch and extract as "trained weights" (|lambda_1| 246 from codes)."""
    d = _copy(twin_dir, tmp_path)
    tensors = load_file(d / "model.safetensors")
    save_file({k: (v * 50).round().to(torch.int8) if k.endswith(".weight") and v.dim() == 2 else v
               for k, v in tensors.items()}, d / "model.safetensors")
    with pytest.raises(PowerlensError, match="holds I8 integers, not floating-point weights") as e:
        fetch_model("t", _local(d), tmp_path / "m.json")
    assert "floating-point weights" in e.value.fix


def _f64_header(d):
    """The first F32 tensor's header entry says F64 over the same F32 bytes."""
    raw = (d / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    head = json.loads(raw[8:8 + n])
    k = next(k for k, v in head.items() if k != "__metadata__" and v["dtype"] == "F32")
    head[k]["dtype"] = "F64"
    hb = json.dumps(head).encode()
    hb += b" " * (-len(hb) % 8)
    (d / "model.safetensors").write_bytes(len(hb).to_bytes(8, "little") + hb + raw[8 + n:])


@pytest.mark.parametrize("case,says", [
    ({"n_head": 5}, "width 32 is not a multiple of its 5 attention heads"),
    ({"n_head": 0}, "n_head is 0, not a positive whole number"),
    ({"n_head": 4.0}, "n_head is 4.0, not a positive whole number"),
    ({"n_layer": True}, "n_layer is True, not a positive whole number"),
    ("f64", "is declared F64 of shape"),
])
def test_fetch_and_inspect_refuse_what_the_loader_cannot_build(twin_dir, tmp_path, capsys, case, says):
    """#69: heads 5 over width 32, heads 0 and a header's F64 over F32 data passed the fetch as "trained
    weights"; extract then blamed the user's files ("changed after the fetch step"), and inspect ended in
    AssertionError, ZeroDivisionError or SafetensorError tracebacks, or printed "heads=4.0"."""
    from powerlens.cli import main

    d = _copy(twin_dir, tmp_path)
    _f64_header(d) if case == "f64" else _edit_config(d, **case)
    with pytest.raises(PowerlensError, match=says):
        fetch_model("t", _local(d), tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()
    with pytest.raises(SystemExit) as e:
        main(["inspect", str(d)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err and "Traceback" not in err


def test_albert_groups_beyond_its_layers_or_zero_are_refused(tmp_path):
    rec = fetch_model("a", {"arch": "albert", "source": "random", "twin_of": "tiny-albert", "seed": 1},
                      tmp_path / "a.json")
    for groups, says in ((0, "num_hidden_groups is 0, not a positive whole number"),
                         (99, "99 ALBERT layer groups for")):
        d = tmp_path / f"albert{groups}"
        shutil.copytree(rec["path"], d)
        (d / sources.TWIN_MARKER).unlink()
        _edit_config(d, num_hidden_groups=groups)
        with pytest.raises(PowerlensError, match=says):
            fetch_model("t", {"arch": "albert", "source": "local", "path": str(d)}, tmp_path / "m.json")


def test_a_load_that_fails_on_recorded_files_does_not_say_they_changed(twin_dir, tmp_path, monkeypatch):
    """#69: extract said "these are your model's own files and they changed after the fetch step recorded
    them", which was false: the files matched their record; the fault was their content."""
    import transformers

    from powerlens.models.sources.loading import load_model

    d = _copy(twin_dir, tmp_path)
    man = fetch_model("t", _local(d), tmp_path / "m.json")

    def fails(*a, **k):
        raise ValueError("cannot build")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", fails)
    with pytest.raises(PowerlensError) as e:
        load_model(man)
    assert "changed after the fetch step" not in e.value.fix and "sha256 match" in e.value.fix


def test_inspect_labels_a_run_folder_only_for_the_files_the_run_recorded(twin_dir, tmp_path):
    """#69: inspect on a run's model folder labelled new weights "trained" without checking the recorded sha256,
    and kept "trained" after the manifest's path was pointed at a twin's folder."""
    from powerlens.models.locate import weights_label_of

    d = _copy(twin_dir, tmp_path)
    run = tmp_path / "results" / "r" / "m"
    fetch_model("m", _local(d), run / "manifest.json")
    assert weights_label_of(run) == "trained weights"  # the guard: the recorded files
    man = json.loads((run / "manifest.json").read_text())
    man["path"] = str(twin_dir)  # pointed at a twin's folder: its marker decides
    (run / "manifest.json").write_text(json.dumps(man))
    assert weights_label_of(run) == "random weights"
    man["path"] = str(d)
    (run / "manifest.json").write_text(json.dumps(man))
    tensors = load_file(d / "model.safetensors")
    save_file({k: v * 2 for k, v in tensors.items()}, d / "model.safetensors")  # saved again
    with pytest.raises(PowerlensError, match="not the files the run's fetch step recorded") as e:
        weights_label_of(run)
    assert "--forcerun fetch_model" in e.value.fix

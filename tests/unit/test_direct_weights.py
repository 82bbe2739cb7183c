"""W_V and W_O read straight from safetensors (powerlens.models.direct, issue #54 item 4) for every architecture:
the same F, V and W_O as the built model gives (the transformers path), and `powerlens inspect` without torch or
transformers. Tiny random twins saved with their heads (so the names carry a prefix: ``bert.``, ``transformer.``,
``model.``), Llama and Gemma 3 with grouped-query attention and d_head != d / H."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import transformers

from powerlens.models.adapters import get_adapter
from powerlens.models.archs import TINY_MODELS

NAMES = ["tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-llama", "tiny-gemma3"]


def _save(name, folder):
    """A tiny model of ``name`` with its LM head, random float32 weights, saved by save_pretrained (safetensors)."""
    import torch

    cfg = TINY_MODELS[name].hf_config()
    if name == "tiny-llama":
        cfg.head_dim = 12  # H d_head = 48 != d = 32; 2 key-value groups for 4 heads
    torch.manual_seed(1)
    model = getattr(transformers, get_adapter(TINY_MODELS[name].arch).head_class).from_config(cfg).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return cfg


@pytest.mark.parametrize("name", NAMES)
def test_direct_matrices_equal_the_built_models(name, tmp_path, monkeypatch):
    import powerlens.models.direct as direct
    from powerlens.api import layer_matrices_of

    cfg = _save(name, tmp_path)
    if name in ("tiny-llama", "tiny-gemma3"):  # what this test is for: GQA, d_head != d / H
        H, Hkv, dh = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        assert Hkv < H and H * dh != cfg.hidden_size
    calls, real = [], direct.direct_value_output
    monkeypatch.setattr(direct, "direct_value_output", lambda *a: calls.append(real(*a)) or calls[-1])
    _, got, lmap, heads = layer_matrices_of(tmp_path)
    assert len(calls) == 1 and calls[0] is not None  # the direct path gave the matrices
    monkeypatch.setattr(direct, "direct_value_output", lambda *a: None)  # the model is built instead
    _, want, lmap_b, heads_b = layer_matrices_of(tmp_path)
    assert (lmap, heads) == (lmap_b, heads_b) and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.F.shape == w.F.shape == (cfg.hidden_size,) * 2
        assert g.V.shape == w.V.shape and g.W_O.shape == w.W_O.shape
        assert np.abs(g.F - w.F).max() <= 1e-10 * max(1.0, np.abs(w.F).max()), name
        assert np.array_equal(g.V, w.V) and np.array_equal(g.W_O, w.W_O)
        assert g.gain is None and w.gain is None and g.post_gain is None and w.post_gain is None


@pytest.mark.parametrize("name", NAMES)
def test_inspect_reads_each_architecture_without_torch(name, tmp_path, monkeypatch):
    """`powerlens inspect` in a subprocess in which importing torch or transformers raises prints the table the
    built model gives."""
    import powerlens.models.direct as direct
    from powerlens.cli import main

    cfg = _save(name, tmp_path / "model")
    blocked = tmp_path / "blocked"
    for mod in ("torch", "transformers"):
        (blocked / mod).mkdir(parents=True)
        (blocked / mod / "__init__.py").write_text(f'raise ImportError("{mod} imported")\n')
    r = subprocess.run([sys.executable, "-m", "powerlens", "inspect", str(tmp_path / "model"), "--threads", "1",
                        "--csv", str(tmp_path / "direct.csv")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked), *filter(None, [
                           os.environ.get("PYTHONPATH")])])})
    arch = TINY_MODELS[name].arch
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"Lens({arch}, d_model={cfg.hidden_size}, layers={len(get_adapter(arch).layer_map(cfg))}" in r.stdout
    assert "|lambda_1|" in r.stdout
    monkeypatch.setattr(direct, "direct_value_output", lambda *a: None)  # the model is built instead
    main(["inspect", str(tmp_path / "model"), "--threads", "1", "--csv", str(tmp_path / "built.csv")])
    a, b = pd.read_csv(tmp_path / "direct.csv"), pd.read_csv(tmp_path / "built.csv")
    assert list(a.columns) == list(b.columns) and len(a) == len(b) == cfg.num_hidden_layers
    for c in a.columns:
        if a[c].dtype.kind == "f":
            assert np.allclose(a[c], b[c], rtol=1e-10, atol=1e-12), c
        else:
            assert a[c].tolist() == b[c].tolist(), c

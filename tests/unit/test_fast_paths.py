"""The faster paths of issue 54 give the numbers of the paths they replaced (bit for bit where the BLAS runs one
kernel for both; to float32's round-off on any branch): the LM head at the counted positions only, the unsteered
reference's probabilities made once, one parse of a GGUF header."""

import pytest
import torch
import transformers

from powerlens.analysis.steering import measure
from powerlens.models.adapters import get_adapter
from powerlens.models.archs import TINY_MODELS

from ..conftest import write_gguf


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-albert", "tiny-gpt2", "tiny-gpt-neo", "tiny-llama", "tiny-gemma3"])
def test_the_head_at_the_counted_positions_is_those_rows_of_the_whole_head(name):
    arch = TINY_MODELS[name].arch
    ad = get_adapter(arch)
    torch.manual_seed(0)
    model = getattr(transformers, ad.head_class).from_config(TINY_MODELS[name].hf_config()).eval()
    y = torch.randn(3, 7, model.config.hidden_size)  # (B, T, d): a last layer's output
    rows = torch.rand(3, 7) < 0.6  # (B, T): the counted positions
    with torch.no_grad():
        h_all, whole = ad.tail(model, y, True)
        h_rows, some = ad.tail(model, y, True, rows=rows)
    assert whole.shape[:2] == (3, 7) and some.shape == (int(rows.sum()), whole.shape[-1])
    assert torch.equal(h_rows, h_all)  # the last hidden state is every position's
    # the same rows to float32's round-off (the extraction proof's 1e-5, relative to the logits' scale): bit-equal
    # on MKL's AUTO branch here, not under MKL_CBWR=COMPATIBLE, where a product's kernel follows its row count
    scale = float(whole.abs().max())
    assert torch.allclose(some, whole[rows], rtol=0, atol=1e-5 * scale)
    # the check can fail: a neighbouring position's rows are not these
    assert not torch.allclose(some, whole[rows.roll(1, dims=1)], rtol=0, atol=1e-5 * scale)


def test_the_kept_reference_probabilities_give_the_kl_of_the_recomputed_ones():
    g = torch.Generator().manual_seed(1)
    ref_logp = torch.log_softmax(torch.randn(5, 300, generator=g), dim=-1)
    logits = torch.randn(5, 300, generator=g)
    ref = measure.Reference(ref_logp)
    acc = {"p_target": 0.0, "kl": 0.0}
    measure._add_lm_metrics(acc, logits, 3, ref)
    logp = torch.log_softmax(logits, dim=-1)
    assert acc["kl"] == float((ref_logp.exp() * (ref_logp - logp)).sum(dtype=torch.float64))  # the old formula
    assert ref.p is ref.p and torch.equal(ref.p, ref_logp.exp())  # made once, kept
    assert acc["kl"] > 0 and acc["p_target"] == float(logp[:, 3].exp().sum())
    acc2 = {"p_target": 0.0, "kl": 0.0}
    measure._add_lm_metrics(acc2, logits, 3, ref)  # a second steered pass reads the same reference unchanged
    assert acc2 == acc and torch.equal(ref.logp, ref_logp)


def test_one_reader_parses_a_gguf_once_and_hands_out_copies_of_its_header(tmp_path, monkeypatch):
    import gguf
    from transformers import modeling_gguf_pytorch_utils as loader

    from powerlens.models.sources.gguf import one_reader

    path = write_gguf(tmp_path / "m.gguf", 16)
    link = tmp_path / "alone.gguf"
    link.symlink_to(path)
    parses = []
    cls = gguf.GGUFReader

    class Counting(cls):
        def __init__(self, *a, **k):
            parses.append(a[0])
            super().__init__(*a, **k)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    before = loader.load_gguf_checkpoint
    with one_reader():
        r1, r2 = gguf.GGUFReader(str(path)), gguf.GGUFReader(str(link))  # the same file by another name
        assert r1 is r2 and len(parses) == 1
        h1 = loader.load_gguf_checkpoint(str(link))
        h1["config"]["changed by a caller"] = 1  # transformers pops keys from what it is handed
        h2 = loader.load_gguf_checkpoint(str(path))
        assert "changed by a caller" not in h2["config"] and h2["tokenizer"] == h1["tokenizer"]
        assert len(parses) == 1  # the header conversions read the one reader
    assert gguf.GGUFReader is Counting and loader.load_gguf_checkpoint is before  # both restored
    gguf.GGUFReader(str(path))
    assert len(parses) == 2  # outside the block every call parses again


def _python(code: str, **env) -> str:
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    return subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_dynamics_step_asks_for_huge_pages_before_torch_is_imported():
    """torch reads THP_MEM_ALLOC_ENABLE once, at its first allocation: the dynamics step must set it before
    anything imports torch, and a user's own setting stands."""
    code = ("import os, sys\n"
            "import powerlens.cli, powerlens.pipeline.steps.dynamics\n"
            "print('torch' in sys.modules)\n"
            "from powerlens.core.runtime import set_threads\n"
            "set_threads(1, huge_pages={hp})\n"
            "print(os.environ.get('THP_MEM_ALLOC_ENABLE'), 'torch' in sys.modules)\n")
    assert _python(code.format(hp=True)).split() == ["False", "1", "True"]
    assert _python(code.format(hp=False)).split() == ["False", "None", "True"]  # other steps: untouched
    assert _python(code.format(hp=True), THP_MEM_ALLOC_ENABLE="0").split() == ["False", "0", "True"]
    import inspect

    from powerlens.pipeline.steps import dynamics

    src = inspect.getsource(dynamics.dynamics)
    assert src.index("set_threads(threads, huge_pages=True)") < src.index("import torch")


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_an_unpadded_law_step_without_its_mask_gives_the_masked_steps_numbers(heads):
    """The theory's law steps pass no padding mask: the kept all-visible mask, no masking per step, and one query
    head per group copied instead of repeat_interleave(1): the same bits as the all-ones padding mask."""
    import numpy as np

    from powerlens.analysis.theory.synthetic import synthetic_layer
    from powerlens.models.attention import _ALL_VISIBLE, attention_only_step, visible_keys

    rng = np.random.default_rng(3)
    lw = synthetic_layer(rng.standard_normal((8, 8)), heads, rng, "softmax", qk_scale=3.0)
    x = torch.as_tensor(rng.standard_normal((5, 6, 8)))  # (B, T, d) float64
    ones = torch.ones(5, 6, dtype=torch.long)
    kept = visible_keys(6, False, None, None)
    assert kept is visible_keys(6, False, None, None) and kept is _ALL_VISIBLE[(6, "cpu")] and bool(kept.all())
    assert visible_keys(6, True, None, None) is not kept  # a causal mask is built, not the kept one
    for _ in range(3):
        a = attention_only_step(x, lw, heads, False, ones, "l2")
        assert torch.equal(a, attention_only_step(x, lw, heads, False, None, "l2"))
        x = a
    # the check can fail: a mask that hides a key changes the step
    pad = ones.clone()
    pad[:, -1] = 0
    hidden = attention_only_step(x, lw, heads, False, pad, "l2")
    assert not torch.equal(hidden, attention_only_step(x, lw, heads, False, None, "l2"))

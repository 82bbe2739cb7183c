"""Issue #54: the Monte Carlo null's scratch buffers (:func:`powerlens.analysis.nulls.reusing_scratch`) change where
the (tokens, draws) blocks live, not what they hold: the sums, the alignments and the random subspaces are the
same bits inside the scratch as in fresh memory, and a block handed to a caller is never overwritten under it."""

import numpy as np
import pytest
import torch

from powerlens.analysis.dynamics.probes import States, Stream, null_sums, subset_weights
from powerlens.analysis.nulls import random_subspaces, subspace_alignments
from powerlens.core.scratch import Scratch, reusing_scratch, scratch


def _states(S=3, n=120, d=24, seed=0, dtype=torch.float32):
    rng = np.random.default_rng(seed)
    x = [torch.as_tensor(rng.standard_normal((n, d)), dtype=dtype) for _ in range(S + 1)]
    m = [torch.as_tensor(rng.standard_normal((n, d)), dtype=dtype) for _ in range(S)]
    return States(x=x, mid=m, prompt=np.arange(n) // 4)


def _null(states, need, dims):
    W = subset_weights(states.prompt, ["all", "third0", "third1", "third2"])
    streams = {}
    return null_sums(states, need, dims, lambda r: streams.setdefault(r, Stream(24, r, 3)), W)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_null_sums_in_the_scratch_are_the_sums_in_fresh_memory_bit_for_bit(dtype):
    states = _states(dtype=dtype)
    S = states.depths
    # draws that cross the 4000-draw chunks at different places per depth (column slices of a chunk), both
    # dimensions, every probe of a real forward pass
    need = {0: {"layer": (0, 9000), "attn": (0, 4500), "ffn": (100, 4100), "layer_M": (0, 9000)},
            1: {"layer": (3000, 8000), "attn": (0, 9000), "ffn": (0, 9000)},
            2: {"layer": (0, 9000), "first": (0, 6000), "ffn": (4000, 8001)}}
    dims = {0: {"layer": 2, "attn": 2, "ffn": 1, "layer_M": 2}, 1: {"layer": 1, "attn": 2, "ffn": 2},
            2: {"layer": 2, "first": 2, "ffn": 1}}
    fresh = _null(states, need, dims)
    with reusing_scratch() as work:
        kept = _null(states, need, dims)
        assert work._bufs and work._free  # the scratch was used: buffers made, alignment blocks handed back
    assert scratch() is None  # closed on leaving
    assert fresh.keys() == kept.keys() == set(range(S))
    for t in fresh:
        assert fresh[t].keys() == kept[t].keys()
        for k in fresh[t]:
            assert fresh[t][k].shape == kept[t][k].shape
            assert np.array_equal(fresh[t][k], kept[t][k]), (t, k)


@pytest.mark.parametrize("r", [1, 2, 3])
def test_alignments_in_the_scratch_are_the_callers_own_and_equal_fresh_ones(r):
    rng = np.random.default_rng(r)
    x = torch.as_tensor(rng.standard_normal((50, 24)))
    U1 = torch.as_tensor(random_subspaces(24, r, 300, rng))
    U2 = torch.as_tensor(random_subspaces(24, r, 300, rng))
    want1, want2 = subspace_alignments(x, U1, r), subspace_alignments(x, U2, r)
    with reusing_scratch() as work:
        got1 = subspace_alignments(x, U1, r)
        got2 = subspace_alignments(x, U2, r)  # the product's buffer is reused: got1 must not change
        assert torch.equal(got1, want1) and torch.equal(got2, want2)
        work.give(got1)
        got3 = subspace_alignments(x, U2, r)  # takes got1's block back and overwrites it
        assert got3.data_ptr() == got1.data_ptr() and torch.equal(got3, want2)
        assert not torch.equal(got1, want1)  # the check could fail: a given-back block is the next owner's


@pytest.mark.parametrize("r", [1, 2])
def test_random_subspaces_in_the_scratch_are_the_same_draws_and_not_shared(r):
    a = np.random.default_rng([7, r])
    b = np.random.default_rng([7, r])
    want = [random_subspaces(30, r, 500, a) for _ in range(3)]
    with reusing_scratch():
        got = [random_subspaces(30, r, 500, b) for _ in range(3)]
    for w, g in zip(want, got):
        assert g.shape == (30, 500 * r) and np.array_equal(w, g)
    assert not np.array_equal(got[0], got[1])  # each call's own array, not the Gaussians' kept buffer
    Q = got[2].reshape(30, 500, r).transpose(1, 0, 2)  # (R, d, r): orthonormal bases
    assert np.allclose(np.einsum("kdi,kdj->kij", Q, Q), np.eye(r), atol=1e-12)


def test_a_scratch_grows_to_the_largest_request_and_pools_only_whole_blocks():
    work = Scratch()
    small = work.torch("a", (3, 4))
    big = work.torch("a", (10, 10))
    assert big.shape == (10, 10) and work._bufs[("a", torch.float64)].numel() == 100
    again = work.torch("a", (2, 5))
    assert again.data_ptr() == big.data_ptr()  # served from the grown buffer
    assert small.shape == (3, 4)
    block = work.take((4, 5))
    work.give(block)
    assert work.take((4, 5)) is block and work.take((4, 5)) is not block  # one block, taken once
    work.give(block[:2])  # a view: its base may still be read, so it is not pooled
    work.give(block.t())  # not contiguous
    assert not work._free.get(((2, 5), torch.float64)) and not work._free.get(((5, 4), torch.float64))


def test_a_steered_pass_lm_sums_in_the_scratch_equal_those_in_fresh_memory():
    from powerlens.analysis.steering import measure

    g = torch.Generator().manual_seed(4)
    ref = measure.Reference(torch.log_softmax(torch.randn(9, 5000, generator=g), dim=-1))
    batches = [torch.randn(9, 5000, generator=g), torch.randn(4, 5000, generator=g)]  # two sizes: a grown buffer
    fresh, kept = {"p_target": 0.0, "kl": 0.0}, {"p_target": 0.0, "kl": 0.0}
    for logits in batches:
        r = measure.Reference(ref.logp[: logits.shape[0]])
        measure._add_lm_metrics(fresh, logits, 7, r)
        with reusing_scratch() as work:
            logp = measure._add_lm_metrics(kept, logits, 7, r)
            assert logp.data_ptr() == work.torch("logp", tuple(logits.shape), torch.float32).data_ptr()
    assert fresh == kept and fresh["kl"] > 0
    with reusing_scratch():  # the unsteered pass (no reference) keeps its log-probabilities: fresh memory
        acc = {"p_target": 0.0, "kl": 0.0}
        a = measure._add_lm_metrics(acc, batches[0], 7, None)
        b = measure._add_lm_metrics(acc, batches[1], 7, None)
        assert torch.equal(a, torch.log_softmax(batches[0], dim=-1)) and a.data_ptr() != b.data_ptr()


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama", "tiny-gemma3"])
def test_the_linear_head_in_the_scratch_is_the_modules_product(name):
    import transformers

    from powerlens.models.adapters import get_adapter
    from powerlens.models.archs import TINY_MODELS

    ad = get_adapter(TINY_MODELS[name].arch)
    torch.manual_seed(0)
    model = getattr(transformers, ad.head_class).from_config(TINY_MODELS[name].hf_config()).eval()
    h = torch.randn(11, model.config.hidden_size)  # (n, d): normed rows
    with torch.no_grad():
        want = ad.head_logits(model, h)
        with reusing_scratch() as work:
            got = ad.head_logits(model, h)
            assert ("logits", torch.float32) in work._bufs  # written into the scratch
            assert torch.equal(got, want)
    with reusing_scratch() as work:  # with autograd on, the module itself runs (out= has no gradient)
        assert torch.equal(ad.head_logits(model, h).detach(), want) and not work._bufs


def test_a_scratch_opened_inside_an_open_one_is_that_one_and_outlives_the_inner_block():
    """Steering opens one scratch for all its passes and each pass opens its own: the pass's is the
    experiment's, so a buffer made in one pass is the same memory in the next (no new mapping per pass)."""
    assert scratch() is None
    with reusing_scratch() as outer:
        with reusing_scratch() as inner:
            assert inner is outer and scratch() is outer
            first = inner.torch("logits", (3, 5), torch.float32)
        assert scratch() is outer  # the inner block's end closes nothing
        with reusing_scratch() as again:
            assert again.torch("logits", (3, 5), torch.float32).data_ptr() == first.data_ptr()
    assert scratch() is None
    # the check can fail: two scratches opened one after the other are different, their buffers new memory
    with reusing_scratch() as a:
        pass
    with reusing_scratch() as b:
        assert b is not a

"""The prompt corpus: the shipped prompts, tokenised batches (specials and padding masked), token budgets."""

import numpy as np

from powerlens.core.corpus import batches, read_prompts


def test_shipped_corpus():
    from ..conftest import REPO

    prompts = read_prompts(REPO / "config/prompts.txt")
    assert len(prompts) >= 200 and len(set(prompts)) == len(prompts)
    lengths = [len(p.split()) for p in prompts]
    assert min(lengths) <= 3 and max(lengths) >= 30


def test_batches_mask_specials_and_padding():
    bs = batches([[5, 1, 2, 6], [5, 3, 6]], [[1, 0, 0, 1], [1, 0, 1]], batch_size=2, pad_id=0)
    (b,) = bs
    assert b.ids.tolist() == [[5, 3, 6, 0], [5, 1, 2, 6]]  # length-sorted
    assert b.mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert b.stat_mask.tolist() == [[False, True, False, False], [False, True, True, False]]
    assert b.prompt_index.tolist() == [1, 0]  # each row's prompt in the corpus


def test_token_budget_bounds_the_padded_batch():
    """`dynamics.batch_tokens`: length-sorted batches hold at most batch_size rows and at most batch_tokens
    tokens once padded; a prompt longer than the budget goes alone; without a budget, prompts per batch only."""
    from powerlens.core.corpus import batch_groups

    rng = np.random.default_rng(0)
    lengths = [int(n) for n in rng.integers(5, 129, size=57)] + [300]
    groups = batch_groups(lengths, 16, 512)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        assert len(g) <= 16 and (len(g) * max(lengths[i] for i in g) <= 512 or len(g) == 1)
        assert [lengths[i] for i in g] == sorted(lengths[i] for i in g)
    assert [57] in groups
    plain = batch_groups(lengths, 16)
    assert [len(g) for g in plain] == [16, 16, 16, 10]
    padded = lambda gs: sum(len(g) * max(lengths[i] for i in g) for g in gs)  # noqa: E731
    assert padded(groups) < padded(plain)

"""Issue #54: the Monte Carlo null projects each state once per chunk of draws (a depth's output is the next depth's
input), probes reading the same pair of states share their sums, and counts are exact: the sums equal, bit for
bit, those of projecting every state at every depth afresh."""

import numpy as np
import torch

from powerlens.analysis.dynamics.probes import States, Stream, null_sums, probe_sums, subset_counts, subset_weights
from powerlens.analysis.nulls import counting_projections


def _states(S=4, n=90, d=16, seed=0, mid=False):
    rng = np.random.default_rng(seed)
    x = [torch.as_tensor(rng.standard_normal((n, d))) for _ in range(S + 1)]
    m = [torch.as_tensor(rng.standard_normal((n, d))) for _ in range(S)] if mid else None
    return States(x=x, mid=m, prompt=np.arange(n) // 3)


class Fresh(States):
    """The same states with no shared key: every depth projects its states afresh (the old way)."""

    def key(self, name, t):
        return (f"{name}@{t}", t)


def _run(states, W, S, probes, R=700):
    need = {t: {p: (0, R) for p in probes if p != "first" or t == S - 1} for t in range(S)}
    dims = {t: {p: 1 for p in need[t]} for t in range(S)}
    streams = {}
    with counting_projections() as count:
        got = null_sums(states, need, dims, lambda r: streams.setdefault(r, Stream(16, r, 5)), W)
    return got, count.calls


def test_subset_counts_equal_the_float64_product_bit_for_bit():
    rng = np.random.default_rng(1)
    W = subset_weights(rng.integers(0, 30, 500), ["all", "third0", "third1", "third2"])
    flags = torch.as_tensor(rng.random((500, 300)) > rng.random((500, 300)))
    assert torch.equal(subset_counts(W, flags), W @ flags.double())


def test_each_state_is_projected_once_and_the_sums_do_not_change():
    S = 4
    for mid, probes in ((False, ("layer", "layer_M", "layer_Ft", "first")),
                        (True, ("layer", "layer_M", "layer_Ft", "attn", "ffn", "first"))):
        st = _states(S=S, mid=mid)
        W = subset_weights(st.prompt, ["all", "third0", "third1", "third2"])
        got, calls = _run(st, W, S, probes)
        ref, ref_calls = _run(Fresh(x=st.x, mid=st.mid, prompt=st.prompt), W, S, probes)
        # one chunk of draws: x(0..S) once each (+ mid(t) per depth), against two or three per depth afresh
        assert calls == S + 1 + (S if mid else 0)
        assert ref_calls == S * (3 if mid else 2) + 1  # + x(L) for "first": its own key afresh
        assert got.keys() == ref.keys()
        for t in got:
            assert got[t].keys() == ref[t].keys()
            for k in got[t]:
                assert np.array_equal(got[t][k], ref[t][k]), (t, k)


def test_the_default_key_is_the_chain_and_probes_of_one_pair_share_their_sums():
    """The default key says x(t + 1) is depth t's output, depth t + 1's input and, at the last depth, x(L) (a
    States whose depths do not chain overrides it, as the unit tests' Pair does); two probes of the same pair
    of states on the same block get the same sums."""
    st = _states(S=2)
    assert st.key("x1", 0) == st.key("x", 1) and st.key("x1", 1) == st.key("xL", 0) == ("x", 2)
    assert st.key("mid", 1) != st.key("x", 1)
    W = subset_weights(st.prompt, ["all"])
    blk = [(torch.as_tensor(np.eye(16)[:, :3]), 1)]
    one = probe_sums(st, 1, ("layer",), {"layer": blk}, W)
    again = probe_sums(st, 1, ("layer", "layer_M"), {"layer": blk, "layer_M": blk}, W)
    for q in ("out", "tilt", "inc", "dec"):
        assert np.array_equal(one[("layer", q)], again[("layer_M", q)])


def test_a_safetensors_header_is_written_in_one_order(tmp_path):
    """safetensors writes its metadata map in a per-process random order (two extractions of SmolLM2 differed by
    the order of "format" and "powerlens"): canonical_safetensors_header makes both orders the same bytes, and
    the file still loads with the same tensors and metadata."""
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    from powerlens.core.io import canonical_safetensors_header

    t = {"a": torch.arange(6, dtype=torch.float64).reshape(2, 3), "b": torch.ones(4)}
    meta = {"powerlens": json.dumps({"model": "m \"x\" é"}), "format": "pt"}
    files = []
    for order in (list(meta), list(meta)[::-1]):
        p = tmp_path / f"{order[0]}.safetensors"
        save_file(t, str(p), metadata=meta)
        raw = p.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        head = json.loads(raw[8:8 + n])
        head["__metadata__"] = {k: head["__metadata__"][k] for k in order}  # force this order
        text = json.dumps(head, separators=(",", ":"), ensure_ascii=False).encode()
        p.write_bytes(raw[:8] + text + b" " * (n - len(text)) + raw[8 + n:])
        canonical_safetensors_header(p)
        files.append(p.read_bytes())
        with safe_open(str(p), "pt") as f:
            assert f.metadata() == meta and torch.equal(f.get_tensor("a"), t["a"])
    assert files[0] == files[1]

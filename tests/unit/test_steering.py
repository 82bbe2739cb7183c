"""Steering: the stated bound, the reversible edit (byte-identical restore), and the baseline's footing."""

import numpy as np
import pytest
import torch

from powerlens.analysis import steering as st
from powerlens.core.errors import PowerlensError
from powerlens.models.sources import byte_tokenizer

from ..conftest import build_tiny


def layer_with_known_threshold(d=12, seed=0):
    """Symmetric F with lambda_1 = 1 on v_1, u orthogonal to range(F) (F u = 0, u^T F = 0). Then
    F' = F + alpha u u^T has eigenvalue alpha on u exactly: u is principal iff alpha > 1 (kappa > 1)."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    u = Q[:, -1]
    lam = np.concatenate([[1.0], rng.uniform(-0.6, 0.6, d - 2), [0.0]])
    F = Q @ np.diag(lam) @ Q.T
    W_V = rng.standard_normal((d, d)) + 2 * np.eye(d)
    return F, W_V, u



def _close(got: dict, want: dict, abs_: float, rel: float) -> None:
    """Two passes' measures equal within tolerances, key by key (the per-prompt sums as arrays)."""
    assert set(got) == set(want)
    for k, v in want.items():
        np.testing.assert_allclose(np.asarray(got[k], dtype=float), np.asarray(v, dtype=float), atol=abs_, rtol=rel,
                                   equal_nan=True, err_msg=k)

def test_u_principal_above_the_bound_and_not_below():
    F, W_V, u = layer_with_known_threshold()
    bound = st.kappa_bound(F, 1.0)
    assert bound >= 1.0  # the stated bound is sufficient, so it cannot undercut the exact threshold (1)
    for kappa in (bound, 1.5 * bound, 10 * bound, 1e3 * bound):
        chk = st.principal_check(F, W_V, u, kappa * 1.0)
        assert chk["u_principal"] and chk["cos_v1_u"] > 1 - 1e-9 and chk["lstsq_residual"] < 1e-9
    for kappa in (0.0, 0.5, 0.9):
        assert not st.principal_check(F, W_V, u, kappa)["u_principal"]


def test_bound_holds_on_generic_layers():
    rng = np.random.default_rng(3)
    for _ in range(5):
        d = 16
        F = rng.standard_normal((d, d)) / np.sqrt(d)
        W_V = rng.standard_normal((d, d))
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        lam1 = np.abs(np.linalg.eigvals(F)).max()
        chk = st.principal_check(F, W_V, u, st.kappa_bound(F, lam1) * lam1)
        assert chk["u_principal"] and chk["sin_v1_u"] <= st.DELTA


def _check_by_full_eig(F, W_V, u, alpha):
    """The check as it was computed before principal_eig: a full eig with eigenvectors."""
    z = st.rank1_z(W_V, u)
    vals, V = np.linalg.eig(F + alpha * np.outer(u, W_V.T @ z))
    o = np.argsort(-np.abs(vals), kind="stable")
    v1 = V[:, o[0]]
    cos = abs(np.vdot(v1, u)) / np.linalg.norm(v1)
    return cos, abs(vals[o[0]]) - abs(vals[o[1]]), abs(vals[o[1]]) / abs(vals[o[0]])


@pytest.mark.parametrize("case", ["generic", "complex pair", "real dominant"])
def test_principal_eig_gives_the_full_eigs_check(case):
    """Eigenvalues without eigenvectors plus inverse iteration give the numbers of a full eig: cos(v1, u)
    to 1e-9, gap and ratio to 1e-12, at every kappa of the default sweep (a dominant complex pair at kappa 0
    in the second case, a real dominant eigenvalue in the third)."""
    rng = np.random.default_rng(6)
    d = 96
    F = rng.standard_normal((d, d)) / np.sqrt(d)
    if case == "complex pair":
        F += 1.5 * np.outer(rng.standard_normal(d), rng.standard_normal(d)) / d
        R = np.array([[0.0, -2.5], [2.5, 0.0]])
        Q, _ = np.linalg.qr(rng.standard_normal((d, 2)))
        F += Q @ R @ Q.T
    elif case == "real dominant":
        q = rng.standard_normal(d)
        F += 3.0 * np.outer(q, q) / (q @ q)
    W_V = rng.standard_normal((d, d))
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    lam1 = np.abs(np.linalg.eigvals(F)).max()
    if case == "complex pair":
        vals = np.linalg.eigvals(F)
        top = vals[np.argsort(-np.abs(vals))[:2]]
        assert abs(top[0].imag) > 1 and abs(top[0] - top[1].conj()) < 1e-9  # the pair leads
    for kappa in (0, 1, 4, 16, 64, 256):
        chk = st.principal_check(F, W_V, u, kappa * lam1)
        cos, gap, ratio = _check_by_full_eig(F, W_V, u, kappa * lam1)
        assert chk["cos_v1_u"] == pytest.approx(cos, abs=1e-9), kappa
        assert chk["gap"] == pytest.approx(gap, abs=1e-12) and chk["ratio"] == pytest.approx(ratio, abs=1e-12)


def test_kappa_zero_checks_share_one_eigen_solve_of_F():
    """At alpha = 0, F' is F bit for bit: the check from a precomputed eig(F) is the check itself."""
    rng = np.random.default_rng(4)
    F = rng.standard_normal((24, 24)) / 5
    W_V = rng.standard_normal((24, 24))
    eig_of_F = st.principal_eig(F)
    for seed in range(3):
        u = rng.standard_normal(24)
        u /= np.linalg.norm(u)
        assert st.principal_check(F, W_V, u, 0.0, eig_of_F) == st.principal_check(F, W_V, u, 0.0)
    assert st.principal_check(F, W_V, u, 5.0, eig_of_F) == st.principal_check(F, W_V, u, 5.0)  # unused
    z = st.rank1_z(W_V, u)
    assert st.principal_check(F, W_V, u, 5.0, None, z) == st.principal_check(F, W_V, u, 5.0)  # z once per target


def test_singular_V_uses_least_squares():
    F, W_V, u = layer_with_known_threshold()
    W_V[:, 0] = 0.0  # singular
    z = st.rank1_z(W_V, u)
    assert np.isfinite(z).all()
    # the least-squares residual is u's part outside the range of V^T (V^T's first column is now zero)
    Q, _ = np.linalg.qr(W_V.T[:, 1:])
    outside = np.linalg.norm(u - Q @ (Q.T @ u))
    assert outside > 1e-3 and st.principal_check(F, W_V, u, 0.0)["lstsq_residual"] == pytest.approx(outside, rel=1e-9)


def test_the_checksum_is_the_sha256_of_each_name_and_tensors_bytes_in_name_order():
    """checksum hashes each tensor through its buffer: the digest of the recipe it records (name, then the
    tensor's C-order bytes, names sorted), for a transposed (non-contiguous) weight, an integer buffer, a 0-d
    tensor and float64, and a change of one element changes it."""
    import hashlib

    m = torch.nn.Module()
    m.b = torch.nn.Parameter(torch.arange(12, dtype=torch.float32).reshape(3, 4).t(), requires_grad=False)
    m.a = torch.nn.Parameter(torch.linspace(-1, 1, 5, dtype=torch.float64), requires_grad=False)
    m.register_buffer("ids", torch.arange(7, dtype=torch.int64))
    m.register_buffer("scale", torch.tensor(2.5))
    assert not m.b.is_contiguous()
    h = hashlib.sha256()
    for name in ("a", "b", "ids", "scale"):
        h.update(name.encode())
        h.update(getattr(m, name).detach().contiguous().numpy().tobytes())
    assert st.checksum(m) == h.hexdigest()
    with torch.no_grad():
        m.b[1, 2] += 1e-6
    assert st.checksum(m) != h.hexdigest()


@pytest.mark.parametrize("name,arch", [("tiny-gpt2", "gpt2"), ("tiny-bert", "bert"), ("tiny-albert", "albert"),
                                        ("tiny-gpt-neo", "gpt_neo")])
def test_edit_is_reversible_and_is_the_rank1_change(name, arch):
    model = build_tiny(name, torch.float64)
    from powerlens.models.adapters import ADAPTERS

    w = ADAPTERS[arch].extract(model)
    before = st.checksum(model)
    d = w.d_model
    rng = np.random.default_rng(0)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    W_V = w.layer(w.n_layers - 1).W_V.numpy()
    z = st.rank1_z(W_V, u)
    with st.rank1_output_edit(model, arch, u, z, scale=7.0):
        assert st.checksum(model) != before
        w2 = ADAPTERS[arch].extract(model)
        dF = w2.F(w2.n_layers - 1).numpy() - w.F(w.n_layers - 1).numpy()
        assert np.allclose(dF, 7.0 * np.outer(u, u), atol=1e-9)  # F' = F + alpha u u^T
    assert st.checksum(model) == before  # byte-identical restore
    with pytest.raises(RuntimeError):
        with st.rank1_output_edit(model, arch, u, z, scale=3.0):
            raise RuntimeError("boom")
    assert st.checksum(model) == before  # restored on error too


def test_split_target_token_is_refused():
    model = build_tiny("tiny-gpt2")
    tok = byte_tokenizer("gpt2")
    with pytest.raises(PowerlensError, match="split by the tokenizer"):
        st.target_vector(model, tok, "gpt2", "embedding", "the")
    u, tid = st.target_vector(model, tok, "gpt2", "embedding", "e")
    assert tid == tok.convert_tokens_to_ids("e") and abs(np.linalg.norm(u) - 1) < 1e-12


def test_steering_step_baseline_on_same_tokens(tmp_path):
    from powerlens.pipeline.steps.extract import extract
    from powerlens.pipeline.steps.fetch_model import fetch_model
    from powerlens.pipeline.steps.spectra import spectra
    from powerlens.pipeline.steps.steering import steering

    from ..conftest import REPO

    m = tmp_path / "manifest.json"
    fetch_model("g", {"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2"}, m)
    extract(m, tmp_path / "w.safetensors", tmp_path / "w.json", threads=1)
    spectra(tmp_path / "w.safetensors", tmp_path / "w.json", out_npz=tmp_path / "s.npz", out_csv=tmp_path / "s.csv",
            top_k=8, threads=1,
            seed=0)
    df = steering(m, tmp_path / "w.safetensors", tmp_path / "w.json", spectra_npz=tmp_path / "s.npz",
                  prompts_path=REPO / "config/prompts.txt", out_csv=tmp_path / "st.csv", out_json=tmp_path / "st.json",
                  targets=[{"kind": "unembedding", "token": "e"}], kappas=[0, 8, 256],
                  max_prompts=6, batch_size=16, max_tokens=64, shared_edit="every_depth", seed=0, device="cpu",
                  threads=1,
                  out_continuations=None, continuation_prompts=[], continuation_tokens=12, alignment=0.9,
                  kappa_cap=0.0)
    sw = df[df["kappa"] >= 0]
    for kappa, g in sw.groupby("kappa"):
        assert g["n_tokens"].nunique() == 1  # rank-1 and baseline measured on the same tokens
    r1 = sw[sw["method"].str.startswith("rank-1")].set_index("kappa")
    assert r1.loc[256, "cos_after_layer_model"] > r1.loc[0, "cos_after_layer_model"]
    assert r1.loc[256, "u_principal"] and r1.loc[0, "kl_from_unsteered"] == pytest.approx(0, abs=1e-12)
    import json

    from powerlens.models.sources import load_model

    meta = json.loads((tmp_path / "st.json").read_text())
    # the step refuses to write a changed checksum, so compare what it recorded with the weights on disk,
    # loaded afresh (the head's too): a checksum of something else, or of an edited model, fails here
    fresh = st.checksum(load_model(json.loads(m.read_text()), head=True))
    assert meta["checksum_before"] == fresh and meta["checksum_after"] == fresh


@pytest.mark.parametrize("name,arch", [("tiny-bert", "bert"), ("tiny-gpt2", "gpt2"), ("tiny-gpt-neo", "gpt_neo"),
                                        ("tiny-llama", "llama"), ("tiny-gemma3", "gemma3")])
def test_replaying_the_last_layer_gives_the_full_passs_numbers(name, arch):
    """Steering re-runs only the last layer (and final norm, head) on inputs captured by the unsteered pass:
    every measure, under the rank-1 edit and under activation addition, equals a full forward pass to 1e-6
    (the model has its LM head: logits, p_target and KL are compared too)."""
    import transformers

    from powerlens.core.corpus import batches
    from powerlens.models.adapters import get_adapter
    from powerlens.models.archs import TINY_MODELS

    ad = get_adapter(arch)
    torch.manual_seed(0)
    cls = getattr(transformers, ad.head_class)
    model = cls.from_config(TINY_MODELS[name].hf_config(), attn_implementation="eager").eval()
    w = ad.extract(model)
    rng = np.random.default_rng(1)
    ids = [list(rng.integers(3, 60, size=n)) for n in (5, 9, 7, 3, 8)]  # three batches, right padding
    bs = batches(ids, [[0] * len(i) for i in ids], 2, pad_id=0)
    u = rng.standard_normal(w.d_model)
    u /= np.linalg.norm(u)
    z = st.rank1_z(w.layer(w.n_layers - 1).v_per_head().double().numpy(), u)
    layer = ad.layer_modules(model)[-1]
    site, _ = st.output_projection(model, arch)
    inputs = []
    base_full, ref = st.measure_model(model, arch, layer, bs, u, 7, True)
    base_cap, ref_cap = st.measure_model(model, arch, layer, bs, u, 7, True, capture=inputs)
    base_rep, _ = st.measure_model(model, arch, layer, bs, u, 7, True, replay=inputs)
    assert len(inputs) == len(bs)
    _close(base_cap, base_full, 0.0, 0.0)
    _close(base_rep, base_full, 1e-6, 0.0)
    for alpha in (3.0, 40.0):
        with st.rank1_output_edit(model, arch, u, z, alpha):
            full, _ = st.measure_model(model, arch, layer, bs, u, 7, True, ref_probs=ref, site=site, z=z)
            rep, _ = st.measure_model(model, arch, layer, bs, u, 7, True, ref_probs=ref, site=site, z=z,
                                      replay=inputs)
        add = alpha * full["mean_abs_hz"] * u
        full_a, _ = st.measure_model(model, arch, layer, bs, u, 7, True, ref_probs=ref, add=add, site=site)
        rep_a, _ = st.measure_model(model, arch, layer, bs, u, 7, True, ref_probs=ref, add=add, site=site,
                                    replay=inputs)
        assert full["kl"] > 1e-6 and full["cos_layer"] != base_full["cos_layer"]  # the edit did act
        for a, b in ((full, rep), (full_a, rep_a)):
            _close(b, a, 1e-6, 1e-6)


def _law_inputs(name: str, arch: str, seed: int):
    """A tiny float64 model's extracted weights, three right-padded batches of random ids, their x(0), and
    the generator that drew them (for u)."""
    from powerlens.core.corpus import batches
    from powerlens.models.adapters import ADAPTERS

    model = build_tiny(name, torch.float64)
    w = ADAPTERS[arch].extract(model)
    rng = np.random.default_rng(seed)
    ids = [list(rng.integers(3, 60, size=n)) for n in (4, 6, 5)]
    bs = batches(ids, [[0] * len(i) for i in ids], 2, pad_id=0)
    return w, bs, [ADAPTERS[arch].embed(model, b.ids).double().detach() for b in bs], rng


@pytest.mark.parametrize("name,arch,shared_edit", [("tiny-gpt2", "gpt2", "every_depth"),
                                                    ("tiny-albert", "albert", "every_depth"),
                                                    ("tiny-albert", "albert", "last_depth")])
def test_attention_only_steering_from_the_prefix_equals_the_whole_stack(name, arch, shared_edit):
    """The attention-only states entering the edited depth are computed once: running the edited depth(s)
    from them gives the same numbers as the law through every depth with the edit at the last one (ALBERT:
    the edit is at every depth, the prefix is x(0) itself, or with last_depth at its last depth only). The
    edit is applied to the attention computed once (alpha (z^T h) u added); the reference replaces O by O'
    and recomputes the attention."""
    import dataclasses

    from powerlens.models.attention import attention_output, visible_keys

    w, bs, x0s, rng = _law_inputs(name, arch, 2)
    u = rng.standard_normal(w.d_model)
    u /= np.linalg.norm(u)
    z = st.rank1_z(w.layer(w.n_layers - 1).v_per_head().double().numpy(), u)
    alpha = 5.0
    depths = st.edited_depths(w, shared_edit)
    got = st.attention_only_steering(st.attention_only_prefix(x0s, w, bs, depths), w, bs, u, z, alpha, depths)
    assert len(depths) == (w.n_layers if w.shared and shared_edit == "every_depth" else 1)
    # the reference: every depth, the edit wherever the last layer's weights act (O replaced by O', the
    # attention recomputed), the norm of change as the difference of the two outputs at the last edited depth
    ut, zt, total, n, changes = torch.as_tensor(u), torch.as_tensor(z), 0.0, 0, []
    for x, b in zip(x0s, bs):
        for t in range(w.n_layers):
            lw = w.layer(t).to(torch.float64).exact()
            allowed = visible_keys(x.shape[1], w.causal, lw.window, b.mask)
            if t in depths:
                a0 = attention_output(x, lw, w.n_heads, allowed)
                lw = dataclasses.replace(lw, W_O=lw.W_O + alpha * torch.outer(ut, zt))
            a = attention_output(x, lw, w.n_heads, allowed)
            if t == depths[-1]:
                changes.append((a - a0).norm(dim=-1)[b.stat_mask])
            y = x + a
            x = y / y.norm(dim=-1, keepdim=True)
        xs = x[b.stat_mask]
        total += float(((xs @ ut).abs() / xs.norm(dim=-1)).sum())
        n += xs.shape[0]
    assert got["cos_rank1"] == pytest.approx(total / n, abs=1e-9)
    assert got["change_norm"] == pytest.approx(float(torch.cat(changes).mean()), rel=1e-9)
    assert got["change_norm"] > 0 and got["beta"] == got["change_norm"]


@pytest.mark.parametrize("name,arch,shared_edit", [("tiny-gpt2", "gpt2", "every_depth"),
                                                    ("tiny-albert", "albert", "every_depth"),
                                                    ("tiny-albert", "albert", "last_depth")])
def test_the_law_cache_changes_no_bit(name, arch, shared_edit):
    """Every target and kappa share the first edited depth's attention and the unedited law (kappa 0):
    with the cache, each setting's numbers are those of a call without it, bit for bit, and the cache holds
    one entry per batch."""
    w, bs, x0s, _ = _law_inputs(name, arch, 4)
    depths = st.edited_depths(w, shared_edit)
    x_ins = st.attention_only_prefix(x0s, w, bs, depths)
    cache = st.LawCache(x_ins)
    W_V = w.layer(w.n_layers - 1).v_per_head().double().numpy()
    for seed in (0, 1):
        u = np.random.default_rng(seed).standard_normal(w.d_model)
        u /= np.linalg.norm(u)
        z = st.rank1_z(W_V, u)
        for alpha in (0.0, 3.0, 0.0, 40.0):
            got = st.attention_only_steering(x_ins, w, bs, u, z, alpha, depths, cache=cache)
            assert got == st.attention_only_steering(x_ins, w, bs, u, z, alpha, depths)
    assert len(cache.first) == len(bs) and len(cache.plain) == len(bs)
    with pytest.raises(PowerlensError, match="other inputs"):
        st.attention_only_steering(list(x_ins), w, bs, u, z, 1.0, depths, cache=cache)


def _tiny_gpt2():
    """A seeded tiny GPT-2 with its LM head, byte tokenizer, extracted weights, three prompts' batches and the last
    layer's |lambda_1|: the setting the experiment tests run on."""
    import transformers

    from powerlens.core.corpus import prompt_batches
    from powerlens.models.adapters import get_adapter
    from powerlens.models.archs import TINY_MODELS

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(TINY_MODELS["tiny-gpt2"].hf_config()).eval()
    tok = byte_tokenizer("gpt2")
    w = get_adapter("gpt2").extract(model)
    bs = prompt_batches(["The cat sat.", "A dog ran home.", "Rain falls."], tok, 16, 2)[0]
    lam1 = float(np.abs(np.linalg.eigvals(w.F(w.n_layers - 1).numpy())).max())
    return model, tok, w, bs, lam1


def test_the_experiment_runs_without_files():
    """steering.run_steering on a model in memory: one row per target, kappa and method plus the unsteered
    row, the model restored (same checksum), u principal at large kappa and the KL zero at kappa 0 only;
    greedy continuations for the token target of a causal LM."""
    model, tok, w, bs, lam1 = _tiny_gpt2()
    targets = [{"kind": "unembedding", "token": "e"}, {"kind": "random", "seed": 3}]
    res = st.run_steering(model, tok, "gpt2", w, bs, lam1, targets, [0, 2, 256], head=True, shared_edit="every_depth",
                          model_name="m",
                          weights_label="random weights", continuation_prompts=["The"], continuation_tokens=2)
    rows = res["rows"]
    assert len(rows) == len(targets) * (2 * 3 + 1) and res["checksum_before"] == res["checksum_after"]
    assert res["checksum_after"] == st.checksum(model) and res["generates"]
    r1 = {(r["target"], r["kappa"]): r for r in rows if r["method"].startswith("rank-1")}
    for t in ("unembedding:e", "random:seed3"):
        assert r1[(t, 256)]["u_principal"] and not r1[(t, 0)]["u_principal"]
        assert r1[(t, 0)]["kl_from_unsteered"] == 0 and r1[(t, 256)]["kl_from_unsteered"] > 0
        assert r1[(t, 256)]["cos_after_layer_model"] > r1[(t, 0)]["cos_after_layer_model"]
    assert len(res["continuations"]) == 3 and {c["target"] for c in res["continuations"]} == {"unembedding:e"}


def test_the_experiment_doubles_kappa_as_the_rule_says():
    """Revision 6 on a real (tiny) model: with a criterion no configured kappa meets, each target's kappa doubles
    past 256 until it meets it, flattens or reaches the cap; every row of a target records the stop, and the last
    kappa is what KappaRule says for that target's own curve."""
    from powerlens.analysis.kappa_sweep import KappaRule

    model, tok, w, bs, lam1 = _tiny_gpt2()
    rule = KappaRule(0.9999, 4096)
    res = st.run_steering(model, tok, "gpt2", w, bs, lam1, [{"kind": "random", "seed": 3}], [0, 4, 16], head=True,
                          shared_edit="every_depth", model_name="m", weights_label="random weights", rule=rule)
    r1 = [r for r in res["rows"] if r["method"].startswith("rank-1")]
    curve = {float(r["kappa"]): float(r["cos_after_layer_model"]) for r in r1}
    assert max(curve) > 16 and {r["sweep_stop"] for r in r1} == {rule.next(curve)[1]}
    ks = sorted(k for k in curve if k > 16)
    assert ks == [16.0 * 2 ** (i + 1) for i in range(len(ks))]  # doublings of the largest configured kappa
    assert all(rule.next({k: c for k, c in curve.items() if k <= x})[0] == 2 * x for x in [16.0, *ks[:-1]])
    assert res["checksum_before"] == res["checksum_after"]


def test_shared_layer_edited_at_its_last_depth_replays_the_last_depth():
    """shared_edit = last_depth on ALBERT: the steering passes replay the shared layer's last depth from the
    unsteered pass's captured inputs; every measure, under the rank-1 edit and under activation addition,
    equals a whole-stack pass whose edit (a hook) acts at the last of the shared projection's calls only, to
    1e-6; the edit at every depth gives other numbers."""
    import transformers

    from powerlens.core.corpus import batches
    from powerlens.models.adapters import get_adapter
    from powerlens.models.archs import TINY_MODELS

    ad = get_adapter("albert")
    torch.manual_seed(0)
    model = getattr(transformers, ad.head_class).from_config(TINY_MODELS["tiny-albert"].hf_config(),
                                                             attn_implementation="eager").eval()
    w = ad.extract(model)
    assert w.shared and st.edited_depths(w, "last_depth") == [w.n_layers - 1]
    rng = np.random.default_rng(5)
    ids = [list(rng.integers(3, 60, size=n)) for n in (5, 9, 7)]
    bs = batches(ids, [[0] * len(i) for i in ids], 2, pad_id=0)
    u = rng.standard_normal(w.d_model)
    u /= np.linalg.norm(u)
    z = st.rank1_z(w.layer(0).v_per_head().double().numpy(), u)
    layer = ad.layer_modules(model)[-1]
    site, _ = st.output_projection(model, "albert")
    inputs = []
    base, ref = st.measure_model(model, "albert", layer, bs, u, 7, True, capture=inputs)
    assert len(inputs) == len(bs)
    alpha = 30.0
    with st.rank1_output_edit(model, "albert", u, z, alpha):
        rep, _ = st.measure_model(model, "albert", layer, bs, u, 7, True, ref_probs=ref, site=site, z=z,
                                  replay=inputs)
        every, _ = st.measure_model(model, "albert", layer, bs, u, 7, True, ref_probs=ref, site=site, z=z)
    with st.last_call_edit(site, w.n_layers, u, z, alpha):
        full, _ = st.measure_model(model, "albert", layer, bs, u, 7, True, ref_probs=ref, site=site, z=z)
    add = alpha * full["mean_abs_hz"] * u
    rep_a, _ = st.measure_model(model, "albert", layer, bs, u, 7, True, ref_probs=ref, add=add, site=site,
                                replay=inputs)
    with st.last_call_edit(site, w.n_layers, add=add):
        full_a, _ = st.measure_model(model, "albert", layer, bs, u, 7, True, ref_probs=ref)
    assert full["kl"] > 1e-6 and full["cos_layer"] != base["cos_layer"]  # the edit did act
    assert abs(every["cos_layer"] - full["cos_layer"]) > 1e-3  # every depth is another experiment
    for a, b in ((full, rep), (full_a, rep_a)):
        _close(b, a, 1e-6, 1e-6)


def test_unknown_shared_edit_is_refused():
    from powerlens.models.adapters import ADAPTERS

    w = ADAPTERS["albert"].extract(build_tiny("tiny-albert", torch.float64))
    with pytest.raises(PowerlensError, match="shared_edit"):
        st.edited_depths(w, "first_depth")


def test_the_pass_count_is_what_the_passes_ran():
    """run_steering's work (the speed table's count): per target the unsteered pass, two methods at each non-zero
    kappa and the beta sweep, on the steering prompts and on the unrelated ones; the first pass of each prompt
    set runs the whole model (the model's forward counted by a hook), every other pass replays the last depth
    (the last layer's calls counted by a hook), and the head runs on every counted token of every pass."""
    from powerlens.analysis.steering.experiment import BETA_SWEEP
    from powerlens.core.corpus import prompt_batches
    from powerlens.models.adapters import get_adapter

    model, tok, w, bs, lam1 = _tiny_gpt2()
    bs_kl = prompt_batches(["Snow is white.", "Two and two."], tok, 16, 2)[0]
    calls = {"model": 0, "last": 0}

    def count(key):
        return lambda mod, args: calls.__setitem__(key, calls[key] + 1)

    model.register_forward_pre_hook(count("model"))
    get_adapter("gpt2").layer_modules(model)[-1].register_forward_pre_hook(count("last"))
    targets = [{"kind": "unembedding", "token": "e"}, {"kind": "random", "seed": 3}]
    res = st.run_steering(model, tok, "gpt2", w, bs, lam1, targets, [0, 2, 256], head=True, shared_edit="every_depth",
                          model_name="m", weights_label="random weights", kl_batches=bs_kl)
    work = res["work"]
    sweep = [r for r in res["rows"] if r["method"] == "activation addition (beta sweep)"]
    tops = [r for r in res["rows"] if r["method"].startswith("rank-1") and r["kappa"] == 256]
    # the edit minus activation addition at the edit's KL, bootstrapped over prompts (steering.matched)
    assert len(tops) == 2 and all(r["diff_cos_at_kl_lo"] <= r["diff_cos_at_kl"] <= r["diff_cos_at_kl_hi"]
                                  for r in tops if not np.isnan(r["diff_cos_at_kl"]))
    assert any(not np.isnan(r["diff_cos_at_kl"]) for r in tops)
    assert len(sweep) >= len(targets) * len(BETA_SWEEP)  # bracketing the edit's KL may add betas
    per_set = 1 + 2 * 2 + len(sweep) / len(targets)  # one prompt set, one target: unsteered, 2 kappas x 2, the sweep
    n_s, n_k = (int(sum(int(b.stat_mask.sum()) for b in x)) for x in (bs, bs_kl))
    assert work["passes"] == len(targets) * 2 * per_set
    assert work["head"] == len(targets) * per_set * (n_s + n_k) > 0
    assert work["whole"] == n_s + n_k and work["last_depth"] == work["head"] - work["whole"]
    assert calls["model"] == len(bs) + len(bs_kl)  # the whole model: once per batch of each prompt set
    assert calls["last"] == len(targets) * per_set * (len(bs) + len(bs_kl))  # the last layer: every pass

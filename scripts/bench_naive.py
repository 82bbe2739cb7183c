"""The benchmark's naive baselines (scripts/bench.py runs them beside our steps): the same outputs as each
step, computed the straightforward way (see bench.py's docstring). Only these are the benchmark's own code."""

import os
from pathlib import Path

from powerlens.pipeline.config import schema_defaults


def naive_check_memory_gb(twin: str) -> float:
    """Peak memory the naive check needs: the whole model in float64 while its float32 copy is cast."""
    from powerlens.models.archs import count_params, twin_config

    return count_params(twin_config(twin)) * (8 + 4) / 1e9


def machine_memory_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9


def naive(step, work, prompts, threads, shared_edit):
    """The naive baseline of one step, run in a child of this script."""
    import numpy as np
    import torch

    from powerlens.core.runtime import fixed_mmap_threshold

    torch.set_num_threads(threads)
    fixed_mmap_threshold()  # the same allocator setting as our steps, so the ratio compares algorithms
    from powerlens.core.io import read_json
    from powerlens.models.weights import ModelWeights

    w = ModelWeights.load(work / "weights.safetensors", work / "weights.json")
    if step == "spectra":
        from threadpoolctl import threadpool_limits

        from powerlens.analysis.spectra import layer_spectrum

        threadpool_limits(threads)  # every eigen-solve on all the BLAS threads
        for t in range(w.n_layers):  # every depth (shared layers again), one after another
            lw = w.layers[w.layer_map[t]]
            g, p = lw.folded_gains()
            pre = w.norm == "pre"
            layer_spectrum(lw.F.numpy(), int(schema_defaults()["spectra"]["top_k"]), lw.v_per_head().double().numpy(),
                           lw.W_O.double().numpy(), w.n_heads, rng=np.random.default_rng([0, 11, t]),
                           gain=g.double().numpy() if pre else None,
                           post_gain=p.double().numpy() if pre and p is not None else None)
        return
    if step == "check":
        from powerlens.models.adapters import get_adapter
        from powerlens.models.sources import load_model
        from powerlens.models.verify import reconstruction_errors

        man = read_json(work / "manifest.json")
        for dtype in (torch.float32, torch.float64):  # the whole model in each dtype
            model = load_model(man, dtype=dtype)
            reconstruction_errors(model, get_adapter(man["arch"]), w)
            del model
        return
    if step == "steering":
        return naive_steering(work, prompts, w, shared_edit)
    raise SystemExit(f"no in-process naive baseline for {step!r}")


def naive_steering(work: Path, prompts, w, shared_edit: str) -> None:
    """The steering step's outputs the straightforward way: every setting (target x kappa x method) as a full
    forward pass (a shared layer edited at its last depth only: by a hook at the last call of its output
    projection), the law by :func:`naive_law`, z and a full eig of F' per setting, the same continuations."""
    import contextlib

    import numpy as np

    from powerlens.analysis import steering as st

    cfg = schema_defaults()["steering"]
    man, adapter, head, model, tok, bs = _naive_steering_inputs(work, prompts, cfg)
    last = w.layer(w.n_layers - 1)
    W_V, lam1 = last.v_per_head().double().numpy(), float(np.abs(np.linalg.eigvals(last.F.numpy())).max())
    layer, (site, _) = adapter.layer_modules(model)[-1], st.output_projection(model, man["arch"])
    x0s = [adapter.embed(model, b.ids).double().detach() for b in bs]
    depths = st.edited_depths(w, shared_edit)
    gated = w.shared and not st.edits_every_depth(w, shared_edit)  # the shared layer edited at its last depth only

    def edited(u, z, alpha):
        if gated:
            return st.last_call_edit(site, w.n_layers, u, z, alpha)
        return st.rank1_output_edit(model, man["arch"], u, z, alpha)

    def added(vec):
        return st.last_call_edit(site, w.n_layers, add=vec) if gated else contextlib.nullcontext()

    F = last.F.numpy()
    st.kappa_bound(F, lam1)
    conts = cfg["continuations"]["prompts"] if head and adapter.causal else []
    for tgt in cfg["targets"]:
        u, tid = st.target_vector(model, tok, man["arch"], tgt["kind"], tgt.get("token"), tgt.get("seed", 0),
                                  w.d_model)
        _, ref = st.measure_model(model, man["arch"], layer, bs, u, tid, head)
        for kappa in cfg["kappas"]:
            alpha = kappa * lam1
            z = st.rank1_z(W_V, u)  # per setting, and a full eig of F' with every eigenvector
            np.linalg.eig(F + alpha * np.outer(u, W_V.T @ z))
            with edited(u, z, alpha):
                r1, _ = st.measure_model(model, man["arch"], layer, bs, u, tid, head, ref_probs=ref, site=site, z=z)
            vec = alpha * r1["mean_abs_hz"] * u
            with added(vec):
                st.measure_model(model, man["arch"], layer, bs, u, tid, head, ref_probs=ref,
                                 add=None if gated else vec, site=site)
            naive_law(x0s, w, bs, u, z, alpha, depths)
            if conts and tid is not None and not gated:  # greedy continuations, both methods, as our step
                with edited(u, z, alpha):
                    st.greedy_continuations(model, tok, conts, cfg["continuations"]["new_tokens"])
                st.greedy_continuations(model, tok, conts, cfg["continuations"]["new_tokens"], site=site,
                                        add=vec if alpha else None)


def _naive_steering_inputs(work: Path, prompts, cfg: dict):
    """The model (with its LM head where it has one), tokenizer and batches the steering step uses."""
    import torch
    import transformers

    from powerlens.analysis import steering as st
    from powerlens.core.corpus import prompt_batches, read_prompts
    from powerlens.core.io import read_json
    from powerlens.models.adapters import get_adapter
    from powerlens.models.sources import load_model, load_tokenizer

    man = read_json(work / "manifest.json")
    head = st.has_lm_head(transformers.AutoConfig.from_pretrained(man["path"], local_files_only=True,
                                                                  trust_remote_code=False))
    model = load_model(man, dtype=torch.float32, head=head)
    tok = load_tokenizer(man)
    bs = prompt_batches(read_prompts(prompts)[:cfg["max_prompts"]], tok, cfg["max_tokens"], cfg["batch_size"])[0]
    return man, get_adapter(man["arch"]), head, model, tok, bs


def naive_law(x0s, w, bs, u, z, alpha: float, depths: list[int]) -> tuple[float, float]:
    """The steering law the straightforward way: every depth from x(0) for each setting, O replaced by
    O' = O + alpha u z^T at the edited depths and the attention recomputed (the norm of change as the
    difference of the two outputs at the last edited depth), then the baseline run at the same norm."""
    import dataclasses

    import torch

    from powerlens.models.attention import attention_output, visible_keys

    ut, zt = torch.as_tensor(u, dtype=torch.float64), torch.as_tensor(z, dtype=torch.float64)
    changes, cos = [], {}
    for method in ("rank1", "actadd"):
        beta = float(torch.cat(changes).mean()) if changes else 0.0
        total = n = 0
        for x, b in zip(x0s, bs):
            for t in range(w.n_layers):
                lw = w.layer(t).to(torch.float64).exact()
                allowed = visible_keys(x.shape[1], w.causal, lw.window, b.mask)
                a = attention_output(x, lw, w.n_heads, allowed)
                if t in depths and method == "rank1":
                    a1 = attention_output(x, dataclasses.replace(lw, W_O=lw.W_O + alpha * torch.outer(ut, zt)),
                                          w.n_heads, allowed)
                    if t == depths[-1]:
                        changes.append((a1 - a).norm(dim=-1)[b.stat_mask])
                    a = a1
                elif t in depths:
                    a = a + beta * ut
                y = x + a
                x = y / y.norm(dim=-1, keepdim=True).clamp_min(1e-30)
            xs = x[b.stat_mask]
            total += float(((xs @ ut).abs() / xs.norm(dim=-1)).sum())
            n += xs.shape[0]
        cos[method] = total / max(n, 1)
    return cos["rank1"], cos["actadd"]


def _swap(cmd: list, flag: str, value) -> list:
    out = list(cmd)
    out[out.index(flag) + 1] = value
    return out


def naive_dynamics(cmd: list, n_prompts: int) -> list:
    """The dynamics step's own command as the per-prompt baseline: one prompt per batch, every prompt
    through every step of a long shared-weight run (no seeded subset), outputs beside ours as naive-*."""
    cmd = _swap(_swap(cmd, "--batch-size", "1"), "--long-run-prompts", str(max(n_prompts, 1)))
    for flag in ("--out-npz", "--out-csv", "--out-json"):
        f = Path(cmd[cmd.index(flag) + 1])
        cmd = _swap(cmd, flag, str(f.with_name("naive-" + f.name)))
    return cmd


def stats_difference(cmd: list) -> tuple[float, str]:
    """Largest absolute difference between the per-layer statistics of our dynamics step and of its naive
    baseline over the model's depth (a long run's later steps are computed over different prompts by
    design): round-off of the batched forward pass, or a sign that the two do not compute the same thing."""
    import numpy as np
    import pandas as pd

    ours = Path(cmd[cmd.index("--out-csv") + 1])
    a, b = pd.read_csv(ours), pd.read_csv(ours.with_name("naive-" + ours.name))
    depth = int(a["n_prompts"].notna().sum()) if "n_prompts" in a else len(a)
    a, b = a.iloc[:depth], b.iloc[:depth]
    num = [c for c in a.columns if c in b.columns and pd.api.types.is_numeric_dtype(a[c])]
    x, y = a[num].to_numpy(float), b[num].to_numpy(float)
    d = np.where(np.isnan(x) & np.isnan(y), 0.0, np.abs(x - y))  # NaN on one side only stays NaN
    d = np.where(np.isnan(d), np.inf, d)
    j = int(np.argmax(d.max(axis=0))) if d.size else 0
    if not d.size:
        return float("nan"), ""
    return float(d.max()), (num[j] if d.max() > 0 else "")

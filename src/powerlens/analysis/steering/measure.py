"""Model-mode measurement: the real forward pass with the edit or the matched activation addition, the
tokens' alignment with u after the edited layer and at the output, and the change of the output distribution.

In :func:`measure_model`, ``post`` is the norm between the site and the residual add
(:meth:`~powerlens.models.adapters.Adapter.output_norm`, Gemma 3's post-attention RMSNorm), or None. With it,
the baseline's ``add`` acts on the norm's output (where the residual stream receives the attention output),
and the norm of change is measured there: ``post_ref`` (a list) is filled with the norm's outputs by the
unsteered pass, and a steered pass given that list measures the mean ||P(o') - P(o)|| over counted tokens.
``pu``: a second unit direction (p * u normalised) whose mean |cos| after the layer is reported beside u's; with
``post`` also the mean |P(o) . pu| (``post_along_pu``: how far along p * u the norm's output points, against its
saturation value). ``ceiling``: the largest change the norm lets through (its saturation value along p * u): the
mean over tokens of the largest |cos(y_i + c pu, u)| over |c| <= ceiling (``cos_ceiling``), y_i the layer's
output: what any change of that size along p * u could reach (our bound: the FFN's answer to it is not
modelled).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from powerlens.core.errors import PowerlensError
from powerlens.core.scratch import reusing_scratch, scratch
from powerlens.models.adapters import get_adapter
from powerlens.models.hooks import no_kv_cache


def _mean_abs_cos(x: torch.Tensor, u: torch.Tensor, stat: torch.Tensor) -> tuple[float, int]:
    xs = x[stat].double()
    c = (xs @ u).abs() / xs.norm(dim=-1).clamp_min(1e-30)
    return float(c.sum()), int(c.numel())


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@torch.no_grad()
def measure_model(model, arch: str, layer_module, batches, u: np.ndarray, tid: int | None, head: bool,
                  ref_probs: list | None = None, add: np.ndarray | None = None, site=None,
                  z: np.ndarray | None = None, capture: list | None = None,
                  replay: list | None = None, post=None, post_ref: list | None = None,
                  pu: np.ndarray | None = None, ceiling: float | None = None) -> tuple[dict, list]:
    """One pass over the batches: |cos| with u after the last layer and at the output; LM metrics.

    ``site``: the last layer's output projection (the edit's site; ALBERT's is shared, so it fires at every
    depth). ``add``: activation-addition vector added to the site's output (the baseline). ``z``: measure the
    mean |z^T h| over counted tokens of the site's input h at its last application (the rank-1 edit changes
    the site's output by alpha u z^T h, so its norm of change is alpha |z^T h|).

    ``capture``: a list this pass fills with the last layer's inputs (positional and keyword arguments) at
    its last call per batch (a shared layer: its last depth); ``replay``: such a list, from an earlier pass of
    the same model on the same batches: only the last depth and what follows it (the adapter's
    :meth:`~powerlens.models.adapters.Adapter.tail`: final norm, head) are re-run, not the whole model. Exact for a
    change confined to the last depth: everything before it is the same computation on the same inputs (not
    for a shared layer edited at every depth).

    ``post``, ``post_ref``, ``pu``, ``ceiling``: the post-attention norm's measures (module docstring).
    Returns the measures and, for a pass without ``ref_probs`` (the unsteered one), the per-batch
    log-probabilities the steered passes' KL is taken from."""
    adapter = get_adapter(arch)
    ut = torch.as_tensor(u, dtype=torch.float64)
    acc = {"cos_layer": 0.0, "cos_output": 0.0, "n": 0, "p_target": 0.0, "kl": 0.0, "hz": 0.0, "post_change": 0.0,
           "cos_pu": 0.0, "post_pu": 0.0, "ceiling": 0.0, "prompt": []}
    fill_post = post is not None and post_ref is not None and not post_ref  # the unsteered pass fills it
    probs_out, captured = [], {}
    zt = None if z is None else torch.as_tensor(z, dtype=torch.float64)
    ptu = None if pu is None else torch.as_tensor(pu, dtype=torch.float64)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_pass_hooks(captured, layer_module, site, post, add=add, capture=capture, z=z))
        stack.enter_context(no_kv_cache(model))  # replayable inputs (and one pass per batch needs no cache)
        stack.enter_context(reusing_scratch())  # a steered pass's (n, V) logits and KL terms reuse kept memory
        for i, b in enumerate(batches):
            stat = b.stat_mask
            if replay is not None:  # the head at the counted positions only (the same rows)
                args, kwargs = replay[i]
                last, logits = adapter.tail(model, _first(layer_module(*args, **kwargs)), head, rows=stat)
            else:
                out = model(input_ids=b.ids, attention_mask=b.mask, output_hidden_states=True)
                last, logits = out.hidden_states[-1], (out.logits[stat] if head else None)
                if capture is not None:
                    capture.append(captured.pop("inputs"))
            _add_alignments(acc, captured, last, stat, ut, zt, ptu)
            if post is not None and post_ref is not None:
                _post_change(acc, captured["post"], post_ref, i, stat, fill_post)
            if ptu is not None:
                _add_along_pu(acc, captured, stat, ut, ptu, post is not None, ceiling)
            p_tok = None
            if head:
                logp = _add_lm_metrics(acc, logits, tid, None if ref_probs is None else ref_probs[i])
                if ref_probs is None:
                    probs_out.append(Reference(logp))
                p_tok = None if tid is None else logp[:, tid].double().exp()  # (n,)
            _add_prompts(acc, captured["y"], stat, ut, p_tok)
    has = {"p_target": head and tid is not None, "kl": head and ref_probs is not None,
           "post_change": post is not None and not fill_post, "cos_pu_layer": pu is not None,
           "post_along_pu": post is not None and pu is not None, "cos_ceiling": ceiling is not None and pu is not None}
    return _means(acc, has), probs_out


def _add_prompts(acc: dict, y, stat, ut, p_tok) -> None:
    """One batch's per-prompt sums (a row is a prompt): counted tokens, |cos(y, u)| after the layer and, with
    ``p_tok`` (P(target) at the counted positions, in their order), P(target): what a bootstrap over prompts
    resamples."""
    rows = torch.nonzero(stat)[:, 0]  # (n,): the batch row of each counted token, in the logits' order
    B = stat.shape[0]
    ys = y[stat].double()
    cos = (ys @ ut).abs() / ys.norm(dim=-1).clamp_min(1e-30)
    zeros = lambda: torch.zeros(B, dtype=torch.float64, device=cos.device)  # noqa: E731
    n = zeros().index_add_(0, rows, torch.ones_like(cos))
    c = zeros().index_add_(0, rows, cos)
    p = (zeros().index_add_(0, rows, p_tok.to(device=cos.device, dtype=torch.float64)) if p_tok is not None
         else torch.full((B,), float("nan"), dtype=torch.float64, device=cos.device))
    acc["prompt"].append(torch.stack([n, c, p], 1).cpu().numpy())  # (B, 3)


def _means(acc: dict, has: dict) -> dict:
    """A pass's sums as means over its counted tokens (NaN for a measure the pass did not take), and its
    per-prompt sums (``prompt``: (prompts, 3) counted tokens, sum |cos| after the layer, sum P(target))."""
    n = max(acc["n"], 1)
    nan = float("nan")
    return {"prompt": np.concatenate(acc["prompt"]) if acc["prompt"] else np.zeros((0, 3)),
            "cos_layer": acc["cos_layer"] / n, "cos_output": acc["cos_output"] / n, "n_tokens": acc["n"],
            "mean_abs_hz": acc["hz"] / n,
            **{k: (acc[src] / n if has[k] else nan) for k, src in (
                ("p_target", "p_target"), ("kl", "kl"), ("post_change", "post_change"), ("cos_pu_layer", "cos_pu"),
                ("post_along_pu", "post_pu"), ("cos_ceiling", "ceiling"))}}


@contextlib.contextmanager
def _pass_hooks(captured: dict, layer_module, site, post, *, add, capture, z):
    """The hooks of one measuring pass, removed on exit: the last layer's output (``captured["y"]``), its
    inputs at its last call if ``capture`` (``"inputs"``), the site's input if ``z`` (``"h"``), and the
    baseline's addition at the site's output, or after the post-attention norm when there is one
    (``"post"``: what the residual stream receives)."""

    def hook(mod, args, out):
        captured["y"] = _first(out)

    def site_pre(mod, args):
        captured["h"] = args[0]

    def site_add(mod, args, out):
        return out + torch.as_tensor(add, dtype=out.dtype, device=out.device)

    def post_out(mod, args, out):
        if add is not None:
            out = out + torch.as_tensor(add, dtype=out.dtype, device=out.device)
        captured["post"] = out  # (B, T, d): what the residual stream receives
        return out

    def keep_inputs(mod, args, kwargs):
        if any(type(v).__name__.endswith("Cache") for v in (*args, *kwargs.values())):
            raise PowerlensError("the last layer was called with a key-value cache: its inputs cannot be replayed",
                                 "report this bug (steering passes run without a cache)")
        captured["inputs"] = (args, kwargs)  # a shared layer: overwritten until its last depth

    handles = [layer_module.register_forward_hook(hook)]
    if capture is not None:
        handles.append(layer_module.register_forward_pre_hook(keep_inputs, with_kwargs=True))
    if site is not None and z is not None:
        handles.append(site.register_forward_pre_hook(site_pre))
    if post is not None:
        handles.append(post.register_forward_hook(post_out))
    elif add is not None:
        handles.append(site.register_forward_hook(site_add))
    try:
        yield captured
    finally:
        for h in handles:
            h.remove()


def _add_alignments(acc: dict, captured: dict, last, stat, ut, zt, ptu) -> None:
    """One batch's sums: |cos| with u after the layer and at the output, |z^T h| at the site, |cos| with p * u."""
    s, n = _mean_abs_cos(captured["y"], ut, stat)
    acc["cos_layer"] += s
    acc["n"] += n
    acc["cos_output"] += _mean_abs_cos(last, ut, stat)[0]
    if zt is not None:
        acc["hz"] += float((captured["h"][stat].double() @ zt).abs().sum())
    if ptu is not None:
        acc["cos_pu"] += _mean_abs_cos(captured["y"], ptu, stat)[0]


def _add_along_pu(acc: dict, captured: dict, stat, ut, ptu, post: bool, ceiling: float | None) -> None:
    """One batch's sums along p * u: |P(o) . pu| after the norm, and the |cos| ceiling of a capped change."""
    if post:
        acc["post_pu"] += float((captured["post"][stat].double() @ ptu).abs().sum())
    if ceiling is not None:
        acc["ceiling"] += _ceiling(captured["y"][stat].double(), ut, ptu, ceiling)


def _ceiling(y: torch.Tensor, u: torch.Tensor, w: torch.Tensor, S: float, grid: int = 401) -> float:
    """Sum over tokens of max over |c| <= S of |cos(y_i + c w, u)| (y (n, d), u and w unit vectors), on a grid of c
    with both ends."""
    c = torch.linspace(-S, S, grid, dtype=torch.float64)  # (G,)
    yu, wu, yw, yy = y @ u, float(w @ u), y @ w, (y * y).sum(-1)  # (n,), scalar, (n,), (n,)
    num = (yu[:, None] + c[None, :] * wu).abs()  # (n, G)
    den = (yy[:, None] + 2 * c[None, :] * yw[:, None] + c[None, :] ** 2).clamp_min(1e-300).sqrt()
    return float((num / den).max(dim=1).values.sum())


class Reference:
    """The unsteered pass's log-probabilities of one batch at its counted tokens, ``logp`` (n, V), and their
    exponential ``p``, made on first use and kept: every steered pass's KL reads both."""

    def __init__(self, logp: torch.Tensor):
        self.logp = logp
        self._p = None

    @property
    def p(self) -> torch.Tensor:
        if self._p is None:
            self._p = self.logp.exp()  # (n, V)
        return self._p


def _add_lm_metrics(acc: dict, logits, tid: int | None, ref: Reference | None):
    """One batch's LM sums over counted tokens (``logits`` (n, V)): p(target) and KL(ref || steered) when a
    reference is given. Returns the log-probabilities (the unsteered pass keeps them as the reference)."""
    work = None if ref is None else scratch()  # a steered pass's arrays are not kept: into the open scratch
    if work is None:
        logp = torch.log_softmax(logits.float(), dim=-1)  # (n, V)
    else:
        logp = torch.log_softmax(logits.float(), dim=-1, out=work.torch("logp", tuple(logits.shape), torch.float32))
    if tid is not None:
        acc["p_target"] += float(logp[:, tid].exp().sum())
    if ref is not None:
        if work is None:
            gap = ref.logp - logp  # (n, V)
            acc["kl"] += float(gap.mul_(ref.p).sum(dtype=torch.float64))  # sum of p_ref (logp_ref - logp)
        else:  # the same sum: torch widens to float64 and sums; here the widened copy lands in kept memory
            gap = torch.sub(ref.logp, logp, out=work.torch("gap", tuple(logp.shape), logp.dtype)).mul_(ref.p)
            acc["kl"] += float(work.torch("wide", tuple(gap.shape), torch.float64).copy_(gap).sum())
    return logp


def _post_change(acc: dict, out, post_ref: list, i: int, stat, fill: bool) -> None:
    """The unsteered pass keeps the norm's output of batch i (``fill``); a steered pass adds the norm of its
    change, ||P(o') - P(o)||, over counted tokens."""
    if fill:
        post_ref.append(out.detach().clone())
    else:
        acc["post_change"] += float((out[stat].double() - post_ref[i][stat].double()).norm(dim=-1).sum())

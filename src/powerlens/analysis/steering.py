"""Steering by a rank-1 change of the last layer's output matrix (paper.md section 6, claim C9).

Given a unit target u in token space, choose z with V^T z = u (least squares when V is singular) and set

    O' = O + alpha u z^T,   so that   F' = O' V = F + alpha u (V^T z)^T = F + alpha u u^T,

with alpha = kappa |lambda_1(F)|. For large alpha, u becomes F''s principal eigenvector. With grouped-query
attention V has rank H_kv d_h < d: least squares gives V^T z = P u (P the projector on V's row space) and
F' = F + alpha u (P u)^T, not normal; ``lstsq_residual`` = ||V^T z - u|| is reported per target and the bound
below is stated only where z solves V^T z = u exactly (:func:`bound_note`); the eigen-check of F' (the
matrix the edit really makes) decides "u principal" everywhere. The bound the code
states (``kappa_bound``) follows from Bauer-Fike (alpha u u^T is normal, with eigenvalues alpha and 0):
if alpha > 2 ||F||_2 exactly one eigenvalue mu of F' lies within ||F||_2 of alpha, and it dominates; its
eigenvector w satisfies sin angle(w, u) <= ||F||_2 / (alpha - ||F||_2) (project F' w = mu w onto u's
orthogonal complement). So alpha >= ||F||_2 (1 + 1/delta) with delta <= 1 makes u principal up to sin <= delta.

The change is applied to a loaded model by :func:`rank1_output_edit`, a context manager that edits the
last layer's output projection in place and restores it byte for byte (a checksum proves it). For
shared-weight models (ALBERT) the last layer is the shared one, so every depth sees the change
(``shared_edit = "every_depth"``), in both dynamics modes and for both methods; ``"last_depth"`` applies
both methods at the last depth only (paper.md section 6 allows either; the outputs say which). The baseline
is activation addition at the same site: beta u added to the output projection's output (at the same
depths as the edit). The two are
compared on curves over the norm of the change at the site: the edit changes it by alpha u (z^T h), whose
mean norm alpha |z^T h| sets the baseline's beta for each kappa (matched norm of change). The edit also adds
the constant alpha u (z^T b_V) when V has a bias (rows of A sum to one): its size is reported.

Where a norm follows the edited W_O before the residual add (Gemma 3's post-attention RMSNorm, gain p; the
adapter's :meth:`~powerlens.models.adapters.Adapter.output_norm`), every change at that site reaches the residual
stream through the norm: its norm is capped (``post_norm_cap`` = sqrt(d) max |p_i|, the largest norm the
norm's output can have, eps aside) and its direction tends to p * u, not u. There the matched norm of change
is measured after the norm, where the residual stream receives it (||P(o') - P(o)||, mean over counted
tokens), the baseline adds beta u after the norm, and the alignment with p * u (normalised) is reported
beside the alignment with u.
"""

from __future__ import annotations

import contextlib
import hashlib

import numpy as np
import torch

from powerlens.core.errors import PowerlensError

DELTA = 0.1  # "u is principal": leading eigenvalue's eigenvector within sin angle <= DELTA of u
INVERSE_ITERATIONS = 3  # steps of inverse iteration for the leading eigenvector (see principal_eig)


def rank1_z(W_V: np.ndarray, u: np.ndarray) -> np.ndarray:
    """z with V^T z = u (least squares if V is singular)."""
    z, *_ = np.linalg.lstsq(W_V.T, u, rcond=None)
    return z


def kappa_bound(F: np.ndarray, lam1_abs: float, delta: float = DELTA) -> float:
    """Sufficient kappa: alpha = kappa |lambda_1| >= max(2, 1 + 1/delta) ||F||_2 makes u principal (sin <= delta)."""
    norm2 = float(np.linalg.norm(F, 2))
    return max(2.0, 1.0 + 1.0 / delta) * norm2 / lam1_abs


EXACT_LSTSQ = 1e-10  # ||V^T z - u|| (u a unit vector) below which z solves V^T z = u exactly


def bound_note(lstsq_residual: float) -> str:
    """Why a target has no stated bound ("" when it has one): the Bauer-Fike bound is derived for
    F + alpha u u^T (normal perturbation); with V of rank < d (grouped-query attention) least squares gives
    V^T z = P u and F' = F + alpha u (P u)^T, for which it is not a bound (paper.md section 6)."""
    if lstsq_residual <= EXACT_LSTSQ:
        return ""
    return "none: V^T z = u has no exact solution (V of rank < d); the eigen-check decides"


def principal_eig(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every eigenvalue of A sorted by modulus (stable), and a unit eigenvector of the first.

    The eigenvalues come from LAPACK without eigenvectors (about 0.6x the time of a full ``eig``); the
    vector from inverse iteration, (A - sigma I) x_{k+1} = x_k with sigma = lambda_1 (1 + 1e-13) so that the
    factorisation is never exactly singular: each step shrinks the other directions by
    |lambda_1 - sigma| / |lambda_j - sigma|, about 1e-13 |lambda_1| / |lambda_j - lambda_1|, so three steps
    reach round-off unless lambda_1 is degenerate to about 1e-4 relative, where its eigenvector is
    ill-conditioned for any method."""
    import scipy.linalg as sl

    vals = np.linalg.eigvals(A)
    lam = vals[np.argsort(-np.abs(vals), kind="stable")]
    sigma = lam[0] * (1 + 1e-13) if lam[0] != 0 else 1e-300
    lu = sl.lu_factor(A - sigma * np.eye(A.shape[0], dtype=np.result_type(A, sigma)), check_finite=False)
    x = np.ones(A.shape[0], dtype=lu[0].dtype) / np.sqrt(A.shape[0])
    for _ in range(INVERSE_ITERATIONS):
        x = sl.lu_solve(lu, x, check_finite=False)
        x = x / np.linalg.norm(x)
    return lam, x


def principal_check(F: np.ndarray, W_V: np.ndarray, u: np.ndarray, alpha: float,
                    eig_of_F: tuple | None = None, z: np.ndarray | None = None) -> dict:
    """Eigen-solve F' = F + alpha u (V^T z)^T (:func:`principal_eig`); is u its principal eigenvector?

    ``eig_of_F``: ``principal_eig(F)`` if already computed; used when alpha = 0 (then F' is F bit for bit,
    so the result is the same), so a model's kappa-0 checks share one eigen-solve. ``z``: ``rank1_z(W_V,
    u)`` if already computed (a least-squares solve, O(d^3): once per target, not per kappa)."""
    z = rank1_z(W_V, u) if z is None else z
    if alpha == 0 and eig_of_F is not None:
        lam, v1 = eig_of_F
    else:
        lam, v1 = principal_eig(F + alpha * np.outer(u, W_V.T @ z))
    cos = float(abs(np.vdot(v1, u)) / np.linalg.norm(v1))
    return {"cos_v1_u": cos, "sin_v1_u": float(np.sqrt(max(0.0, 1 - cos ** 2))), "lambda1": complex(lam[0]),
            "gap": float(abs(lam[0]) - abs(lam[1])), "ratio": float(abs(lam[1]) / abs(lam[0])),
            "u_principal": bool(np.sqrt(max(0.0, 1 - cos ** 2)) <= DELTA),
            "lstsq_residual": float(np.linalg.norm(W_V.T @ z - u))}


def checksum(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, p in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def output_projection(model, arch: str):
    """(module, layout) of the last layer's output projection; layout 'linear' (out, in) or 'conv1d' (in, out)."""
    from powerlens.models.adapters import get_adapter

    return get_adapter(arch).output_projection(model)


@contextlib.contextmanager
def rank1_output_edit(model, arch: str, u: np.ndarray, z: np.ndarray, alpha: float):
    """Temporarily set O' = O + alpha u z^T on the last layer (in place); restore exactly on exit."""
    mod, layout = output_projection(model, arch)
    W = mod.weight
    saved = W.detach().clone()
    delta = alpha * np.outer(u, z)  # (d, d) in the (out, in) convention
    if layout == "conv1d":
        delta = delta.T
    with torch.no_grad():
        W.add_(torch.as_tensor(delta, dtype=W.dtype, device=W.device))
    try:
        yield mod
    finally:
        with torch.no_grad():
            W.copy_(saved)


@contextlib.contextmanager
def last_call_edit(site, calls: int, u: np.ndarray | None = None, z: np.ndarray | None = None, alpha: float = 0.0,
                   add: np.ndarray | None = None):
    """The rank-1 edit (``u``, ``z``, ``alpha``: the site's output changed by alpha u z^T h) or the baseline
    (``add``, a vector added to the output) at the last of the ``calls`` calls of a shared output projection
    per forward pass only, by a forward hook, the weights untouched: the whole-stack reference of
    ``shared_edit = "last_depth"`` (the steering step itself replays the last depth instead)."""
    if (add is None) == (z is None or u is None):
        raise ValueError("last_call_edit: give u and z (the rank-1 edit) or add (the baseline), not both")
    n = {"calls": 0}

    def hook(mod, args, out):
        n["calls"] += 1
        if n["calls"] % calls:
            return None
        if add is not None:
            return out + torch.as_tensor(add, dtype=out.dtype, device=out.device)
        h = args[0]
        hz = h @ torch.as_tensor(z, dtype=h.dtype, device=h.device)  # (B, T)
        return out + alpha * hz[..., None] * torch.as_tensor(u, dtype=out.dtype, device=out.device)

    handle = site.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def target_vector(model, tokenizer, arch: str, kind: str, token: str | None = None, seed: int = 0,
                  d: int | None = None) -> tuple[np.ndarray, int | None]:
    """A unit target u in token space and the token id it stands for (None for random targets).

    embedding: the token's input embedding row (ALBERT: mapped by embedding_hidden_mapping_in's matrix);
    unembedding: the LM head row of the token seen through the final norm's gain (g * W_U[token]; Gemma's
    gain is 1 + w); random: a seeded Gaussian unit vector. The architecture's adapter knows where each is."""
    if kind == "random":
        rng = np.random.default_rng([seed, 7])
        u = rng.standard_normal(d)
        return u / np.linalg.norm(u), None
    if token is None:
        raise PowerlensError(f"steering target of kind {kind!r} needs a `token`", "add `token: <text>` to the target")
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = tokenizer.convert_ids_to_tokens(ids)
        raise PowerlensError(f"steering token {token!r} is split by the tokenizer into {pieces}",
                             "choose a token that is a single vocabulary entry (for GPT-2 often with a leading "
                             "space, e.g. ' the'), or use kind: random")
    tid = ids[0]
    if kind not in ("embedding", "unembedding"):
        raise PowerlensError(f"unknown steering target kind {kind!r}", "use embedding, unembedding or random")
    from powerlens.models.adapters import get_adapter

    u = get_adapter(arch).token_vector(model, tid, kind).cpu().numpy()
    return u / np.linalg.norm(u), tid


def has_lm_head(model_config) -> bool:
    arch = " ".join(getattr(model_config, "architectures", None) or [])
    return any(k in arch for k in ("LMHead", "ForCausalLM", "ForMaskedLM", "ForPreTraining"))


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
                  pu: np.ndarray | None = None) -> tuple[dict, list]:
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

    ``post``: the norm between the site and the residual add (:meth:`~powerlens.models.adapters.Adapter.output_norm`,
    Gemma 3's post-attention RMSNorm), or None. With it, the baseline's ``add`` acts on the norm's output
    (where the residual stream receives the attention output), and the norm of change is measured there:
    ``post_ref`` (a list) is filled with the norm's outputs by the unsteered pass, and a steered pass
    given that list measures the mean ||P(o') - P(o)|| over counted tokens. ``pu``: a second unit direction
    (p * u normalised) whose mean |cos| after the layer is reported beside u's.
    Returns the measures and, for a pass without ``ref_probs`` (the unsteered one), the per-batch
    log-probabilities the steered passes' KL is taken from."""
    from powerlens.models.adapters import get_adapter
    from powerlens.models.hooks import no_kv_cache

    adapter = get_adapter(arch)
    stack = contextlib.ExitStack()
    ut = torch.as_tensor(u, dtype=torch.float64)
    acc = {"cos_layer": 0.0, "cos_output": 0.0, "n": 0, "p_target": 0.0, "kl": 0.0, "hz": 0.0, "post_change": 0.0,
           "cos_pu": 0.0}
    fill_post = post is not None and post_ref is not None and not post_ref  # the unsteered pass fills it
    probs_out = []
    captured = {}

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
    zt = None if z is None else torch.as_tensor(z, dtype=torch.float64)
    try:
        stack.enter_context(no_kv_cache(model))  # replayable inputs (and one pass per batch needs no cache)
        for i, b in enumerate(batches):
            if replay is not None:
                args, kwargs = replay[i]
                last, logits = adapter.tail(model, _first(layer_module(*args, **kwargs)), head)
            else:
                out = model(input_ids=b.ids, attention_mask=b.mask, output_hidden_states=True)
                last, logits = out.hidden_states[-1], (out.logits if head else None)
                if capture is not None:
                    capture.append(captured.pop("inputs"))
            stat = b.stat_mask
            s, n = _mean_abs_cos(captured["y"], ut, stat)
            acc["cos_layer"] += s
            acc["n"] += n
            acc["cos_output"] += _mean_abs_cos(last, ut, stat)[0]
            if zt is not None:
                acc["hz"] += float((captured["h"][stat].double() @ zt).abs().sum())
            if pu is not None:
                acc["cos_pu"] += _mean_abs_cos(captured["y"], torch.as_tensor(pu, dtype=torch.float64), stat)[0]
            if fill_post:
                post_ref.append(captured["post"].detach().clone())
            elif post is not None and post_ref is not None:
                acc["post_change"] += float((captured["post"][stat].double() - post_ref[i][stat].double())
                                            .norm(dim=-1).sum())
            if head:
                logp = torch.log_softmax(logits[stat].float(), dim=-1)  # (n, V)
                if ref_probs is None:
                    probs_out.append(logp)
                if tid is not None:
                    acc["p_target"] += float(logp[:, tid].exp().sum())
                if ref_probs is not None:
                    ref = ref_probs[i]
                    acc["kl"] += float((ref.exp() * (ref - logp)).sum(dtype=torch.float64))
    finally:
        stack.close()
        for h in handles:
            h.remove()
    n = max(acc["n"], 1)
    res = {"cos_layer": acc["cos_layer"] / n, "cos_output": acc["cos_output"] / n, "n_tokens": acc["n"],
           "p_target": acc["p_target"] / n if head and tid is not None else float("nan"),
           "kl": acc["kl"] / n if head and ref_probs is not None else float("nan"), "mean_abs_hz": acc["hz"] / n,
           "post_change": acc["post_change"] / n if post is not None and not fill_post else float("nan"),
           "cos_pu_layer": acc["cos_pu"] / n if pu is not None else float("nan")}
    return res, probs_out


SHARED_EDITS = ("every_depth", "last_depth")


def edits_every_depth(weights, shared_edit: str) -> bool:
    """Whether the last layer's edit acts at every depth (so every pass runs the whole stack): shared
    weights with ``shared_edit = "every_depth"`` (the edited matrix is the shared layer's)."""
    if shared_edit not in SHARED_EDITS:
        raise PowerlensError(f"unknown steering.shared_edit {shared_edit!r}", f"use one of {', '.join(SHARED_EDITS)}")
    return bool(weights.shared) and shared_edit == "every_depth"


def edited_depths(weights, shared_edit: str) -> list[int]:
    """The depths the last layer's edit acts at: every depth (:func:`edits_every_depth`) or the last one."""
    L = weights.n_layers
    return list(range(L)) if edits_every_depth(weights, shared_edit) else [L - 1]


def intervention_sites(weights, shared_edit: str) -> str:
    """Where both methods act, in words (for the outputs)."""
    if edits_every_depth(weights, shared_edit):
        return ("every depth: the edited output matrix is the shared layer's, so both methods (the rank-1 edit "
                "and the baseline's beta u at the same output projection) act at every depth, in both dynamics "
                "modes (steering.shared_edit: every_depth)")
    if weights.shared:
        return ("the last depth only: the shared layer is applied unedited at every earlier depth, and both "
                "methods act at its last application, in both dynamics modes (steering.shared_edit: last_depth)")
    return "the last layer's output projection only, for both methods, in both dynamics modes"


@torch.no_grad()
def attention_only_prefix(x0s: list, weights, batches, depths: list[int], norm: str = "l2") -> list:
    """x entering the first of the edited ``depths`` (:func:`edited_depths`), per batch (float64): the paper's
    law through the unedited depths, computed once for every target and kappa. One layer's weights are held
    at a time (layers outer, batches inner: each batch's arithmetic is the same as batch by batch)."""
    from powerlens.models.attention import attention_output, law_norm, visible_keys

    xs = list(x0s)
    for t in range(depths[0]):
        lw = weights.layer(t).to(torch.float64).exact()
        for i, b in enumerate(batches):
            allowed = visible_keys(xs[i].shape[1], weights.causal, lw.window, b.mask, device=xs[i].device)
            xs[i] = law_norm(xs[i] + attention_output(xs[i], lw, weights.n_heads, allowed), lw, norm)
    return xs


class LawCache:
    """What every setting of :func:`attention_only_steering` shares, for one list of inputs ``x_ins``: the
    attention at the first edited depth (its input is x_ins for every target, kappa and method; the edit
    and the baseline act after it) and the unedited law's final states (kappa 0: alpha = beta = 0 leaves
    the law unedited for every target and both methods). Each is computed once, on first use, by the same
    arithmetic as without the cache, so the numbers are the same bit for bit."""

    def __init__(self, x_ins: list):
        self.x_ins = x_ins
        self.first: dict[int, tuple] = {}  # batch -> (attention output (B, T, d), concat_h(A^h V^h) (B, T, H dh))
        self.plain: dict[int, torch.Tensor] = {}  # batch -> x after the last depth, unedited (B, T, d)


@torch.no_grad()
def attention_only_steering(x_ins: list, weights, batches, u: np.ndarray, z: np.ndarray, alpha: float,
                            depths: list[int], norm: str = "l2", cache: LawCache | None = None) -> dict:
    """The paper's law through the edited ``depths`` (:func:`edited_depths`: from the first to the last
    depth) with the rank-1 edit, and with the activation-addition baseline at matched norm of change, at the
    same site(s).

    x_ins: per batch, x entering the first edited depth (:func:`attention_only_prefix`, float64). ``cache``: a
    :class:`LawCache` of the same x_ins, shared by the calls of every target and kappa. Returns mean |cos(x,
    u)| after the last layer for both methods, the edit's mean norm of change at the site (last application)
    and the baseline's beta (= that norm)."""
    from powerlens.models.attention import attention_output, law_norm, visible_keys

    if list(depths) != list(range(depths[0], weights.n_layers)):
        raise PowerlensError(f"edited depths {depths} do not run to the last depth", "report this bug")
    if cache is not None and cache.x_ins is not x_ins:
        raise PowerlensError("the law's cache belongs to other inputs", "report this bug")
    wl = {u_: weights.layers[u_].to(torch.float64).exact() for u_ in {weights.layer_map[t] for t in depths}}
    u_t = torch.as_tensor(u, dtype=torch.float64)
    z_t = torch.as_tensor(z, dtype=torch.float64)

    def attend(x, lw, mask, i, t):
        if cache is not None and t == depths[0]:
            if i not in cache.first:
                cache.first[i] = attend(x, lw, mask, i, None)
            return cache.first[i]
        allowed = visible_keys(x.shape[1], weights.causal, lw.window, mask, device=x.device)
        ctx: list = []
        a = attention_output(x, lw, weights.n_heads, allowed, context=ctx)  # (B, T, d)
        return a, ctx[0]

    def step(x, lw, mask, i, t, edit=0.0, add=None):
        a, ctx = attend(x, lw, mask, i, t)
        change = None
        if edit:  # O' = O + alpha u z^T adds alpha (z^T h) u to the output, h = concat_h(A^h V^h)
            hz = edit * (ctx @ z_t)  # (B, T): alpha z^T h, the attention computed once
            a = a + hz[..., None] * u_t
            change = hz.abs()  # (B, T): alpha |z^T h| (u is a unit vector)
        if add is not None:
            a = a + add
        return law_norm(x + a, lw, norm), change

    def run(i, x, mask, stat, edit=0.0, add=None):
        plain = not edit and add is None
        if plain and cache is not None and i in cache.plain:
            return cache.plain[i], None
        change = None
        for t in depths:
            x, c = step(x, wl[weights.layer_map[t]], mask, i, t, edit, add)
            if c is not None:
                change = c[stat]
        if plain and cache is not None:
            cache.plain[i] = x
        return x, change

    cos = {"rank1": [0.0, 0], "actadd": [0.0, 0]}
    changes = []
    for i, (x0, b) in enumerate(zip(x_ins, batches)):
        x, ch = run(i, x0, b.mask, b.stat_mask, edit=alpha)
        if ch is not None:
            changes.append(ch)
        a = (x[b.stat_mask] @ u_t).abs() / x[b.stat_mask].norm(dim=-1).clamp_min(1e-30)
        cos["rank1"][0] += float(a.sum())
        cos["rank1"][1] += int(a.numel())
    beta = float(torch.cat(changes).mean()) if changes else 0.0
    for i, (x0, b) in enumerate(zip(x_ins, batches)):  # the baseline, at the edit's mean norm of change
        x, _ = run(i, x0, b.mask, b.stat_mask, add=beta * u_t if beta else None)
        a = (x[b.stat_mask] @ u_t).abs() / x[b.stat_mask].norm(dim=-1).clamp_min(1e-30)
        cos["actadd"][0] += float(a.sum())
        cos["actadd"][1] += int(a.numel())
    return {"cos_rank1": cos["rank1"][0] / max(cos["rank1"][1], 1),
            "cos_actadd": cos["actadd"][0] / max(cos["actadd"][1], 1), "change_norm": beta, "beta": beta}


CONTINUATION_COLUMNS = ["model", "target", "kappa", "prompt", "rank-1 (last layer O')",
                        "activation addition (matched norm)", "target_in_rank1", "target_in_actadd", "weights"]


def run_steering(model, tok, arch: str, w, bs: list, lam1: float, targets: list[dict], kappas: list[float], *,
                 head: bool, shared_edit: str, seed: int = 0, model_name: str = "", weights_label: str = "",
                 continuation_prompts: list[str] | None = None, continuation_tokens: int = 12) -> dict:
    """The steering experiment of claim C9 on a loaded model (its LM head if ``head``) and its extracted
    weights ``w``, over the batches ``bs``: for every target u and kappa (alpha = kappa ``lam1``, the last
    layer's |lambda_1|), the principal-eigenvector check of F', then the rank-1 edit and activation addition
    at matched norm of change, each in the real forward pass and in the attention-only law; for causal LMs
    and token targets, greedy continuations of ``continuation_prompts``. The model is restored exactly (a
    checksum proves it). Returns {"rows", "continuations", "checksum_before", "checksum_after", "generates"}."""
    from powerlens.models.adapters import get_adapter
    from powerlens.core.progress import progress as _progress

    adapter = get_adapter(arch)
    device = next(model.parameters()).device
    last = w.layer(w.n_layers - 1)
    F = last.F.numpy()
    W_V = last.v_per_head().double().numpy()  # (H dh, d): one block per query head (GQA: repeated per group)
    layer_module = adapter.layer_modules(model)[-1]
    site, _ = output_projection(model, arch)
    b_V = last.b_v_per_head().double().numpy()
    before = checksum(model)
    with torch.no_grad():
        x0s = [adapter.embed(model, b.ids.to(device)).double().cpu() for b in bs]  # (B, T, d) per batch
    # what no setting changes is computed once: the attention-only states entering the edited depth, and
    # (model mode) the last depth's inputs, captured by the first unsteered pass and replayed by every other
    # pass, which re-runs only the last depth, final norm and head; shared weights with the edit at every
    # depth: every pass runs the whole model
    depths = edited_depths(w, shared_edit)
    whole_stack = edits_every_depth(w, shared_edit)
    x_ins = attention_only_prefix(x0s, w, bs, depths)
    law_cache = LawCache(x_ins)  # the first edited depth's attention and the unedited law, once for all settings
    del x0s
    bound = kappa_bound(F, lam1)  # ||F||_2 (a full SVD): the same for every target (where it applies)
    post = adapter.output_norm(model)  # Gemma 3: the post-attention norm between W_O and the residual add
    p_gain = None if last.post_w is None else last.post_w.double().numpy()
    cap = float(np.sqrt(w.d_model) * np.abs(p_gain).max()) if post is not None else float("nan")
    eig_of_F = principal_eig(F) if 0 in kappas else None  # kappa 0: F' = F for every target, solved once
    last_inputs: list | None = None if whole_stack else []
    lm = "yes" if head else "no (vector alignment only)"
    rows, cont = [], []
    generates = bool(head and adapter.causal and continuation_prompts)
    if generates and w.shared and not whole_stack:
        raise PowerlensError("greedy continuations of a shared-weight causal LM would edit every depth, against "
                             "steering.shared_edit: last_depth", "use shared_edit: every_depth for this model, "
                             "or an empty steering.continuations.prompts list")
    for ti, tgt in enumerate(targets):
        u, tid = target_vector(model, tok, arch, tgt["kind"], tgt.get("token"), tgt.get("seed", seed), w.d_model)
        name = tgt["kind"] + (f":{tgt['token']}" if tgt.get("token") else f":seed{tgt.get('seed', seed)}")
        z_vec = rank1_z(W_V, u)
        resid = float(np.linalg.norm(W_V.T @ z_vec - u))  # u is a unit vector: relative as well
        note = bound_note(resid)
        pu = None
        if post is not None:  # what the residual stream receives from a change along u: direction p * u
            pu = p_gain * u
            pu = pu / np.linalg.norm(pu)
        post_ref = [] if post is not None else None
        first = last_inputs is not None and not last_inputs
        replay = None if last_inputs is None or first else last_inputs
        base_res, ref = measure_model(model, arch, layer_module, bs, u, tid, head,
                                      capture=last_inputs if first else None, replay=replay, post=post,
                                      post_ref=post_ref, pu=pu)
        replay = last_inputs
        for kappa in _progress(kappas, f"steering, target {ti + 1}/{len(targets)} {name} (kappas)", every=0):
            alpha = kappa * lam1
            chk = principal_check(F, W_V, u, alpha, eig_of_F, z_vec)
            if alpha == 0:  # kappa 0 changes nothing: the unsteered pass's numbers (KL exactly 0)
                r1 = ra = {**base_res, "kl": 0.0 if head else float("nan")}
            else:
                with rank1_output_edit(model, arch, u, z_vec, alpha) as _:
                    r1, _ = measure_model(model, arch, layer_module, bs, u, tid, head, ref_probs=ref,
                                          site=site, z=z_vec, replay=replay, post=post, post_ref=post_ref, pu=pu)
                ra = None
            # the edit's mean norm of change where the residual stream receives it: alpha |z^T h| at W_O's
            # output, or after the post-attention norm where one follows (Gemma 3); the baseline adds beta u there
            site_change = alpha * r1.get("mean_abs_hz", 0.0)
            beta = site_change if post is None else (r1["post_change"] if alpha else 0.0)
            if ra is None:
                ra, _ = measure_model(model, arch, layer_module, bs, u, tid, head, ref_probs=ref,
                                      add=beta * u, site=site, replay=replay, post=post, post_ref=post_ref, pu=pu)
            ao = attention_only_steering(x_ins, w, bs, u, z_vec, alpha, depths, cache=law_cache)
            if generates and tid is not None:
                with rank1_output_edit(model, arch, u, z_vec, alpha):
                    t1 = greedy_continuations(model, tok, continuation_prompts, continuation_tokens)
                ta = greedy_continuations(model, tok, continuation_prompts, continuation_tokens,
                                          site=site if post is None else post, add=beta * u if beta else None)
                for pi, p in enumerate(continuation_prompts):
                    cont.append({"model": model_name, "target": name, "kappa": kappa, "prompt": p,
                                 "rank-1 (last layer O')": t1[pi], "activation addition (matched norm)": ta[pi],
                                 "target_in_rank1": tgt["token"].strip().lower() in t1[pi].lower(),
                                 "target_in_actadd": tgt["token"].strip().lower() in ta[pi].lower(),
                                 "weights": weights_label})
            common = {"model": model_name, "target": name, "target_token_id": tid, "kappa": kappa,
                      "alpha": alpha, "kappa_bound": bound if not note else float("nan"), "bound_note": note,
                      "lstsq_residual": resid, "u_principal": chk["u_principal"],
                      "cos_v1_u": chk["cos_v1_u"], "gap_after": chk["gap"], "ratio_after": chk["ratio"],
                      "post_norm_cap": cap, "lm_head": lm, "weights": weights_label}
            rows.append({**common, "method": "rank-1 (last layer O')", "change_norm_model": beta,
                         "change_norm_at_W_O": site_change, "change_norm_attention_only": ao["change_norm"],
                         "cos_pu_after_layer_model": r1["cos_pu_layer"],
                         "edit_constant_norm": abs(alpha * float(z_vec @ b_V)),
                         "cos_after_layer_model": r1["cos_layer"], "cos_output_model": r1["cos_output"],
                         "cos_after_layer_attention_only": ao["cos_rank1"],
                         "p_target": r1["p_target"], "kl_from_unsteered": r1["kl"], "n_tokens": r1["n_tokens"]})
            rows.append({**common, "method": "activation addition (beta u, matched norm)",
                         "change_norm_model": beta, "change_norm_at_W_O": beta if post is None else float("nan"),
                         "change_norm_attention_only": ao["beta"], "cos_pu_after_layer_model": ra["cos_pu_layer"],
                         "edit_constant_norm": float("nan"),
                         "cos_after_layer_model": ra["cos_layer"], "cos_output_model": ra["cos_output"],
                         "cos_after_layer_attention_only": ao["cos_actadd"],
                         "p_target": ra["p_target"], "kl_from_unsteered": ra["kl"], "n_tokens": ra["n_tokens"]})
        rows.append({"model": model_name, "target": name, "target_token_id": tid, "kappa": -1.0,
                     "method": "unsteered", "cos_after_layer_model": base_res["cos_layer"],
                     "cos_output_model": base_res["cos_output"], "p_target": base_res["p_target"],
                     "cos_pu_after_layer_model": base_res["cos_pu_layer"], "lstsq_residual": resid,
                     "weights": weights_label, "lm_head": lm})
    after = checksum(model)
    if after != before:
        raise PowerlensError("the steering edit did not restore the model's weights", "report this bug")
    return {"rows": rows, "continuations": cont, "checksum_before": before, "checksum_after": after,
            "generates": generates}


@torch.no_grad()
def greedy_continuations(model, tokenizer, prompts: list[str], new_tokens: int, site=None,
                         add: np.ndarray | None = None) -> list[str]:
    """Greedy continuations (``new_tokens`` each, no sampling) of each prompt, one at a time (no padding).
    ``site`` + ``add``: activation addition of ``add`` to the site's output at every step (the baseline); a
    rank-1 edit is applied by the caller (:func:`rank1_output_edit`) around this call."""
    handles = []
    if add is not None:
        vec = torch.as_tensor(add)

        def site_add(mod, args, out):
            return out + vec.to(dtype=out.dtype, device=out.device)

        handles.append(site.register_forward_hook(site_add))
    device = next(model.parameters()).device
    texts = []
    try:
        for p in prompts:
            enc = tokenizer(p, return_tensors="pt")
            ids = enc["input_ids"].to(device)
            out = model.generate(input_ids=ids, attention_mask=enc["attention_mask"].to(device),
                                 max_new_tokens=int(new_tokens), do_sample=False, num_beams=1,
                                 pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                                 else tokenizer.eos_token_id)
            texts.append(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
    finally:
        for h in handles:
            h.remove()
    return texts

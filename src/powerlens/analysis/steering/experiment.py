"""The steering experiment: every target and kappa, the rank-1 edit against activation addition at matched
norm of change, in the real forward pass and the law; greedy continuations of causal LMs."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from powerlens.analysis.kappa_sweep import MAX_BRACKET_STEPS, KappaRule, beta_to_bracket
from powerlens.analysis.steering.algebra import bound_note, kappa_bound, principal_check, principal_eig, rank1_z
from powerlens.analysis.steering.edits import checksum, output_projection, rank1_output_edit, target_vector
from powerlens.analysis.steering.generate import check_continuation_lengths, greedy_continuations
from powerlens.analysis.steering.law import (
    LawCache,
    attention_only_prefix,
    attention_only_steering,
    edited_depths,
    edits_every_depth,
)
from powerlens.analysis.steering.matched import matched_columns
from powerlens.analysis.steering.measure import measure_model
from powerlens.core.errors import PowerlensError
from powerlens.core.progress import progress as _progress
from powerlens.core.scratch import reusing_scratch
from powerlens.models.adapters import get_adapter
from powerlens.models.weights import ModelWeights

CONTINUATION_COLUMNS = ["model", "target", "kappa", "prompt", "rank-1 (last layer O')",
                        "activation addition (matched norm)", "target_in_rank1", "target_in_actadd", "weights"]
#: The continuations' columns of text a prompt or a model wrote (guarded in the CSV, :func:`csv_text`).
CONTINUATION_TEXT = ("prompt", "rank-1 (last layer O')", "activation addition (matched norm)")


@dataclass(frozen=True, kw_only=True)
class _Run:
    """The loaded model and what a pass over the batches needs."""

    model: "torch.nn.Module"
    tok: object  # the model's tokenizer (transformers), for target tokens and continuations
    arch: str
    w: ModelWeights
    bs: list  # the batches (powerlens.core.corpus)
    head: bool  # the LM head is computed
    layer_module: "torch.nn.Module"  # the last layer's module
    site: "torch.nn.Module"  # the last layer's output projection
    post: "torch.nn.Module | None"  # Gemma 3: the post-attention norm between W_O and the residual add
    last_inputs: list | None  # the last depth's inputs, replayed by every pass but the first (None: whole stack)
    bs_kl: list | None  # the unrelated prompts' batches the KL is measured on (models with an LM head)
    kl_inputs: list | None  # their last depth's inputs, as last_inputs


@dataclass(frozen=True, kw_only=True)
class _Algebra:
    """The last layer's matrices and what follows from them, the same for every target."""

    lam1: float  # |lambda_1| of the last layer's F: alpha = kappa lam1
    F: np.ndarray  # (d, d): the last layer's F
    W_V: np.ndarray  # (H dh, d): one block per query head (GQA: repeated per group)
    b_V: np.ndarray  # (H dh,)
    p_gain: np.ndarray | None  # (d,) Gemma 3's post-attention norm gain
    cap: float  # the norm's largest output, sqrt(d) max |p| (NaN without a norm)
    bound: float  # the sufficient kappa of the bound (paper.md section 6)
    eig_of_F: tuple | None  # kappa 0: F' = F for every target, solved once


@dataclass(frozen=True, kw_only=True)
class _Law:
    """The attention-only law's side: the edited depths and the states entering the first of them."""

    depths: list[int]
    x_ins: list
    cache: LawCache


@dataclass(frozen=True, kw_only=True)
class _Labels:
    """What the rows say and whether continuations are generated."""

    lm: str
    generates: bool
    model_name: str
    weights_label: str
    continuation_prompts: list[str]
    continuation_tokens: int
    seed: int  # the bootstrap's over prompts (steering.matched)


@dataclass
class PassWork:
    """The counted tokens (specials and padding excluded) the measuring passes of one steering run ran, added up
    as they run: what the speed table's bound counts (:func:`powerlens.pipeline.resources.arithmetic`). A pass
    without a replay runs the whole model; a replayed one the last depth alone (and what follows it); the head,
    where the model has one, on every counted token of every pass. Both prompt sets count: the steering prompts
    and the unrelated prompts the KL is measured on, every setting (target, kappa, method) and the beta sweep."""

    whole: int = 0  # counted tokens through the whole model
    last_depth: int = 0  # counted tokens through the last depth alone (replayed inputs)
    head: int = 0  # counted tokens through the LM head
    passes: int = 0  # measuring passes (one over every batch of a prompt set)

    def add(self, batches: list, head: bool, replayed: bool) -> None:
        n = int(sum(int(b.stat_mask.sum()) for b in batches))
        if replayed:
            self.last_depth += n
        else:
            self.whole += n
        self.head += n if head else 0
        self.passes += 1


@dataclass(frozen=True, kw_only=True)
class _Setting:
    """What every target and kappa of one model's steering share, computed once."""

    run: _Run
    alg: _Algebra
    law: _Law
    labels: _Labels
    work: PassWork


def _measure(s: _Setting, model, arch: str, layer_module, batches, u, tid, head: bool, **kw):
    """:func:`measure_model` with the same arguments, its tokens added to ``s.work``."""
    s.work.add(batches, head, kw.get("replay") is not None)
    return measure_model(model, arch, layer_module, batches, u, tid, head, **kw)


@dataclass(frozen=True, kw_only=True)
class _Target:
    """One target u and its unsteered pass, shared by its kappas."""

    u: np.ndarray  # (d,) unit vector
    tid: int | None  # its token id (None: a random direction)
    name: str
    token: str | None
    z: np.ndarray  # (H dh,): least-squares V^T z = u
    resid: float  # ||V^T z - u||
    note: str  # the bound's note
    pu: np.ndarray | None  # Gemma 3: the direction p * u the residual stream receives
    saturation: float
    post_ref: list | None
    base: dict  # the unsteered pass's measures
    ref: list  # its log-probabilities, a measure.Reference per batch (the steered passes' KL)
    ref_kl: list | None  # the unsteered log-probabilities on the unrelated prompts
    direction: np.ndarray  # the baseline's direction: u, or p * u (normalised) where a norm follows W_O
    prompts: dict  # per-prompt sums of each pass, (method, kappa or beta) -> (P, 3) (steering.matched)


def run_steering(model, tok, arch: str, w, bs: list, lam1: float, targets: list[dict], kappas: list[float], *,
                 head: bool, shared_edit: str, seed: int = 0, model_name: str = "", weights_label: str = "",
                 continuation_prompts: list[str] | None = None, continuation_tokens: int = 12,
                 kl_batches: list | None = None, rule: KappaRule | None = None) -> dict:
    """The steering experiment of claim C9 on a loaded model (its LM head if ``head``) and its extracted
    weights ``w``, over the batches ``bs``: for every target u and kappa (alpha = kappa ``lam1``, the last
    layer's |lambda_1|), the principal-eigenvector check of F', then the rank-1 edit and activation addition
    at matched norm of change, each in the real forward pass and in the attention-only law; for causal LMs
    and token targets, greedy continuations of ``continuation_prompts``. The model is restored exactly (a
    checksum proves it). With an LM head and ``kl_batches`` (prompts unrelated to the steering prompts), the KL
    of each setting is also measured there, and activation addition is run over a sweep of beta (rows "activation
    addition (beta sweep)", extended until it brackets the edit's KL) so that the two methods can be compared
    at matched KL (paper.md section 4d, C9). ``rule``: past ``kappas``, each target's kappa doubles as the rule
    says (revision 6, :class:`~powerlens.analysis.kappa_sweep.KappaRule`; None: the configured kappas only);
    every row of a target records why its sweep stopped (``sweep_stop``).
    Returns {"rows", "continuations", "checksum_before", "checksum_after", "generates", "work"} (``work``: the
    tokens the passes ran, :class:`PassWork`)."""
    before = checksum(model)
    s = _prepare(model, tok, arch, w, bs, lam1, kappas, head=head, shared_edit=shared_edit, model_name=model_name,
                 seed=seed, weights_label=weights_label, continuation_prompts=continuation_prompts or [],
                 continuation_tokens=continuation_tokens, kl_batches=kl_batches if head else None)
    rows, cont = [], []
    with reusing_scratch():  # one scratch for every pass: its (tokens, vocabulary) blocks are mapped once
        for ti, tgt in enumerate(targets):
            _target(s, tgt, ti, len(targets), kappas, seed, rows, cont, rule or KappaRule(1.0, 0.0))
    after = checksum(model)
    if after != before:
        raise PowerlensError("the steering edit did not restore the model's weights", "report this bug")
    return {"rows": rows, "continuations": cont, "checksum_before": before, "checksum_after": after,
            "generates": s.labels.generates, "work": asdict(s.work)}


def _prepare(model, tok, arch: str, w, bs: list, lam1: float, kappas: list[float], *, head: bool,
             shared_edit: str, kl_batches: list | None, **labels) -> _Setting:
    """What no setting changes, computed once: the attention-only states entering the edited depth, the law's
    cache, the bound, and (model mode) the list the first unsteered pass fills with the last depth's inputs,
    replayed by every other pass, which re-runs only the last depth, final norm and head; shared weights with
    the edit at every depth: every pass runs the whole model."""
    adapter = get_adapter(arch)
    device = next(model.parameters()).device
    last = w.layer(w.n_layers - 1)
    F = last.F.numpy()
    with torch.no_grad():
        x0s = [adapter.embed(model, b.ids.to(device)).double().cpu() for b in bs]  # (B, T, d) per batch
    depths = edited_depths(w, shared_edit)
    whole_stack = edits_every_depth(w, shared_edit)
    x_ins = attention_only_prefix(x0s, w, bs, depths)
    del x0s
    post = adapter.output_norm(model)
    p_gain = None if last.post_w is None else last.post_w.double().numpy()
    generates = bool(head and adapter.causal and labels["continuation_prompts"])
    if generates and w.shared and not whole_stack:
        raise PowerlensError("greedy continuations of a shared-weight causal LM would edit every depth, against "
                             "steering.shared_edit: last_depth", "use shared_edit: every_depth for this model, "
                             "or an empty steering.continuations.prompts list")
    if generates:
        check_continuation_lengths(tok, labels["continuation_prompts"], labels["continuation_tokens"],
                                   adapter.max_positions(model.config))
    run = _Run(model=model, tok=tok, arch=arch, w=w, bs=bs, head=head, layer_module=adapter.layer_modules(model)[-1],
               site=output_projection(model, arch)[0], post=post, last_inputs=None if whole_stack else [],
               bs_kl=kl_batches or None, kl_inputs=None if whole_stack or not kl_batches else [])
    alg = _Algebra(lam1=lam1, F=F, W_V=last.v_per_head().double().numpy(), b_V=last.b_v_per_head().double().numpy(),
                   p_gain=p_gain,
                   cap=float(np.sqrt(w.d_model) * np.abs(p_gain).max()) if post is not None else float("nan"),
                   bound=kappa_bound(F, lam1),  # ||F||_2 (a full SVD): the same for every target (where it applies)
                   eig_of_F=principal_eig(F) if 0 in kappas else None)
    return _Setting(run=run, alg=alg, law=_Law(depths=depths, x_ins=x_ins, cache=LawCache(x_ins)), work=PassWork(),
                    labels=_Labels(lm="yes" if head else "no (vector alignment only)", generates=generates, **labels))


def _target(s: _Setting, tgt: dict, ti: int, n_targets: int, kappas: list[float], seed: int, rows: list,
            cont: list, rule: KappaRule) -> None:
    """One target u: the unsteered pass, every configured kappa, then the doubling ``rule`` asks (rows and
    continuations appended)."""
    u, tid = target_vector(s.run.model, s.run.tok, s.run.arch, tgt["kind"], tgt.get("token"), tgt.get("seed", seed),
                           s.run.w.d_model)
    name = tgt["kind"] + (f":{tgt['token']}" if tgt.get("token") else f":seed{tgt.get('seed', seed)}")
    z_vec = rank1_z(s.alg.W_V, u)
    resid = float(np.linalg.norm(s.alg.W_V.T @ z_vec - u))  # u is a unit vector: relative as well
    pu, saturation = None, float("nan")
    if s.run.post is not None:  # what the residual stream receives from a change along u: direction p * u
        pu = s.alg.p_gain * u
        saturation = float(np.sqrt(s.run.w.d_model) * np.linalg.norm(pu))  # the norm's output along u, at most
        pu = pu / np.linalg.norm(pu)
    post_ref = [] if s.run.post is not None else None
    first = s.run.last_inputs is not None and not s.run.last_inputs
    replay = None if s.run.last_inputs is None or first else s.run.last_inputs
    base, ref = _measure(s, s.run.model, s.run.arch, s.run.layer_module, s.run.bs, u, tid, s.run.head,
                         capture=s.run.last_inputs if first else None, replay=replay, post=s.run.post,
                         post_ref=post_ref, pu=pu, ceiling=saturation if pu is not None else None)
    ref_kl = None
    if s.run.bs_kl:  # the unsteered pass on the unrelated prompts: the reference of every setting's KL
        first_kl = s.run.kl_inputs is not None and not s.run.kl_inputs
        _, ref_kl = _measure(s, s.run.model, s.run.arch, s.run.layer_module, s.run.bs_kl, u, tid, s.run.head,
                             capture=s.run.kl_inputs if first_kl else None,
                             replay=None if s.run.kl_inputs is None or first_kl else s.run.kl_inputs)
    target = _Target(u=u, tid=tid, name=name, z=z_vec, resid=resid, note=bound_note(resid), pu=pu, post_ref=post_ref,
                     saturation=saturation, base=base, ref=ref, token=tgt.get("token"), ref_kl=ref_kl,
                     direction=u if pu is None else pu, prompts={})
    mine: list[dict] = []
    for kappa in _progress(kappas, f"steering, target {ti + 1}/{n_targets} {name} (kappas)", every=0):
        mine.extend(_kappa(s, target, kappa, cont))
    stop = _double(s, target, rule, mine, cont)
    rows.extend({**r, "sweep_stop": stop} for r in mine)
    if ref_kl is not None:
        rows.extend(_beta_sweep(s, target, rows))
    rows.append({"model": s.labels.model_name, "target": name, "target_token_id": tid, "kappa": -1.0,
                 "method": "unsteered", "cos_after_layer_model": base["cos_layer"],
                 "cos_output_model": base["cos_output"], "p_target": base["p_target"],
                 "cos_pu_after_layer_model": base["cos_pu_layer"], "lstsq_residual": resid,
                 "cos_ceiling": base["cos_ceiling"], "weights": s.labels.weights_label, "lm_head": s.labels.lm})


def _double(s: _Setting, g: _Target, rule: KappaRule, mine: list[dict], cont: list) -> str:
    """Revision 6's doubling of kappa past the configured ones for one target (rows appended to ``mine``); the
    stop's key (:data:`~powerlens.analysis.kappa_sweep.STOPS`)."""
    while True:
        curve = {float(r["kappa"]): float(r["cos_after_layer_model"]) for r in mine
                 if str(r["method"]).startswith("rank-1")}
        kappa, why = rule.next(curve, float(g.base["cos_ceiling"]))
        if kappa is None:
            return why
        print(f"steering, target {g.name}: kappa {kappa:g} (doubling: the real pass's mean |cos| "
              f"{curve[max(curve)]:.3g} < {rule.criterion:g})", flush=True)
        mine.extend(_kappa(s, g, kappa, cont))


def _kappa(s: _Setting, g: _Target, kappa: float, cont: list) -> list[dict]:
    """One kappa of one target: both methods in the real forward pass and the law; the two rows."""
    u, tid, z_vec = g.u, g.tid, g.z
    scale = kappa * s.alg.lam1
    chk = principal_check(s.alg.F, s.alg.W_V, u, scale, s.alg.eig_of_F, z_vec)
    run_args = (s.run.model, s.run.arch, s.run.layer_module, s.run.bs, u, tid, s.run.head)
    measure = dict(ref_probs=g.ref, site=s.run.site, replay=s.run.last_inputs, post=s.run.post, post_ref=g.post_ref,
                   pu=g.pu)
    kl_args = (s.run.model, s.run.arch, s.run.layer_module, s.run.bs_kl, u, tid, s.run.head)
    kl_measure = dict(ref_probs=g.ref_kl, site=s.run.site, replay=s.run.kl_inputs, post=s.run.post)
    if scale == 0:  # kappa 0 changes nothing: the unsteered pass's numbers (KL exactly 0)
        r1 = ra = {**g.base, "kl": 0.0 if s.run.head else float("nan"),
                   "kl_unrelated": 0.0 if g.ref_kl is not None else float("nan")}
    else:
        with rank1_output_edit(s.run.model, s.run.arch, u, z_vec, scale) as _:
            r1, _ = _measure(s, *run_args, z=z_vec, **measure)
            r1["kl_unrelated"] = (_measure(s, *kl_args, **kl_measure)[0]["kl"] if g.ref_kl is not None
                                  else float("nan"))
        ra = None
    g.prompts[("rank-1", float(kappa))] = r1["prompt"]
    # the edit's mean norm of change where the residual stream receives it: alpha |z^T h| at W_O's
    # output, or after the post-attention norm where one follows (Gemma 3); the baseline adds beta u there
    site_change = scale * r1.get("mean_abs_hz", 0.0)
    beta = site_change if s.run.post is None else (r1["post_change"] if scale else 0.0)
    if ra is None:
        ra, _ = _measure(s, *run_args, add=beta * g.direction, **measure)
        ra["kl_unrelated"] = (_measure(s, *kl_args, add=beta * g.direction, **kl_measure)[0]["kl"]
                              if g.ref_kl is not None else float("nan"))
    ao = attention_only_steering(s.law.x_ins, s.run.w, s.run.bs, u, z_vec, scale, s.law.depths, cache=s.law.cache)
    if s.labels.generates and tid is not None:
        cont.extend(_continuations(s, g, kappa, scale, beta))
    common = {"model": s.labels.model_name, "target": g.name, "target_token_id": tid, "kappa": kappa,
              "alpha": scale, "kappa_bound": s.alg.bound if not g.note else float("nan"), "bound_note": g.note,
              "lstsq_residual": g.resid, "u_principal": chk["u_principal"],
              "cos_v1_u": chk["cos_v1_u"], "gap_after": chk["gap"], "ratio_after": chk["ratio"],
              "post_norm_cap": s.alg.cap, "lm_head": s.labels.lm, "weights": s.labels.weights_label,
              # the largest change along u the norm lets through for this target: sqrt(d) ||p * u|| (section 6)
              "post_norm_saturation_u": g.saturation, "cos_ceiling": g.base["cos_ceiling"]}
    return [{**common, "method": "rank-1 (last layer O')", "change_norm_model": beta,
             "change_norm_at_W_O": site_change, "change_norm_attention_only": ao["change_norm"],
             "cos_pu_after_layer_model": r1["cos_pu_layer"],
             "edit_constant_norm": abs(scale * float(z_vec @ s.alg.b_V)),
             "cos_after_layer_model": r1["cos_layer"], "cos_output_model": r1["cos_output"],
             "cos_after_layer_attention_only": ao["cos_rank1"],
             "p_target": r1["p_target"], "kl_from_unsteered": r1["kl"], "kl_unrelated": r1["kl_unrelated"],
             "saturation_share": (r1.get("post_along_pu", float("nan")) / g.saturation if g.pu is not None and scale
                                  else float("nan")), "n_tokens": r1["n_tokens"]},
            {**common, "method": "activation addition (beta u, matched norm)" if g.pu is None else
             "activation addition (beta p*u, matched norm)", "beta": beta,
             "change_norm_model": beta, "change_norm_at_W_O": beta if s.run.post is None else float("nan"),
             "change_norm_attention_only": ao["beta"], "cos_pu_after_layer_model": ra["cos_pu_layer"],
             "edit_constant_norm": float("nan"),
             "cos_after_layer_model": ra["cos_layer"], "cos_output_model": ra["cos_output"],
             "cos_after_layer_attention_only": ao["cos_actadd"],
             "p_target": ra["p_target"], "kl_from_unsteered": ra["kl"], "kl_unrelated": ra["kl_unrelated"],
             "n_tokens": ra["n_tokens"]}]


#: The beta sweep of activation addition, in units of the matched-norm beta at the largest kappa: a curve of
#: alignment and P(target) against the KL on unrelated prompts, to compare with the edit at matched KL.
BETA_SWEEP = tuple(2.0 ** k for k in range(-6, 7))


def _beta_sweep(s: _Setting, g: _Target, rows: list[dict]) -> list[dict]:
    """Activation addition of beta times the baseline's direction over :data:`BETA_SWEEP` (relative to the
    largest kappa's matched-norm beta), then halved or doubled until its KL range brackets the edit's KL at the
    target's largest kappa (:func:`~powerlens.analysis.kappa_sweep.beta_to_bracket`, at most
    :data:`~powerlens.analysis.kappa_sweep.MAX_BRACKET_STEPS` more): alignment and P(target) on the steering
    prompts, KL on the unrelated ones (paper.md sections 4d and 4e, C9: activation addition at matched KL)."""
    mine = [r for r in rows if r.get("target") == g.name and r.get("kappa", -1) > 0]
    aa = [r for r in mine if str(r.get("method", "")).startswith("activation")]
    b0 = max((float(r["beta"]) for r in aa), default=0.0)
    if not b0 > 0:
        return []
    top = max(mine, key=lambda r: (float(r["kappa"]), str(r["method"]).startswith("rank-1")))
    out = {f: _beta_point(s, g, f * b0) for f in BETA_SWEEP}
    for _ in range(MAX_BRACKET_STEPS):
        f = beta_to_bracket({k: float(v["kl_unrelated"]) for k, v in out.items()}, float(top["kl_unrelated"]))
        if f is None:
            break
        out[f] = _beta_point(s, g, f * b0)
    points = [(float(r["kl_unrelated"]), float(r["cos_after_layer_model"]), g.prompts[("sweep", float(r["beta"]))])
              for r in out.values()]
    top.update(matched_columns(g.prompts[("rank-1", float(top["kappa"]))], points, float(top["kl_unrelated"]),
                               s.labels.seed))
    return [out[f] for f in sorted(out)]


def _beta_point(s: _Setting, g: _Target, beta: float) -> dict:
    """One point of activation addition's beta sweep (a row)."""
    add = beta * g.direction
    ra, _ = _measure(s, s.run.model, s.run.arch, s.run.layer_module, s.run.bs, g.u, g.tid, s.run.head,
                     ref_probs=g.ref, add=add, site=s.run.site, replay=s.run.last_inputs, post=s.run.post, pu=g.pu)
    kl = _measure(s, s.run.model, s.run.arch, s.run.layer_module, s.run.bs_kl, g.u, g.tid, s.run.head,
                  ref_probs=g.ref_kl, add=add, site=s.run.site, replay=s.run.kl_inputs, post=s.run.post)[0]["kl"]
    g.prompts[("sweep", float(beta))] = ra["prompt"]
    return {"model": s.labels.model_name, "target": g.name, "target_token_id": g.tid, "kappa": float("nan"),
            "method": "activation addition (beta sweep)", "beta": beta,
            "cos_after_layer_model": ra["cos_layer"], "cos_output_model": ra["cos_output"],
            "cos_pu_after_layer_model": ra["cos_pu_layer"], "p_target": ra["p_target"],
            "kl_from_unsteered": ra["kl"], "kl_unrelated": kl, "n_tokens": ra["n_tokens"],
            "weights": s.labels.weights_label, "lm_head": s.labels.lm}


def _continuations(s: _Setting, g: _Target, kappa: float, scale: float, beta: float) -> list[dict]:
    """Greedy continuations of the fixed prompts with the edit and with the baseline (causal LMs)."""
    u = g.u
    with rank1_output_edit(s.run.model, s.run.arch, u, g.z, scale):
        t1 = greedy_continuations(s.run.model, s.run.tok, s.labels.continuation_prompts, s.labels.continuation_tokens)
    ta = greedy_continuations(s.run.model, s.run.tok, s.labels.continuation_prompts, s.labels.continuation_tokens,
                              site=s.run.site if s.run.post is None else s.run.post,
                              add=beta * g.direction if beta else None)
    token = g.token.strip().lower()
    return [{"model": s.labels.model_name, "target": g.name, "kappa": kappa, "prompt": p,
             "rank-1 (last layer O')": t1[pi], "activation addition (matched norm)": ta[pi],
             "target_in_rank1": token in t1[pi].lower(), "target_in_actadd": token in ta[pi].lower(),
             "weights": s.labels.weights_label} for pi, p in enumerate(s.labels.continuation_prompts)]

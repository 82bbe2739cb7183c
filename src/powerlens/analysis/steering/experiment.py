"""The steering experiment: every target and kappa, the rank-1 edit against activation addition at matched
norm of change, in the real forward pass and the law; greedy continuations of causal LMs."""

from __future__ import annotations


import numpy as np
import torch

from powerlens.core.errors import PowerlensError
from powerlens.analysis.steering.algebra import bound_note, kappa_bound, principal_check, principal_eig, rank1_z
from powerlens.analysis.steering.edits import checksum, output_projection, rank1_output_edit, target_vector
from powerlens.analysis.steering.law import LawCache, attention_only_prefix, attention_only_steering, edited_depths, edits_every_depth
from powerlens.analysis.steering.measure import measure_model



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


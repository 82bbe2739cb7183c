"""Rank-1 steering of one model's last layer (O' = O + alpha u z^T) against activation addition, over a
kappa sweep and several targets, in the real forward pass and the attention-only law."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from powerlens.analysis.kappa_sweep import FLAT, MAX_BRACKET_STEPS, STOPS
from powerlens.core.corpus import prompt_batches, read_prompts
from powerlens.core.fmt import csv_text
from powerlens.core.io import read_generated_json, read_generated_npz, write_csv, write_json
from powerlens.core.runtime import resolve_device, set_threads
from powerlens.models.adapters import get_adapter
from powerlens.models.sources import load_model, load_tokenizer
from powerlens.outputs import provenance
from powerlens.pipeline.options import Option, model_files

if TYPE_CHECKING:
    import pandas as pd

OPTIONS = model_files("manifest", "tensors", "meta", "spectra", "prompts") + (
    Option("out-csv", "output:csv"),
    Option("out-json", "output:json"),
    Option("targets", "param:targets", kind="json", help="JSON list of {kind, token?, seed?}"),
    Option("kappas", "config:steering.kappas", kind="json", help="JSON list of kappa values"),
    Option("max-prompts", "config:steering.max_prompts", kind="int"),
    Option("batch-size", "config:steering.batch_size", kind="int", help="prompts per batch of the steering passes"),
    Option("max-tokens", "config:steering.max_tokens", kind="int"),
    Option("shared-edit", "config:steering.shared_edit", choices=("every_depth", "last_depth"),
           help="shared-weight models: edit and baseline at every depth or at the last depth only"),
    Option("seed", "config:seed", kind="int"),
    Option("device", "config:device"),
    Option("threads", "threads", kind="int"),
    Option("out-continuations", "output:continuations", help="CSV of greedy continuations (causal LMs)"),
    Option("continuation-prompts", "config:steering.continuations.prompts", kind="json",
           help="JSON list of prompts to continue"),
    Option("continuation-tokens", "config:steering.continuations.new_tokens", kind="int"),
    Option("alignment", "config:claims.C9_alignment", kind="float",
           help="C9's criterion: a target's kappa doubles until its real-pass mean |cos| reaches it (revision 6)"),
    Option("kappa-cap", "config:claims.C9_kappa_cap", kind="float",
           help="the largest kappa the doubling may reach (0: the configured kappas only)"),
)


def steering(manifest_path, weights_st, weights_json, *, spectra_npz, prompts_path, out_csv, out_json,
             targets: list[dict], kappas: list[float], max_prompts: int, batch_size: int, max_tokens: int,
             shared_edit: str, seed: int, device: str, threads: int, out_continuations: str | Path | None,
             continuation_prompts: list[str], continuation_tokens: int, alignment: float,
             kappa_cap: float) -> "pd.DataFrame":
    """Rank-1 steering of the last layer vs activation addition, in both dynamics modes (claim C9); for
    causal LMs and token targets, greedy continuations of fixed prompts at each kappa (both methods). Past
    ``kappas``, each target's kappa doubles until its real-pass mean |cos| reaches ``alignment``, its curve
    flattens, or ``kappa_cap`` (paper.md section 4e)."""
    import numpy as np
    import pandas as pd
    import torch

    from powerlens.analysis import steering as st
    from powerlens.models.weights import ModelWeights

    threads = set_threads(threads)
    device = resolve_device(device)
    man = read_generated_json(manifest_path, "fetch_model")
    w = ModelWeights.load(weights_st, weights_json, lazy=True)  # one layer's tensors at a time
    adapter = get_adapter(man["arch"])
    import transformers

    cfg = transformers.AutoConfig.from_pretrained(man["path"], local_files_only=True, trust_remote_code=False)
    head = st.config_has_lm_head(cfg)
    model = load_model(man, dtype=torch.float32, head=head).to(device)
    tok = load_tokenizer(man)
    every = read_prompts(prompts_path)
    prompts = every[:max_prompts]
    max_len = min(max_tokens, adapter.max_positions(model.config))
    bs, _, _, truncated = prompt_batches(prompts, tok, max_len, batch_size)
    # the KL of a setting is measured on prompts unrelated to the steering ones: the next max_prompts of the corpus
    # (our choice; none when the corpus has no more, or without an LM head)
    unrelated = every[max_prompts:2 * max_prompts] if head else []
    bs_kl = prompt_batches(unrelated, tok, max_len, batch_size)[0] if unrelated else None
    lam1 = float(np.abs(read_generated_npz(spectra_npz, "spectra")["eigvals"][w.layer_map[-1]][0]))
    res = st.run_steering(model, tok, man["arch"], w, bs, lam1, targets, kappas, seed=seed, head=head,
                          shared_edit=shared_edit,
                          model_name=man["model"], weights_label=man["weights_label"],
                          continuation_prompts=continuation_prompts, continuation_tokens=continuation_tokens,
                          kl_batches=bs_kl, rule=st.KappaRule(alignment, kappa_cap))
    df = pd.DataFrame(res["rows"])
    write_csv(out_csv, df)
    if out_continuations is not None:
        cont = pd.DataFrame(res["continuations"], columns=st.CONTINUATION_COLUMNS)
        for c in st.CONTINUATION_TEXT:  # generated text is data: never a formula in a spreadsheet
            cont[c] = cont[c].map(csv_text)
        write_csv(out_continuations, cont)
    write_json(out_json, _record(man, w, res, df, targets=targets, kappas=kappas, shared_edit=shared_edit,
                                 rule=st.KappaRule(alignment, kappa_cap),
                                 n_prompts=len(prompts), truncated=truncated, head=head, n_unrelated=len(unrelated),
                                 continuation_prompts=continuation_prompts, continuation_tokens=continuation_tokens,
                                 threads=threads, seed=seed, device=device))
    return df


def _record(man: dict, w, res: dict, df, *, targets, kappas, rule, shared_edit: str, n_prompts: int, truncated: int,
            head: bool, n_unrelated: int, continuation_prompts, continuation_tokens: int, threads: int, seed: int,
            device: str) -> dict:
    """What one steering run did (its JSON): the checksums, the sites, the baseline, the bound, provenance."""
    from powerlens.analysis import steering as st

    before, after, generates = res["checksum_before"], res["checksum_after"], res["generates"]
    caps = df["post_norm_cap"].dropna() if "post_norm_cap" in df else []
    post_cap = float(caps.iloc[0]) if len(caps) else None
    return {"model": man["model"], "weights_label": man["weights_label"], "lm_head": head,
                          "checksum_before": before, "checksum_after": after, "n_prompts": n_prompts,
                          "truncated_prompts": truncated, "targets": targets, "kappas": kappas,
                          "kappa_doubling": _doubling(rule, df),
                          "kl_prompts": ({"n": n_unrelated, "which": "the corpus prompts after the steering prompts "
                                          "(our choice: unrelated to them); the KL of each setting against the "
                                          "unsteered model, mean over counted tokens"} if n_unrelated else
                                         "none: no LM head, or no corpus prompt beyond the steering ones"),
                          "beta_sweep": ("activation addition at beta = 2^k times the largest kappa's matched beta, "
                                         "k = -6..6, along the baseline's direction, then halved or doubled (at most "
                                         f"{MAX_BRACKET_STEPS} more) until it brackets the edit's KL at the "
                                         "target's largest kappa, for the comparison at matched KL (paper.md "
                                         "sections 4d, 4e); at that kappa the rank-1 row holds the edit minus "
                                         "activation addition at the edit's KL, in mean |cos| and in P(target), with "
                                         f"{int(st.matched.LEVEL * 100)}% percentile intervals from "
                                         f"{st.matched.BOOT} seeded bootstrap resamples of the prompts "
                                         "(columns diff_cos_at_kl*, diff_p_at_kl*)") if n_unrelated else "none",
                          "shared_weights": w.shared, "shared_edit": shared_edit,
                          "intervention_sites": st.intervention_sites(w, shared_edit),
                          "baseline": ("activation addition of beta u at the output projection's output, beta = "
                                       "the edit's mean norm of change there (alpha |z^T h|) at each kappa: the two "
                                       "methods are compared on curves over the norm of the change"
                                       if not post_cap else
                                       "activation addition of beta p * u (normalised) after the post-attention norm "
                                       "(where the residual stream receives the attention output, along the edit's "
                                       "effective direction), beta = the edit's mean norm of change there, ||P(o') - "
                                       "P(o)||, at each kappa"),
                          "post_attention_norm": ({"cap": post_cap, "meaning": "the largest norm the post-attention "
                                                   "norm's output can have (sqrt(d) max |p_i|, eps aside): every "
                                                   "change at W_O reaches the residual stream through it, capped, "
                                                   "and along p * u rather than u"} if post_cap else
                                                  "none: W_O's output is added to the residual stream directly"),
                          "stated_bound": ("given where z solves V^T z = u exactly (||V^T z - u|| <= "
                                           f"{st.EXACT_LSTSQ:g}); otherwise none, with the reason in bound_note"),
                          "delta_principal": st.DELTA,
                          "computation": ("every pass runs the whole model (shared weights: the edit acts at "
                                          "every depth)" if st.edits_every_depth(w, shared_edit)
                                          else "the states entering the last depth are computed once; each "
                                          "setting re-runs only the last depth, the final norm and the head "
                                          "(exact: nothing before the last depth changes)"),
                          "continuations": ({"prompts": continuation_prompts, "new_tokens": continuation_tokens,
                                             "decoding": "greedy (no sampling), one prompt at a time, both methods "
                                                         "at every decoding step"} if generates else
                                            "none: the model is not a causal LM with a head"),
                          "work": {**res["work"], "counts": (
                              "counted tokens (specials and padding excluded) of every measuring pass, both prompt "
                              "sets (steering, unrelated) and every setting and beta: whole = through the whole "
                              "model, last_depth = through the last depth alone (replayed inputs), head = through "
                              "the LM head; passes = measuring passes; the speed table's bound reads it")},
                          "provenance": provenance.record(threads=threads, seed=seed, device=device)}


def _doubling(rule, df) -> dict:
    """What revision 6's doubling of kappa did: the rule, and per target the kappa reached and why it stopped."""
    r1 = df[df["method"].astype(str).str.startswith("rank-1")] if "method" in df else df.iloc[:0]
    return {"rule": (f"past the configured kappas, kappa doubles until the real pass's mean |cos| reaches "
                     f"{rule.criterion:g} (C9_alignment), moves less than {FLAT:g} over two doublings, a norm after "
                     "the edit caps it below the criterion, or kappa would pass C9_kappa_cap "
                     f"{rule.cap:g} (paper.md section 4e)"),
            "targets": {str(t): {"kappa_reached": float(g["kappa"].max()),
                                 "stopped": STOPS[str(g["sweep_stop"].iloc[0])].format(flat=FLAT)}
                        for t, g in r1.groupby("target", sort=False)} if "sweep_stop" in r1 else {}}


def show(result, kw: dict) -> None:
    print(result[["target", "kappa", "method", "u_principal", "cos_after_layer_model", "p_target"]]
          .to_string(index=False))


STEP = steering

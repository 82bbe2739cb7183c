"""Greedy continuations of fixed prompts, with the rank-1 edit (applied by the caller) or activation addition at a
site (causal LMs with a token target; paper.md section 6): the steering experiment's text beside its numbers."""

from __future__ import annotations

import numpy as np
import torch

from powerlens.core.errors import PowerlensError


def check_continuation_lengths(tokenizer, prompts: list[str], new_tokens: int, max_positions: int) -> None:
    """Before any steering number is computed: every continuation prompt plus its new tokens fits the model's
    context (``generate`` past it fails, or silently wraps positions)."""
    for i, p in enumerate(prompts):
        n = len(tokenizer(p, split_special_tokens=True)["input_ids"])
        if n + int(new_tokens) > int(max_positions):
            raise PowerlensError(
                f"steering.continuations.prompts[{i}] is {n} tokens; with new_tokens {new_tokens} it needs "
                f"{n + int(new_tokens)} positions, and the model has {max_positions}",
                "shorten that prompt or lower steering.continuations.new_tokens")


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
            enc = tokenizer(p, return_tensors="pt", split_special_tokens=True)  # typed control tokens are text
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


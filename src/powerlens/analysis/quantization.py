"""Quantization sensitivity: how much do 4-bit weights move the spectra and the token dynamics?

The trained decoders reach us only as 4-bit GGUF files (SmolLM2: Q4_1; Gemma 3: Q4_K_M), so their numbers
are those of a quantized model. To know how far 4 bits move what the paper measures, a full-precision model
(the trained MiniLM) is quantized with the ``gguf`` package's own quantizers (llama.cpp's block formats,
round to nearest; it implements Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, its K-quants only dequantize) and
dequantized back, as a GGUF file of that type would hold it: every ``nn.Linear`` weight of the transformer
layers gets the type, the token embedding Q8_0 (as llama.cpp's Q4 files store it), norms and biases stay
float32. Spectra and model-mode dynamics are then recomputed on the quantized copy and compared per layer
with the full-precision results: |lambda_1(F_q) - lambda_1(F)| / |lambda_1(F)|, leading-type changes,
|cos(v_1, v_1q)|, delta gamma and delta rho.
"""

from __future__ import annotations

import numpy as np

from powerlens.analysis.spectra import leading_type
from powerlens.analysis.verdict_tests import GAMMA, RHO
from powerlens.core.errors import PowerlensError

SUPPORTED = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")
EMBED_TYPE = "Q8_0"


def round_trip(W, qtype: str):
    """W quantized to ``qtype`` and dequantized (same shape and dtype); rows must be whole 32-blocks."""
    import torch
    from gguf import GGMLQuantizationType, quants

    t = GGMLQuantizationType[qtype]
    a = W.detach().cpu().float().numpy()
    back = quants.dequantize(quants.quantize(a, t), t).reshape(a.shape)
    return torch.from_numpy(np.ascontiguousarray(back)).to(dtype=W.dtype, device=W.device)


def quantize_model(model, adapter, qtype: str) -> dict[str, int]:
    """Quantize, in place, every nn.Linear weight of the model's layers to ``qtype`` and the token embedding to
    Q8_0; returns how many tensors got each type."""
    import torch

    if qtype not in SUPPORTED:
        raise PowerlensError(f"quantization type {qtype!r} has no quantizer in the gguf package",
                             f"use one of: {', '.join(SUPPORTED)}")
    seen, counts = set(), {qtype: 0, EMBED_TYPE: 0}
    with torch.no_grad():
        for layer in adapter.layer_modules(model):
            for mod in layer.modules():
                if isinstance(mod, torch.nn.Linear) and id(mod.weight) not in seen:
                    seen.add(id(mod.weight))
                    mod.weight.copy_(round_trip(mod.weight, qtype))
                    counts[qtype] += 1
        emb = adapter.input_embeddings(model)
        emb.copy_(round_trip(emb, EMBED_TYPE))
        counts[EMBED_TYPE] += 1
    return counts


def compare_layers(spec_full: dict, spec_q: dict, layer_map: list[int], dyn_full, dyn_q) -> list[dict]:
    """Per depth: leading eigenvalue change, leading-type change, |cos| of the leading eigenvectors (real
    leads; for complex pairs the cosine of the planes' principal angle), delta gamma and delta rho."""
    from powerlens.analysis.alignment import eig_direction

    rows = []
    gf = dyn_full.set_index("layer")
    gq = dyn_q.set_index("layer")
    for t, u in enumerate(layer_map):
        lf, lq = complex(spec_full["eigvals"][u][0]), complex(spec_q["eigvals"][u][0])
        Df, Dq = eig_direction(spec_full["vecs"][u][:, 0]), eig_direction(spec_q["vecs"][u][:, 0])
        if Df.shape[1] == Dq.shape[1]:
            cos = float(np.linalg.svd(Df.T @ Dq, compute_uv=False).min())
        else:
            cos = float("nan")
        rows.append({
            "layer": t, "abs_lambda1": abs(lf), "abs_lambda1_q": abs(lq),
            "rel_change_lambda1": abs(lq - lf) / abs(lf) if abs(lf) > 0 else float("nan"),
            "leading_type": leading_type(lf), "leading_type_q": leading_type(lq),
            "leading_type_changed": leading_type(lf) != leading_type(lq), "abs_cos_v1": cos,
            "gamma": float(gf.loc[t, GAMMA.value]), "gamma_q": float(gq.loc[t, GAMMA.value]),
            "delta_gamma": float(gq.loc[t, GAMMA.value] - gf.loc[t, GAMMA.value]),
            "rho": float(gf.loc[t, RHO.value]), "rho_q": float(gq.loc[t, RHO.value]),
            "delta_rho": float(gq.loc[t, RHO.value] - gf.loc[t, RHO.value]),
        })
    return rows

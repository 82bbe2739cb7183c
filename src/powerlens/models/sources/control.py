"""``source: control``: a trained model's matched control (paper.md section 4e, revision 6).

A control must differ from its trained model only in what the claims are about: the attention's F_t = W_O W_V
and the scores W_Q, W_K. So it keeps everything trained (embeddings, every norm with its gain and bias, every
bias, the FFN, the final norm) except each unique layer's four attention weights W_Q, W_K, W_V, W_O, drawn by
the architecture's own initialisation (transformers' ``from_config`` under the control's seed), then rescaled
so that what the mechanism reads matches the trained layer:

- W_V by c_t = |lambda_1(F_t trained)| / |lambda_1(F_t random)|, so F_t has the trained leading modulus (without
  it a random F is 8-12x smaller and barely moves a token: a negative control for a trivial reason);
- each query head's W_Q^h by ||W_Q^h^T W_K^g(h)||_F trained / random (g(h) its key-value group), so every head's
  attention scores have the trained scale.

Several seeds per trained model (config ``control_seeds``); each is judged like its trained model at R0 with no
extension (a control decides no verdict) and shown beside it as "control passes in k of n seeds". Random weights
are never evidence: the folder carries the twin marker (``POWERLENS_TWIN.json``, weights label "random attention
weights"), which also records what was kept, what was drawn and every matched quantity.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_json, save_model_folder
from powerlens.models.adapters import get_adapter
from powerlens.models.sources.files import file_table

LABEL = "random attention weights"
ATTENTION = ("W_Q", "W_K", "W_V", "W_O")  # what a control draws; everything else is the trained model's


def trained_manifest(entry: dict, out_dir: Path) -> Path:
    """The trained model's manifest, in the same run folder as the control's."""
    return Path(out_dir).parent / entry["control_of"] / "manifest.json"


def leading_modulus(F) -> float:
    """|lambda_1| of a layer matrix (float64)."""
    return float(np.max(np.abs(np.linalg.eigvals(np.asarray(F, dtype=np.float64)))))


def score_scales(layer, n_heads: int) -> list[float]:
    """||W_Q^h^T W_K^g(h)||_F per query head h (g(h) = h // (H / H_kv)): the scale of head h's attention scores,
    computed as sqrt(trace((A A^T)(B B^T))) with A = W_Q^h, B = W_K^g (d_head x d_head products, float64)."""
    W_Q, W_K = (np.asarray(x, dtype=np.float64) for x in (layer.W_Q, layer.W_K))  # (H dh, d), (H_kv dh, d)
    dh = W_Q.shape[0] // n_heads
    groups = n_heads // (W_K.shape[0] // dh)
    out = []
    for h in range(n_heads):
        A, B = W_Q[h * dh:(h + 1) * dh], W_K[(h // groups) * dh:(h // groups + 1) * dh]
        out.append(float(np.sqrt(max(np.trace((A @ A.T) @ (B @ B.T)), 0.0))))
    return out


@dataclass
class Matched:
    """What a control matched, per unique layer: the trained and the control's |lambda_1(F_t)| and score
    scales per query head (after rescaling), and the factors applied (its marker and manifest record it)."""

    lambda1_trained: list[float]
    lambda1_control: list[float]
    value_scale: list[float]
    score_trained: list[list[float]]
    score_control: list[list[float]]
    query_scale: list[list[float]]
    drawn: list[str]  # the parameters (with their part where fused) drawn at random
    kept: int  # every other tensor of the model: the trained one, bit for bit


def _draw(ctrl, fresh, adapter, keys) -> list[str]:
    """Copy the fresh model's W_Q, W_K, W_V, W_O into the control, layer by layer; the names drawn."""
    import torch

    names = {id(p): n for n, p in ctrl.named_parameters(remove_duplicate=False)}
    drawn = []
    with torch.no_grad():
        for key in keys:
            got, new = adapter.attention_weights(ctrl, key), adapter.attention_weights(fresh, key)
            for n in ATTENTION:
                part = got[n]
                part.param[part.index] = new[n].param[new[n].index]
                whole = part.index == (slice(None), slice(None))
                drawn.append(names[id(part.param)] + ("" if whole else f" ({n})"))
    return drawn


def build_control(trained, adapter, seed: int):
    """The matched control of a loaded base model (no LM head: a control is never steered): the trained model
    with each unique layer's W_Q, W_K, W_V, W_O drawn at random (seed ``seed``) and rescaled (module docstring).
    Returns (model, :class:`Matched`)."""
    import torch
    import transformers

    torch.manual_seed(int(seed))
    fresh = transformers.AutoModel.from_config(trained.config, dtype=torch.float32)  # the architecture's own init
    ctrl = copy.deepcopy(trained).eval()
    keys = list(dict.fromkeys(adapter.layer_map(ctrl.config)))
    drawn = _draw(ctrl, fresh, adapter, keys)
    del fresh
    H = adapter.n_heads(ctrl.config)
    w_t = adapter.extract(trained)
    m = Matched([], [], [], [], [], [], drawn, 0)
    for key, lt in zip(keys, w_t.layers):
        lc = adapter.extract_unique(ctrl, key)
        a, b = leading_modulus(lt.F), leading_modulus(lc.F)
        c = a / b if b > 0 else 1.0
        with torch.no_grad():
            v = adapter.attention_weights(ctrl, key)["W_V"]
            v.param[v.index] *= c
            want, have = score_scales(lt, H), score_scales(lc, H)
            q, dh = adapter.attention_weights(ctrl, key)["W_Q"], lc.W_Q.shape[0] // H
            factors = [x / y if y > 0 else 1.0 for x, y in zip(want, have)]
            for h, f in enumerate(factors):
                q.param[q.head(h, dh)] *= f
        lc = adapter.extract_unique(ctrl, key)
        m.lambda1_trained.append(a)
        m.lambda1_control.append(leading_modulus(lc.F))
        m.value_scale.append(c)
        m.score_trained.append(want)
        m.score_control.append(score_scales(lc, H))
        m.query_scale.append(factors)
    m.kept = _check_kept(trained, ctrl, adapter, keys)
    return ctrl, m


def _check_kept(trained, ctrl, adapter, keys) -> int:
    """Every tensor outside the drawn attention weights equals the trained model's, bit for bit (refused
    otherwise); the count of tensors compared."""
    import torch

    drawn = {id(p) for key in keys for p in (x.param for x in adapter.attention_weights(ctrl, key).values())}
    sd_t = trained.state_dict()
    n = 0
    for name, p in ctrl.state_dict(keep_vars=True).items():
        t = sd_t[name]
        if id(p) in drawn:  # a fused parameter's other parts (none today: Q|K|V are all drawn) stay trained
            continue
        if not torch.equal(p.detach(), t):
            raise PowerlensError(f"matched control: {name!r} differs from the trained model's, though a control "
                                 "keeps everything but the attention weights", "report this bug")
        n += 1
    return n


def fetch_control(name: str, entry: dict, out_dir: Path) -> dict:
    """Build the matched control of ``entry['control_of']`` (fetched earlier in the same run) under
    ``out_dir / 'control'``."""
    from powerlens.models.sources.loading import load_model, load_tokenizer

    man_path = trained_manifest(entry, out_dir)
    if not man_path.is_file():
        raise PowerlensError(f"model {name!r}: the model it controls, {entry['control_of']!r}, has no manifest at "
                             f"{man_path}", "run the workflow (its fetch step runs first), or fetch that model")
    man = read_json(man_path)
    if man.get("random_weights"):
        raise PowerlensError(f"model {name!r}: {entry['control_of']!r} has random weights; a matched control "
                             "stands beside a trained model", "set control_of to a model with trained weights")
    adapter = get_adapter(man["arch"])
    import torch

    trained = load_model(man, dtype=torch.float32)
    ctrl, matched = build_control(trained, adapter, int(entry.get("seed", 0)))
    del trained
    folder = Path(out_dir) / "control"
    save_model_folder(ctrl, load_tokenizer(man), folder, f"model {name!r}")
    from powerlens.models.sources.twin import TWIN_MARKER

    record = {**asdict(matched),  # kept: the count of tensors equal to the trained model's; drawn: their names
              "what_was_kept": "every tensor of the trained model but the drawn attention weights, equal bit for bit",
              "what_was_drawn": f"each unique layer's {', '.join(ATTENTION)}: the architecture's own initialisation "
                                "under the seed, W_V rescaled to the trained |lambda_1(F_t)|, each query head's W_Q to "
                                "the trained ||W_Q^h^T W_K^g(h)||_F"}
    (folder / TWIN_MARKER).write_text(json.dumps({"weights_label": LABEL, "control_of": entry["control_of"],
                                                  "seed": int(entry.get("seed", 0)), **record}, indent=1) + "\n",
                                      encoding="utf-8")
    return {"source": "control", "control_of": entry["control_of"], "seed": int(entry.get("seed", 0)),
            "path": str(folder.resolve()), "files": file_table(folder), "resolved_revision": None,
            "tokenizer": f"the trained model's ({entry['control_of']})", "weights_label": LABEL,
            "matched": record,
            "trained_files": {k: v["sha256"] for k, v in man["files"].items()}}

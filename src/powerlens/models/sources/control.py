"""``source: control``: a trained model's matched random-layer control (paper.md section 4d, revision 5).

The control has the trained model's exact configuration (dimensions, heads, grouped-query layout, norms), its
trained embeddings and everything outside the layers (embedding norm, final norm, LM head), and seeded random
weights in every layer (transformers' own initialisation of the architecture). The value weights of each
unique layer t are then rescaled by c_t = |lambda_1(F_t trained)| / |lambda_1(F_t random)|, so that its layer
matrix F_t = W_O W_V has the trained layer's leading modulus: without it a random initialisation's F is 8-12x
smaller and barely moves a token, and the control would be negative for a trivial reason.

It is judged exactly like its trained model (C1 in the law, C6-C8 and C10 in the real forward pass) and shown
beside it: where the control passes too, the test does not need training. Random weights are never evidence;
the folder carries the twin marker (``POWERLENS_TWIN.json``, weights label "random layer weights"), so it is
recognised as random wherever it is read from.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_json, save_model_folder
from powerlens.models.adapters import get_adapter
from powerlens.models.sources.files import file_table

LABEL = "random layer weights"


def trained_manifest(entry: dict, out_dir: Path) -> Path:
    """The trained model's manifest, in the same run folder as the control's."""
    return Path(out_dir).parent / entry["control_of"] / "manifest.json"


def _leading_modulus(F) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(F.double().numpy()))))


def build_control(trained, adapter, seed: int):
    """The control of a loaded base model (no LM head: a control is never steered): seeded random layers,
    everything else copied, value weights rescaled per unique layer. Returns (model, per-layer scale c_t,
    trained |lambda_1|)."""
    import torch
    import transformers

    torch.manual_seed(int(seed))
    ctrl = transformers.AutoModel.from_config(trained.config, dtype=torch.float32)
    ctrl.eval()
    in_layers = {id(p) for mod in adapter.layer_modules(ctrl) for p in mod.parameters()}
    random_names = {n for n, p in ctrl.named_parameters(remove_duplicate=False) if id(p) in in_layers}
    sd_t, sd_c = trained.state_dict(), ctrl.state_dict()
    missing = [k for k in sd_c if k not in random_names and k not in sd_t]
    if missing:
        raise PowerlensError(f"matched control: the trained model has no {missing[0]!r} (and {len(missing) - 1} "
                             "more) outside its layers", "report it: the control copies everything outside the "
                                                         "layers from the trained model")
    ctrl.load_state_dict({k: (v if k in random_names else sd_t[k]) for k, v in sd_c.items()})
    w_t, w_c = adapter.extract(trained), adapter.extract(ctrl)
    keys = list(dict.fromkeys(adapter.layer_map(ctrl.config)))
    scales, lam_t = [], []
    for key, lt, lc in zip(keys, w_t.layers, w_c.layers):
        a, b = _leading_modulus(lt.F), _leading_modulus(lc.F)
        c = a / b if b > 0 else 1.0
        adapter.scale_values(ctrl, key, c)
        scales.append(c)
        lam_t.append(a)
    return ctrl, scales, lam_t


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
    ctrl, scales, lam_t = build_control(trained, adapter, int(entry.get("seed", 0)))
    del trained
    folder = Path(out_dir) / "control"
    save_model_folder(ctrl, load_tokenizer(man), folder, f"model {name!r}")
    from powerlens.models.sources.twin import TWIN_MARKER

    (folder / TWIN_MARKER).write_text(json.dumps({"weights_label": LABEL, "control_of": entry["control_of"],
                                                  "seed": int(entry.get("seed", 0)),
                                                  "value_scale": scales}, indent=1) + "\n", encoding="utf-8")
    return {"source": "control", "control_of": entry["control_of"], "seed": int(entry.get("seed", 0)),
            "path": str(folder.resolve()), "files": file_table(folder), "resolved_revision": None,
            "tokenizer": f"the trained model's ({entry['control_of']})", "weights_label": LABEL,
            "value_scale": scales, "trained_lambda1": lam_t,
            "trained_files": {k: v["sha256"] for k, v in man["files"].items()}}

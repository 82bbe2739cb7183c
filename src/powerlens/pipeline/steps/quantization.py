"""Quantization sensitivity of one full-precision model: quantize its weight matrices with the gguf package's
quantizers, recompute spectra and model-mode dynamics, compare per layer with the full-precision results."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from powerlens.core.corpus import read_prompts
from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_generated_json, read_generated_npz, reading_generated, write_csv, write_json
from powerlens.core.runtime import set_threads
from powerlens.models.adapters import get_adapter
from powerlens.models.sources import load_model, load_tokenizer
from powerlens.outputs import provenance
from powerlens.pipeline.options import ALPHA, CRITERIA, NULL_DRAWS_CAP, Option

if TYPE_CHECKING:
    import pandas as pd

OPTIONS = (
    Option("manifest", "input:manifest", dest="manifest_path"),
    Option("spectra", "input:spectra", dest="spectra_npz"),
    Option("dynamics", "input:dynamics", dest="dynamics_csv"),
    Option("prompts", "input:prompts", dest="prompts_path"),
    Option("out-csv", "output:csv"),
    Option("out-json", "output:json"),
    Option("out-dynamics", "output:dynamics",
           help="CSV file to write: the model-mode dynamics table at each quantization (column quantization), "
                "for the verdicts' robustness (table_robustness)"),
    Option("types", "config:quantization.types", many=True, dest="qtypes",
           help="gguf quantization types, e.g. Q4_1 Q8_0"),
    Option("batch-size", "config:dynamics.batch_size", kind="int"),
    Option("max-tokens", "config:dynamics.max_tokens", kind="int"),
    Option("seed", "config:seed", kind="int"),
    Option("top-k", "config:spectra.top_k", kind="int"),
    Option("null-draws", "config:dynamics.null_draws", kind="int"),
    ALPHA,
    NULL_DRAWS_CAP,
    CRITERIA,
    Option("threads", "threads", kind="int"),
)


def quantization(manifest_path, spectra_npz, dynamics_csv, *, prompts_path, out_csv, out_json, out_dynamics,
                 qtypes: list[str], batch_size: int, max_tokens: int, seed: int, top_k: int, null_draws: int,
                 null_draws_cap: int,
                 alpha: float, criteria: dict, threads: int) -> "pd.DataFrame":
    """Quantization sensitivity of one full-precision model: spectra and model-mode dynamics of copies
    quantized with the gguf package's quantizers, compared per layer with the full-precision results."""
    import pandas as pd
    import torch

    from powerlens.analysis import quantization as qz
    from powerlens.analysis.dynamics import DynamicsOptions, analyse
    from powerlens.analysis.spectra import layer_matrices, model_spectra, spectra_arrays
    from powerlens.analysis.verdict_tests import decision_rule

    threads = set_threads(threads)
    torch.manual_seed(seed)
    man = read_generated_json(manifest_path, "fetch_model")
    if man["random_weights"] or str(man["weights_label"]).startswith("trained, "):
        raise PowerlensError(
            f"model {man['model']!r}: quantization sensitivity needs full-precision trained weights (it has "
            f"{man['weights_label']})", "list only full-precision trained models in `quantization.models`")
    adapter = get_adapter(man["arch"])
    full = read_generated_npz(spectra_npz, "spectra")
    with reading_generated(dynamics_csv, "dynamics"):
        dyn_full = pd.read_csv(dynamics_csv)
    prompts = read_prompts(prompts_path)
    tok = load_tokenizer(man)
    rows, counts = [], {}
    # model mode on the whole corpus, its batches bounded by prompts alone (no batch_tokens); the law's options
    # are unused in model mode
    opts = DynamicsOptions(mode="model", norm="l2", steps=1, long_run_prompts=1, batch_size=batch_size,
                           batch_tokens=None, max_tokens=max_tokens, dtype="float32", null_draws=null_draws,
                           bias_free_control=False, seed=seed, criteria=decision_rule(criteria, alpha, null_draws_cap))
    tables = []
    for qtype in qtypes:
        model = load_model(man, dtype=torch.float32)
        counts[qtype] = qz.quantize_model(model, adapter, qtype)
        w = adapter.extract(model)
        specs = model_spectra(layer_matrices(w), n_heads=w.n_heads, k=top_k, threads=threads, seed=seed)
        arrays = spectra_arrays(specs, w.layer_map)
        dyn_q = analyse(lambda m=model: m, adapter, tok, prompts, arrays, lambda: w, depth=w.n_layers,
                        d_model=w.d_model, options=opts).table
        tables.append(dyn_q.assign(model=man["model"], mode="model", quantization=qtype))
        del model
        gc.collect()
        for r in qz.compare_layers(full, arrays, w.layer_map, dyn_full, dyn_q):
            rows.append({"model": man["model"], "quantization": qtype, **r})
    df = pd.DataFrame(rows)
    write_csv(out_csv, df)
    write_csv(out_dynamics, pd.concat(tables, ignore_index=True))
    write_json(out_json, {"model": man["model"], "weights_label": man["weights_label"], "types": qtypes,
                          "tensors_quantized": counts, "method": qz.__doc__.split("\n\n")[1].replace("\n", " "),
                          "n_prompts": len(prompts), "max_tokens": max_tokens, "null_draws": null_draws,
                          "provenance": provenance.record(threads=threads, seed=seed)})
    return df


def show(result, kw: dict) -> None:
    print(result[["quantization", "layer", "rel_change_lambda1", "leading_type_changed", "delta_gamma",
                  "delta_rho"]].to_string(index=False))


STEP = quantization

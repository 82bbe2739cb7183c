"""Prove an extraction: rebuild each attention sublayer from the saved matrices, compare with the real
module in float32 (tolerance 1e-5) and float64 (1e-10). Exits non-zero if either check fails."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_generated_json, write_json
from powerlens.core.runtime import set_threads
from powerlens.models.adapters import get_adapter
from powerlens.models.sources import load_model
from powerlens.outputs import provenance
from powerlens.pipeline.options import Option, model_files

OPTIONS = model_files("manifest", "tensors", "meta") + (
    Option("out", "output:check", dest="out_path", help="extraction_check.json to write"),
    Option("threads", "threads", kind="int"),
    Option("tol32", "config:extraction_check.tol_float32", kind="float",
           help="largest |error| allowed between the rebuilt and the real sublayer in float32"),
    Option("tol64", "config:extraction_check.tol_float64", kind="float", help="largest |error| allowed in float64"),
)


def check_extraction(manifest_path: str | Path, weights_st: str | Path, weights_json: str | Path, *,
                     out_path: str | Path, threads: int, tol32: float, tol64: float) -> dict:
    """Rebuild every attention sublayer from the saved matrices and compare with the real module."""
    import torch

    from powerlens.models.verify import layerwise_errors, reconstruction_errors
    from powerlens.models.weights import ModelWeights

    threads = set_threads(threads)
    man = read_generated_json(manifest_path, "fetch_model")
    w = ModelWeights.load(weights_st, weights_json, lazy=True)  # one layer's tensors at a time
    adapter = get_adapter(man["arch"])
    result: dict[str, Any] = {"model": man["model"], "weights_label": man["weights_label"],
                              "random_weights": man["random_weights"], "checks": {}}
    model = load_model(man, dtype=torch.float32)
    errors = {"float32": reconstruction_errors(model, adapter, w),
              "float64": layerwise_errors(model, adapter, w, torch.float64)}
    del model
    # a module that computes a part in float32 whatever its dtype: its float64 proof is a float32 one there
    tol64_used = max(tol64, tol32) if adapter.float32_parts else tol64
    for name, tol in (("float32", tol32), ("float64", tol64_used)):
        errs = errors[name]
        nonfinite = [t for t, e in enumerate(errs) if not math.isfinite(e)]
        if nonfinite:  # never a pass: Python's max over a list with NaN is whatever comes first
            raise PowerlensError(
                f"model {man['model']!r}: the {name} extraction check is NaN or inf at depth "
                f"{', '.join(map(str, nonfinite))} (of {len(errs)}): the real module or the rebuilt one "
                "produced non-finite values there",
                "check the checkpoint's weights at that layer (fetch it again) or report the adapter")
        result["checks"][name] = {"max_abs_error": max(errs), "per_layer": errs, "tolerance": tol,
                                  "passed": max(errs) <= tol}
    result["checks"]["float64"]["method"] = (
        "layer by layer (never a float64 copy of the model): each layer alone copied to float64 and run on the "
        "inputs the float32 pass gave it, cast to float64")
    if adapter.float32_parts:
        result["checks"]["float64"]["float32_parts"] = (
            f"{adapter.float32_parts}: computed in float32 by the real module in float64 too, so the float64 "
            f"tolerance is the float32 one ({tol32:g}) rather than {tol64:g}")
    result["shared_weights"] = w.shared
    result.update(adapter.extraction_checks(w))
    result["passed"] = all(c["passed"] for c in result["checks"].values())
    result["provenance"] = provenance.record(threads=threads)
    if not result["passed"]:
        bad = {k: v["max_abs_error"] for k, v in result["checks"].items()}
        floor = {"float32": 1e-6, "float64": 1e-13}  # round-off of a rebuilt sublayer: below this, no adapter passes
        tiny = [k for k, c in result["checks"].items() if not c["passed"] and c["tolerance"] < floor[k]]
        if tiny:
            raise PowerlensError(
                f"model {man['model']!r}: the extraction check's tolerance for {', '.join(tiny)} "
                f"({', '.join(str(result['checks'][k]['tolerance']) for k in tiny)}) is below that dtype's "
                f"round-off (max errors {bad})",
                "raise extraction_check.tol_float32 / tol_float64 in the config (defaults 1e-5 and 1e-10)")
        raise PowerlensError(f"model {man['model']!r}: extraction does not reproduce the real attention "
                             f"module (max errors {bad})",
                             "the adapter for this architecture is wrong for this checkpoint: report it")
    write_json(out_path, result)
    return result


def show(result, kw: dict) -> None:
    for k, c in result["checks"].items():
        print(f"{result['model']} {k}: max |error| {c['max_abs_error']:.3g} (tolerance {c['tolerance']:g})")


STEP = check_extraction

"""Eigendecomposition (float64, CPU) of every unique layer matrix F of one model: all eigenvalues, top-k
eigenvectors with canonical phase, leading plane, per-head and residual (I + F) views."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from powerlens.core.io import write_csv, write_npz
from powerlens.core.runtime import set_threads
from powerlens.pipeline.options import Option

if TYPE_CHECKING:
    import pandas as pd

OPTIONS = (
    Option("tensors", "input:tensors", dest="weights_st"),
    Option("meta", "input:meta", dest="weights_json"),
    Option("out-npz", "output:npz"),
    Option("out-csv", "output:csv"),
    Option("top-k", "config:spectra.top_k", kind="int"),
    Option("threads", "threads", kind="int"),
    Option("seed", "config:seed", kind="int", help="seed of the random non-leading eigenvector (a null)"),
)


def spectra(weights_st: str | Path, weights_json: str | Path, *, out_npz: str | Path, out_csv: str | Path,
            top_k: int, threads: int, seed: int) -> "pd.DataFrame":
    """Eigendecomposition of every unique layer matrix F (float64, CPU): arrays + one tidy row per depth."""
    import pandas as pd

    from powerlens.analysis.spectra import model_spectra, spectra_arrays
    from powerlens.models.weights import ModelWeights

    threads = set_threads(threads)
    w = ModelWeights.load(weights_st, weights_json)
    specs = model_spectra(w, k=top_k, threads=threads, seed=seed)
    arrays = spectra_arrays(specs, w.layer_map)
    write_npz(out_npz, arrays)
    rows = []
    for t, u in enumerate(w.layer_map):
        rows.append({"model": w.meta["model"], "layer": t, "unique_layer": u, **specs[u].summary(),
                     "weights": w.meta["weights_label"]})
    df = pd.DataFrame(rows)
    write_csv(out_csv, df)
    return df


def show(result, kw: dict) -> None:
    cols = ["layer", "leading_type", "abs_lambda1", "ratio", "ratio_next", "rel_residual"]
    print(result.drop_duplicates("unique_layer")[cols].to_string(index=False))


STEP = spectra

"""Eigendecomposition (float64, CPU) of every unique layer matrix F of one model: all eigenvalues, top-k
eigenvectors with canonical phase, leading plane, per-head and residual (I + F) views."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from powerlens.core.io import read_json, reading_generated, write_csv, write_npz
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
    """Eigendecomposition of every unique layer matrix F (float64, CPU): arrays + one tidy row per depth. Reads
    the extract step's stored F and weights with numpy alone (this step imports neither torch nor
    transformers)."""
    from powerlens.analysis.spectra import model_spectra, read_layer_matrices, spectra_arrays, spectra_table

    threads = set_threads(threads, torch=False)
    with reading_generated(weights_json, "extract"):
        meta = read_json(weights_json)
    with reading_generated(weights_st, "extract"):
        layers = read_layer_matrices(weights_st, meta)
    specs = model_spectra(layers, n_heads=meta["n_heads"], k=top_k, threads=threads, seed=seed)
    arrays = spectra_arrays(specs, meta["layer_map"])
    write_npz(out_npz, arrays)
    df = spectra_table(specs, meta["layer_map"])
    df.insert(0, "model", meta["model"])
    df["weights"] = meta["weights_label"]
    write_csv(out_csv, df)
    return df


def show(result, kw: dict) -> None:
    cols = ["layer", "leading_type", "abs_lambda1", "ratio", "ratio_next", "rel_residual"]
    print(result.drop_duplicates("unique_layer")[cols].to_string(index=False))


STEP = spectra

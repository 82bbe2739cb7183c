"""table_quantization: per model, type and layer, how far quantized weights move lambda_1, v_1, gamma, rho."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--csv", nargs="*", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--table", required=True)


def run(a) -> None:
    import json

    import pandas as pd

    from powerlens.outputs.tables import quantization_table, write_table

    t = quantization_table([pd.read_csv(p) for p in a.csv], json.loads(a.labels))
    write_table(t, a.table, caption="Quantization sensitivity: a full-precision model's weight matrices "
                "quantized with the gguf package's quantizers (token embedding Q8_0), spectra and model-mode "
                "dynamics recomputed and compared per layer with full precision.")
    print(t.to_string(index=False))

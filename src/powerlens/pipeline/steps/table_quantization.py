"""table_quantization: per model, type and layer, how far quantized weights move lambda_1, v_1, gamma, rho."""

from __future__ import annotations

from powerlens.pipeline.options import Option, show_table

OPTIONS = (
    Option("csv", "input:csv", many="*"),
    Option("labels", "param:labels", kind="json"),
    Option("table", "param:table"),
)


def table_quantization(*, csv: list[str], labels: dict, table: str):
    """table_quantization's four files, replaced together or not at all."""
    from powerlens.outputs.staging import staged

    with staged({"table": table}) as s:
        return _table_quantization(csv, labels, s["table"])


def _table_quantization(csv: list[str], labels: dict, table: str):
    import pandas as pd

    from powerlens.outputs.tables import quantization_table, write_table

    t = quantization_table([pd.read_csv(p) for p in csv], labels)
    write_table(t, table, caption="Quantization sensitivity: a full-precision model's weight matrices "
                "quantized with the gguf package's quantizers (token embedding Q8_0), spectra and model-mode "
                "dynamics recomputed and compared per layer with full precision.")
    return t


show = show_table
STEP = table_quantization

"""pipeline: the Snakemake workflow's side of the library.

    config      checks beyond the config schema (twins, paths, duplicate keys), schema errors as messages
    targets     steering targets checked from the tokenizer alone, before any model-heavy job
    resources   Snakemake mem_mb / runtime fitted from measured benchmarks
    steps       each pipeline step: read inputs, call the analysis, write outputs
    commands/   one module per step: its command-line options (``powerlens <step>``, ``scripts/<step>.py``)

Imports from every layer below it; only the entry points (:mod:`powerlens.api`, :mod:`powerlens.cli`)
import it.
"""

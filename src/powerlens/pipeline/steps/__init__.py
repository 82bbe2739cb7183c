"""The pipeline's steps, one module each: read inputs, call the library, write outputs atomically.

Each module declares its options once (``OPTIONS``, :class:`powerlens.pipeline.options.Option`), names its
function (``STEP``) and prints a summary (``show``). From the declaration come ``powerlens <step>`` and
``scripts/<step>.py`` (the same command), the Snakemake rule's shell line and flags
(``workflow/rules/common.smk``: ``step_shell``, ``step_flags``) and the benchmark's command lines. Every step
can be run by hand (``python scripts/extract.py --help``) or its function imported from its module
(``from powerlens.pipeline.steps.extract import extract``): this package re-exports none, so no function
shadows the submodule of the same name.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: The pipeline's steps, in the order a run meets them (module names here; commands with "-").
STEPS = ("fetch_model", "steering_targets", "write_lock", "extract", "check_extraction", "spectra", "dynamics",
         "steering", "quantization", "theory", "table_models", "plot_spectra", "plot_dynamics", "plot_steering",
         "plot_theory", "table_quantization", "claims", "provenance", "speed", "article")

__all__ = ["STEPS", "step_module"]


def step_module(name: str) -> ModuleType:
    """The module of one step (its OPTIONS, STEP and show)."""
    if name not in STEPS:
        raise KeyError(name)
    return importlib.import_module(f"powerlens.pipeline.steps.{name}")

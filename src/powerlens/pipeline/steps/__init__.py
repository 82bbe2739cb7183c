"""The pipeline's steps, one module each: read inputs, call the library, write outputs atomically.

Each module is named as its step (the rule and ``powerlens <step>``); :data:`STEPS` lists them all:
fetch_model, write_lock, extract, check_extraction, spectra, dynamics, steering, steering_targets, quantization,
theory, plot_spectra, plot_dynamics, plot_theory, plot_steering, table_quantization, table_models, claims, speed,
provenance, article.

A step has one name, its module's: the Snakemake rule that runs it, the command ``powerlens <step>``
(``python -m powerlens <step>``, what the rule runs), its log and benchmark paths (:func:`job_path`, from
:data:`JOBS`) and its entry in ``workflow/resources.yaml`` all use it, spelled the same
(``tests/unit/test_step_names.py`` checks every one).

Each module declares its options once (``OPTIONS``, :class:`powerlens.pipeline.options.Option`), names its
function (``STEP``) and prints a summary (``show``). From the declaration come ``powerlens <step>``, the
Snakemake rule's shell line and flags (``workflow/rules/common.smk``: ``step_shell``, ``step_flags``) and the
benchmark's command lines. Every step can be run by hand (``powerlens extract --help``) or its function
imported from its module (``from powerlens.pipeline.steps.extract import extract``): this package re-exports
none, so no function shadows the submodule of the same name.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: The pipeline's steps, in the order a run meets them: module, rule and command names alike.
STEPS = ("fetch_model", "steering_targets", "write_lock", "extract", "check_extraction", "spectra", "dynamics",
         "steering", "quantization", "theory", "table_models", "plot_spectra", "plot_dynamics", "plot_steering",
         "plot_theory", "table_quantization", "claims", "provenance", "speed", "article")

#: The wildcards that name one job of a step in its log and benchmark paths; a step not listed runs once
#: per run (``logs/<run>/<step>.log``).
JOBS = {"fetch_model": "{model}", "steering_targets": "{model}", "extract": "{model}", "check_extraction": "{model}",
        "spectra": "{model}", "dynamics": "{model}-{mode}", "steering": "{model}", "quantization": "{model}",
        "theory": "{case}"}

__all__ = ["JOBS", "STEPS", "job_file", "job_path", "step_module"]


def job_path(step: str, kind: str, run: str, **wildcards: str) -> str:
    """A step's log (``kind="log"``) or benchmark (``kind="benchmark"``) path of one run, as its rule declares
    it: ``logs/<run>/<step>/<job>.log`` for a step run per model (or mode, or case), else
    ``logs/<run>/<step>.log``. With ``wildcards``, one job's file (``model="minilm-l6", mode="model"``);
    without, the pattern the rule declares."""
    folder = {"log": "logs", "benchmark": "benchmarks"}[kind]
    return f"{folder}/{run}/{job_file(step, kind, **wildcards)}"


def job_file(step: str, kind: str, **wildcards: str) -> str:
    """:func:`job_path` beneath the run's folder (``dynamics/{model}-{mode}.tsv``, ``claims.log``)."""
    if step not in STEPS:
        raise KeyError(step)
    job = JOBS.get(step)
    path = step + (f"/{job}" if job else "") + {"log": ".log", "benchmark": ".tsv"}[kind]
    return path.format(**wildcards) if wildcards else path


def step_module(name: str) -> ModuleType:
    """The module of one step (its OPTIONS, STEP and show)."""
    if name not in STEPS:
        raise KeyError(name)
    return importlib.import_module(f"powerlens.pipeline.steps.{name}")

"""powerlens: transformer layers read as power-method steps.

Replicates and extends Li & Altafini, "Analogies between Transformer Layers and Power Method"
(arXiv 2605.25619). All logic lives in this package; the Snakemake workflow runs each step as ``python -m powerlens
<step>``
(the ``powerlens`` command), one rule per step, named as the step.

The Python API (:mod:`powerlens.api`): ``Lens.from_pretrained(path_or_hub_id)`` or ``Lens(model, tokenizer)``,
then ``.weights``, ``.F(layer)``, ``.spectra()``, ``.dynamics(prompts)`` and ``with .steer(token, kappa):``.

``python -m powerlens <step>`` enters through ``__main__``. Where things are (each subpackage's docstring lists
its modules):

    core/       errors, io, runtime, progress, corpus, fmt: used by everything, imports nothing above it
    models/     archs, adapters (every architecture fact), sources/ (hub, local, package, gguf, twin),
                weights, attention, verify: from a config entry to extracted, proven matrices
    analysis/   spectra, alignment, nulls, stats, dynamics, theory, steering, quantization, claims: the science
    outputs/    tables, figures, plotting, provenance: what a reader sees
    pipeline/   config, config_text, report_check, targets, resources, speed, steps/: the workflow's steps
                and their options (each step declares its options once)
    api, cli    the public Python API (Lens) and the ``powerlens`` command, over all of the above

Imports go one way, top to bottom (api/cli -> pipeline -> outputs -> analysis -> models -> core), with no
cycle: tests/unit/test_layout.py parses every import and checks it.
"""

__version__ = "0.1.0"

__all__ = ["Lens", "Spectra", "arch_of", "__version__"]


def __getattr__(name):  # the API on first use: `import powerlens.pipeline.config` stays free of numpy and torch
    if name in ("Lens", "Spectra", "arch_of"):
        from powerlens import api

        return getattr(api, name)
    raise AttributeError(f"module 'powerlens' has no attribute {name!r}")

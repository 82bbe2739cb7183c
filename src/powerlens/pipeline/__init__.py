"""pipeline: the Snakemake workflow's side of the library.

    config      checks beyond the config schema (twins, paths, labels, sizes), schema errors as messages
    config_text a config file's text: no key twice, no YAML alias bomb, finite numbers, printable strings
    report_check  a report only of outputs up to date for the config and code (Snakemake's --summary)
    report_front  the report's front page (the verdicts at a glance)
    targets     steering targets checked from the tokenizer alone, before any model-heavy job
    resources   Snakemake mem_mb / runtime fitted from measured benchmarks, plus the corpus' own costs
    resource_fit  the fit of those lines from benchmark files (scripts/fit_resources.py)
    code_hash   each step's code (its import closure inside powerlens) as a hash: a rule's param, so an
                edit of a step's code reruns that step
    run_folder  a run folder remembers the config files that made it; another config refuses to write there
    cluster     the SLURM executor's commands and cluster checked before any job
    speed       each heavy job's wall time beside its arithmetic lower bound (table_speed, the benchmark)
    steps/      one module per step: its options (``powerlens <step>``, the rule's
                shell line) and its function: read inputs, call the analysis, write outputs

Imports from every layer below it; only the entry points (:mod:`powerlens.api`, :mod:`powerlens.cli`)
import it.
"""

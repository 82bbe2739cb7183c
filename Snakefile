# powerlens: "Analogies between Transformer Layers and Power Method" (Li & Altafini, arXiv 2605.25619),
# rebuilt as a Snakemake workflow. Default: the paper's 13 checkpoints (config/config.yaml).
#   snakemake --cores 8                                      # the paper (needs the Hugging Face hub)
#   snakemake --cores 2 --configfile config/offline.yaml     # offline: trained MiniLM + random twins
#   make offline      # the same plus the trained 4-bit decoders (config/offline-decoders.yaml)
# Logic lives in src/powerlens/ (`python -m powerlens <step>` runs a step), one concern per workflow/rules/*.smk;
# scripts/ holds the benchmarks and tools.

import os

from snakemake.utils import min_version

min_version("9.0")


# ---- configuration ------------------------------------------------------------------------------
# The paper config is the default; a --configfile replaces it (no merging of model lists).
if "models" not in config:

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")


report: "workflow/report/workflow.rst"


# every reStructuredText text of the report (front page, captions) is read with raw HTML and file insertion
# switched off: config text shown there can never become markup that runs or embeds a file
# (set, never read: this is not an input of the workflow)
os.environ.update(DOCUTILSCONFIG=os.path.join(workflow.basedir, "workflow", "report", "docutils.conf"))


# ---- rules --------------------------------------------------------------------------------------
include: "workflow/rules/common.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/spectra.smk"
include: "workflow/rules/dynamics.smk"
include: "workflow/rules/theory.smk"
include: "workflow/rules/steering.smk"
include: "workflow/rules/quantization.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/report.smk"


# ---- target -------------------------------------------------------------------------------------
rule all:
    default_target: True
    input:
        get_final_output(),


# ---- report -------------------------------------------------------------------------------------
# `snakemake --report` only (its freshness check has passed), after every rule is defined, so no job's params
# or provenance see it: the front page's verdict table and the article's links, read from this run's files
# (powerlens.pipeline.report_front; the config schema refuses this key in a user's config)
if is_report_request(sys.argv[1:]):
    config[REPORT_FRONT_KEY] = front_page(RUN)

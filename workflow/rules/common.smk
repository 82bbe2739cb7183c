# Helpers shared by every rule: config validation, paths of this run, per-model resources.
import json
import os
import shlex
import sys
import time
from pathlib import Path

from powerlens.models.adapters import get_adapter
from powerlens.pipeline.config import check_targets_on_disk, model_arch, steering_targets, validate_config
from powerlens.pipeline.report_check import check_report_fresh, is_report_request
from powerlens.outputs.records import check_records
from powerlens.pipeline.report_front import KEY as REPORT_FRONT_KEY, front_page
from powerlens.pipeline.options import config_flags, shell_line
from powerlens.pipeline.steps import job_path, step_module
from powerlens.core.corpus import read_prompts
from powerlens.pipeline.resources import check_plan, job_requests, load_coefficients
from powerlens.models.sources import check_hub_reachable, hub_downloads_needed, is_control, source_files, steered
from powerlens.models.sources import random_weights as is_random
from powerlens.core.errors import PowerlensError, user_errors_in_logs
from powerlens.core.io import files_sha256, params_json
from powerlens.outputs.provenance import sha256_file
from powerlens.pipeline.cluster import check_executor_tools
from powerlens.pipeline.code_hash import step_code_sha256
from powerlens.pipeline.run_folder import check_run_folder, claim_run_folder
from powerlens.pipeline.steps import STEPS


START = time.time()


def stop_many(errors):
    """User errors (problem, fix): printed in the step CLIs' form, then exit status 2, no traceback."""
    for problem, fix in errors:
        print(f"ERROR: {problem}", file=sys.stderr)
        if fix:
            print(f"  fix: {fix}", file=sys.stderr)
    sys.exit(2)


def stop(e):
    """A user error found while building the DAG: stops before any job runs."""
    stop_many([(e.problem, e.fix)])


onstart:
    # before any job of a real run (not -n): the cluster executor works from here (a SLURM profile on a
    # machine without SLURM would retry, then delete outputs); one hub connectivity check for the models still
    # to download; then this config claims its run folder (powerlens.pipeline.run_folder)
    try:
        check_executor_tools(getattr(workflow.executor_plugin, "name", None),
                             getattr(workflow.executor_settings, "status_command", None))
        check_hub_reachable(hub_downloads_needed(config["models"], lambda m: os.path.exists(
            results(f"{m}/manifest.json"))))
        claim_run_folder(RUN, workflow.configfiles)
    except PowerlensError as e:
        stop(e)


onerror:
    # a step that stopped on a user error printed its problem and fix in its log: repeat them last, once,
    # and exit with status 2 (a failure without such a message keeps Snakemake's status 1)
    _errs = user_errors_in_logs(f"logs/{RUN}", START)
    if _errs:
        print(f"\npowerlens: {len(_errs)} problem(s) to fix (from the step logs above):", file=sys.stderr)
        stop_many(_errs)


try:
    validate_config(config, workflow.configfiles)
except PowerlensError as e:
    stop(e)

# `snakemake --report` renders whatever outputs exist: refused while any is out of date for this config and code
if is_report_request(sys.argv[1:]):
    try:
        check_report_fresh(sys.argv[1:], workflow.main_snakefile, workflow.configfiles)
    except PowerlensError as e:
        stop(e)

RUN = config["run"]
# ... nor from a table changed after the step that wrote it (a verdict edited in the HTML the report embeds)
if is_report_request(sys.argv[1:]) and os.path.isdir(f"paper_tables/{RUN}"):
    try:
        check_records(Path(f"paper_tables/{RUN}"), f"paper_tables/{RUN}")
    except PowerlensError as e:
        stop(e)
#: The paper config (the paper's models, pinned): the article's stand-in table reads it. The working
#: directory's own when it has one (the repository), else the repository's.
PAPER_CONFIG = ("config/config.yaml" if os.path.isfile("config/config.yaml")
                else os.path.join(workflow.basedir, "config", "config.yaml"))
# a run folder made by another config (same `run:` name): a real run is refused at onstart, before any job;
# a plan (-n) or a report only reads it, so it is told now
try:
    check_run_folder(RUN, workflow.configfiles)
except PowerlensError as e:
    print(f"WARNING: {e.problem}; a real run will be refused\n  fix: {e.fix}", file=sys.stderr)
MODELS = list(config["models"])  # matched controls included (powerlens.pipeline.config.add_matched_controls)
STEERED = [m for m in MODELS if steered(config["models"][m])]  # models whose chain runs steering (C9)
ENV = "../envs/powerlens.yaml"


def python_exe():
    """The interpreter for step CLIs: the conda env's `python` under --sdm conda, else Snakemake's own
    (so `.venv/bin/snakemake` works without activating the venv)."""
    try:
        from snakemake.settings.types import DeploymentMethod

        if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
            return "python"
    except Exception:
        pass
    return sys.executable


PY = python_exe()
#: The thread count of every heavy step (extraction, its check, spectra, dynamics, steering, quantization): fixed,
#: because a job's round-off depends on it (the results do not depend on --cores); table_speed measures the
#: machine's matrix-product peak at it.
STEP_THREADS = 2


def all_cores(wildcards):
    """The threads of a job that must run with no other beside it (table_speed's peak measurement): every core
    a local run was given (--cores); STEP_THREADS on a cluster (its own allocation is not shared, and a request
    of more cores than a node has would never start) or where no --cores was given."""
    if not workflow.local_exec:
        return STEP_THREADS
    try:
        return int(workflow.cores)
    except Exception:  # Snakemake raises where no --cores was given
        return STEP_THREADS


MODES = ["model", "attention-only"]
THEORY_CASES = ["real", "complex", "bipartite"]


def _resolve(path):
    """A config path: relative to the working directory if it exists there, else to the repository."""
    return path if os.path.exists(path) else os.path.join(workflow.basedir, path)


PROMPTS = _resolve(config["prompts"])

# What a rule's outputs depend on beyond its input files' mtimes, as params (a changed param makes Snakemake's
# params trigger run the job again): the sha256 of its step's code (powerlens.pipeline.code_hash) and of the
# prompt corpus (a corpus replaced by another file with an old mtime is still seen)
try:
    CODE_SHA256 = step_code_sha256(STEPS)
except PowerlensError as e:
    stop(e)


def step_code(step):
    """Param: the sha256 of the code `python -m powerlens <step>` runs (rerun the step when it changes)."""
    return CODE_SHA256[step]


wildcard_constraints:
    model="|".join(map(__import__("re").escape, MODELS)),
    mode="|".join(MODES),
    case="|".join(THEORY_CASES),


def results(path):
    """A path under this run's results folder."""
    return f"results/{RUN}/{path}"


TABLE_FORMATS = (".html", ".csv", ".md", ".tex")  # the report shows the HTML; the others are files beside it
FIGURE_FORMATS = (".png", ".pdf")  # the report shows the PNG; the PDF (vector) is beside it


def tables(name):
    """Every file of one paper table of this run."""
    return [f"paper_tables/{RUN}/{name}{ext}" for ext in TABLE_FORMATS]


def figures(name):
    """Every file of one figure of this run."""
    return [f"figures/{RUN}/{name}{ext}" for ext in FIGURE_FORMATS]


def table_outputs(name, category, key):
    """Named outputs of one table: `key` (the HTML, in the report, with its caption) and `key_csv`, `key_md`,
    `key_tex` (files beside it), so the report shows each table once."""
    first, *rest = tables(name)
    out = {key: report(first, caption=f"../report/{name}.rst", category=category)}
    out.update({f"{key}_{ext[1:]}": path for ext, path in zip(TABLE_FORMATS[1:], rest)})
    return out


TWINS_CATEGORY = "8 Twins: not evidence"


def shared_weight_models(random_weights):
    """Whether the run has a shared-weight (ALBERT) model with trained (or random) weights."""
    for name, m in config["models"].items():
        arch = model_arch(name, m, config["models"])
        if arch is not None and get_adapter(arch.arch).shares_layers and is_random(m) == random_weights:
            return True
    return False


def any_random(models):
    """Whether one of `models` has random weights (an architecture twin or a matched control)."""
    return any(is_random(config["models"][m]) for m in models)


#: Which parts of each figure the run writes, (trained, random weights): a figure for a kind of model the config
#: does not have is not written (no `_twins` figure without a random-weight model, no ALBERT figure without an
#: ALBERT model of that kind); the plot steps read the same dict (params.parts).
FIGURE_PARTS = {
    **{name: (True, any_random(MODELS)) for name in ("fig_spectra", "fig_gap", "fig_gamma", "fig_rho", "fig_tilt",
                                                     "fig_gamma_gap")},
    "fig_albert_consensus": (shared_weight_models(False), shared_weight_models(True)),
    "fig_albert_rotation": (shared_weight_models(False), shared_weight_models(True)),
    "fig_steering": (True, any_random(STEERED)),
    "fig_theory": (True, False),
}


def figure_written(name):
    """Whether the run writes the figure `name` (its trained part: the one the article shows)."""
    return FIGURE_PARTS.get(name, (True, True))[0]


def figure_parts_json(*names):
    """params.parts of a plot step: {figure: [trained, random weights]} for the figures it draws."""
    return params_json({n: list(FIGURE_PARTS[n]) for n in names})


def figure_outputs(name, category, key):
    """Named outputs of one figure, the parts :data:`FIGURE_PARTS` says the run writes: `key` (the PNG, in the
    report) and `key_pdf` (the vector file) for the trained models; `key_twins`, `key_twins_pdf` (the file
    name's suffix _twins), the same figure drawn from the models with random weights only, shown in the
    report's twins category."""
    trained, twins = FIGURE_PARTS[name]
    out = {}
    if trained:
        png, pdf = figures(name)
        out.update({key: report(png, caption=f"../report/{name}.rst", category=category), f"{key}_pdf": pdf})
    if twins:
        tpng, tpdf = figures(f"{name}_twins")
        out.update({f"{key}_twins": report(tpng, caption=f"../report/{name}.rst", category=TWINS_CATEGORY),
                    f"{key}_twins_pdf": tpdf})
    return out


def step_shell(step):
    """A rule's shell line, made from the step's declared options (powerlens.pipeline.steps.<step>.OPTIONS):
    `python -m powerlens <step>` with every input, output, wildcard, param and thread count, then
    params.flags, then the log. The rule has the step's name (tests/unit/test_step_names.py)."""
    return shell_line(step, step_module(step).OPTIONS)


def step_log(step):
    """The step's log path pattern (powerlens.pipeline.steps.job_path: logs/<run>/<step>/<job>.log)."""
    return job_path(step, "log", RUN)


def step_benchmark(step):
    """The step's benchmark path pattern (benchmarks/<run>/<step>/<job>.tsv), where scripts/bench.py and the
    speed step look for it."""
    return job_path(step, "benchmark", RUN)


def step_flags(step):
    """The step's options whose values come from the config, as one string of shell-quoted flags (params)."""
    return config_flags(step_module(step).OPTIONS, config)


def stem_of(key, name=None):
    """Params function: the stem (path without suffix) of the named output; a figure whose trained part the run
    does not write (FIGURE_PARTS) takes its random-weights part's stem without the _twins suffix, and one with
    neither part the figure `name`'s stem in this run's folder (the plot step writes nothing for it)."""

    def f(wildcards, output):
        names = output.keys()
        if key in names:
            return os.path.splitext(output[key])[0]
        if f"{key}_twins" in names:
            return os.path.splitext(output[f"{key}_twins"])[0][: -len("_twins")]
        return f"figures/{RUN}/{name or key}"

    return f


# Config text reaches a step as params_json (never raw): Snakemake's report embeds every job's params in an
# inline <script>, so <, > and & are written as JSON escapes (a step's json.loads reads back the same text).
def steering_targets_json(wildcards):
    return params_json(steering_targets(config, wildcards.model))


def provenance_records():
    """Every JSON output that carries a provenance block (so the manifest is written last)."""
    return (
        expand(results("{model}/extraction_check.json"), model=MODELS)
        + expand(results("{model}/dynamics-{mode}.json"), model=MODELS, mode=MODES)
        + expand(results("{model}/steering.json"), model=STEERED)
        + expand(results("theory/{case}.json"), case=THEORY_CASES)
    )


def labels_json():
    return params_json({m: e.get("label", m) for m, e in config["models"].items()})


def model_entry_json(wildcards):
    # what the fetch step needs: steering targets are the steering rule's params and the display label the
    # figures' and tables', so changing either re-runs those only, never the download and all after it
    skip = {"steering_targets", "label"}
    m = {k: v for k, v in config["models"][wildcards.model].items() if k not in skip}
    return params_json(m)


# steering targets whose tokenizer is on disk (twins, local folders, packages, fetched models) are checked now;
# the others right after their fetch, before extraction (rule steering_targets)
try:
    TARGETS_CHECKED_AT_FETCH = check_targets_on_disk(config, lambda m: results(f"{m}/manifest.json"))
except PowerlensError as e:
    stop(e)


def targets_checked(wildcards):
    """Extraction waits for the steering-target check of models checked after their fetch (`ancient`:
    a later change of targets re-runs that check, never the extraction)."""
    if wildcards.model in TARGETS_CHECKED_AT_FETCH:
        return [ancient(results(f"{wildcards.model}/steering_targets.json"))]
    return []


def user_model_files(wildcards):
    """The user's own files a model entry reads (local folder, package, GGUF): inputs of its fetch step."""
    return source_files(config["models"][wildcards.model])


def user_files_content(wildcards):
    """The content of the user's own files a model entry reads (one sha256; "" for none): a param of its fetch
    step, so weights saved again with their old date put back still re-run the model's chain (Snakemake's input
    trigger sees dates only). Hashed once per file, then cached by stat in .snakemake/."""
    files = user_model_files(wildcards)
    return files_sha256(files, os.path.join(".snakemake", "powerlens-file-sha256.json")) if files else ""


def controlled_manifest(wildcards):
    """A matched control is built from its trained model's fetched weights: that model's manifest."""
    m = config["models"][wildcards.model]
    return [results(f"{m['control_of']}/manifest.json")] if is_control(m) else []


# mem_mb and runtime of the per-model rules: lines in the model's size fitted to measured benchmark files
# (workflow/resources.yaml, refitted by scripts/fit_resources.py; terms in powerlens.pipeline.resources)
RESOURCE_FIT = load_coefficients(os.path.join(workflow.basedir, "workflow", "resources.yaml"))
try:
    _PROMPT_LIST = read_prompts(PROMPTS)
except PowerlensError as e:
    stop(e)
CORPUS_SHA256 = sha256_file(PROMPTS)  # param of the steps that read the corpus (a regular file: read above)
JOB_REQUESTS = {name: job_requests(RESOURCE_FIT, config, name, _PROMPT_LIST) for name in MODELS}
try:
    check_plan(JOB_REQUESTS)
except PowerlensError as e:
    stop(e)


def fitted(rule, key):
    """Resource callable: this job's request (powerlens.pipeline.resources.job_requests)."""

    def f(wildcards):
        return JOB_REQUESTS[wildcards.model][f"dynamics_{wildcards.mode}" if rule == "dynamics" else rule][key]

    return f


def gpu_request(wildcards):
    # a GPU for forward passes and attention-only dynamics when the config asks for one
    return 1 if config["device"] == "cuda" else 0


def output_index(wildcards):
    """The article's figure-and-table index: each figure and table of the run with the rule and log file
    behind it (read from the workflow's rules, so it cannot drift from them)."""
    rows = []
    for r in workflow.rules:
        logs = [str(x) for x in r.log]
        for f in map(str, r.output):
            if f.startswith((f"figures/{RUN}/", f"paper_tables/{RUN}/")) and f.endswith((".png", ".csv")):
                rows.append({"output": f, "rule": r.name, "log": logs[0] if logs else "-"})
    return params_json(sorted(rows, key=lambda x: x["output"]))


def run_command():
    """The command that rebuilds this run (its config files as given; any --cores gives the same outputs)."""
    files = [str(f) for f in (workflow.overwrite_configfiles or [])]
    files = [os.path.relpath(f) if not os.path.relpath(f).startswith("..") else f for f in files]
    return "snakemake --cores N" + (" --configfile " + " ".join(map(shlex.quote, files)) if files else "")


def get_final_output():
    return [
        results("models.lock.yaml"),
        expand(results("{model}/extraction_check.json"), model=MODELS),
        tables("table_models"),
        figures("fig_spectra") if figure_written("fig_spectra") else [],
        figures("fig_gap") if figure_written("fig_gap") else [],
        tables("table_spectra"),
        figures("fig_gamma") if figure_written("fig_gamma") else [],
        figures("fig_rho") if figure_written("fig_rho") else [],
        figures("fig_tilt") if figure_written("fig_tilt") else [],
        figures("fig_albert_consensus") if figure_written("fig_albert_consensus") else [],
        figures("fig_albert_rotation") if figure_written("fig_albert_rotation") else [],
        tables("table_alignment"),
        figures("fig_theory") if figure_written("fig_theory") else [],
        tables("table_theory"),
        figures("fig_steering") if figure_written("fig_steering") else [],
        tables("table_steering"),
        tables("table_continuations"),
        tables("table_quantization"),
        tables("table_claims"),
        tables("table_claim_verdicts"),
        tables("table_claims_twins"),
        tables("table_robustness"),
        tables("table_speed"),
        results("provenance.json"),
        results("replication.html"),
        results("replication.pdf"),
    ]

# Helpers shared by every rule: config validation, paths of this run, per-model resources.
import json
import os
import sys

from snakemake.utils import validate

from powerlens.config import check_models, mem_mb, model_params
from powerlens.errors import PowerlensError


validate(config, schema="../schemas/config.schema.yaml")
try:
    check_models(config)
except PowerlensError as e:
    raise ValueError(str(e)) from None

RUN = config["run"]
MODELS = list(config["models"])
SCRIPTS = os.path.join(workflow.basedir, "scripts")
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


MODES = ["model", "attention-only"]
THEORY_CASES = ["real", "complex", "bipartite"]  # order matters: plot_theory reads them positionally


def _resolve(path):
    """A config path: relative to the working directory if it exists there, else to the repository."""
    return path if os.path.exists(path) else os.path.join(workflow.basedir, path)


PROMPTS = _resolve(config["prompts"])


wildcard_constraints:
    model="|".join(map(__import__("re").escape, MODELS)),
    mode="|".join(MODES),
    case="|".join(THEORY_CASES),


def results(path):
    """A path under this run's results folder."""
    return f"results/{RUN}/{path}"


def tables(name):
    """The three files of one paper table of this run."""
    return multiext(f"paper_tables/{RUN}/{name}", ".csv", ".md", ".tex")


def figures(name):
    """The PDF and PNG of one figure of this run."""
    return multiext(f"figures/{RUN}/{name}", ".pdf", ".png")


def stem_of_output(wildcards, output):
    """The shared stem of a table's or figure's files (output[0] is the first)."""
    return os.path.splitext(output[0])[0]


def stem_of(key):
    """Params function: the stem of the named output (a figure or table with several suffixes)."""

    def f(wildcards, output):
        return os.path.splitext(output[key][0])[0]

    return f


def stems_of(*keys):
    """Params function: the stems of several named outputs, space-separated and quoted."""

    def f(wildcards, output):
        return " ".join(repr(os.path.splitext(output[k][0])[0]) for k in keys)

    return f


def steering_targets_json(wildcards):
    m = config["models"][wildcards.model]
    return json.dumps(m.get("steering_targets", config["steering"]["targets"]), sort_keys=True)


def claims_criteria_json():
    return json.dumps({**config["claims"], "alpha": config["dynamics"]["alpha"]}, sort_keys=True)


def provenance_records():
    """Every JSON output that carries a provenance block (so the manifest is written last)."""
    return (
        expand(results("{model}/extraction_check.json"), model=MODELS)
        + expand(results("{model}/dynamics-{mode}.json"), model=MODELS, mode=MODES)
        + expand(results("{model}/steering.json"), model=MODELS)
        + expand(results("theory/{case}.json"), case=THEORY_CASES)
    )


def labels_json():
    return json.dumps({m: e.get("label", m) for m, e in config["models"].items()}, sort_keys=True)


def model_entry_json(wildcards):
    return json.dumps(config["models"][wildcards.model], sort_keys=True)


def params_of(wildcards):
    return model_params(wildcards.model, config["models"][wildcards.model])


def mem_fetch(wildcards):
    # twins are built in memory before saving (fp32 weights plus a copy while saving)
    m = config["models"][wildcards.model]
    return mem_mb(params_of(wildcards), 9 if m["source"] == "random" else 0.5)


def mem_extract(wildcards):
    # fp32 model + fp32 copies of the attention matrices + float64 F per layer
    return mem_mb(params_of(wildcards), 7)


def mem_check(wildcards):
    # the model loaded once in fp32 and once in fp64 (not at the same time) + activations
    return mem_mb(params_of(wildcards), 12)


def mem_spectra(wildcards):
    # float64 F per unique layer plus LAPACK workspace, one layer per thread
    return mem_mb(params_of(wildcards), 3)


def mem_dynamics(wildcards):
    # fp32 model + one batch of activations for every layer hook (released per layer)
    return mem_mb(params_of(wildcards), 6, base_mb=1500)


def gpu_request(wildcards):
    # a GPU for forward passes and attention-only dynamics when the config asks for one
    return 1 if config["device"] == "cuda" else 0


def runtime_min(per_billion_min, floor=5):
    def f(wildcards):
        return max(floor, int(per_billion_min * params_of(wildcards) / 1e9) + floor)

    return f


def get_final_output():
    return [
        results("models.lock.yaml"),
        expand(results("{model}/extraction_check.json"), model=MODELS),
        tables("table_models"),
        figures("fig_spectra"),
        figures("fig_gap"),
        tables("table_spectra"),
        figures("fig_gamma"),
        figures("fig_rho"),
        figures("fig_albert_consensus"),
        figures("fig_albert_rotation"),
        tables("table_alignment"),
        figures("fig_theory"),
        tables("table_theory"),
        figures("fig_steering"),
        tables("table_steering"),
        tables("table_claims"),
        results("provenance.json"),
    ]

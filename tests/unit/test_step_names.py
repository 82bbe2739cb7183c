"""One name per step (issue #41): the rule, the step module, the command, the log and benchmark paths and the
resource entry all spell the step's name the same way. The workflow's rules are read from Snakemake's own
objects (the Snakefile loaded with the test config, nothing run), not from the .smk text."""

import re

import pytest
import yaml

from powerlens.pipeline.resources import JOB_KINDS, load_coefficients
from powerlens.pipeline.steps import JOBS, STEPS, job_file, job_path, step_module

from ..conftest import REPO


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DeploymentSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
        WorkflowSettings,
    )

    with SnakemakeApi(OutputSettings()) as api:
        w = api.workflow(snakefile=REPO / "Snakefile", resource_settings=ResourceSettings(),
                         config_settings=ConfigSettings(configfiles=[REPO / "config/test.yaml"]),
                         storage_settings=StorageSettings(), workflow_settings=WorkflowSettings(),
                         deployment_settings=DeploymentSettings(), workdir=tmp_path_factory.mktemp("wf"))
        return {r.name: r for r in w._workflow.rules if r.name != "all"}


def _plain(pattern: str) -> str:
    """A Snakemake path with its wildcard constraints dropped: {model,a|b} -> {model}."""
    return re.sub(r"\{(\w+),[^}]*\}", r"{\1}", pattern)


def test_every_rule_is_a_step_and_every_step_a_rule(rules):
    assert set(rules) == set(STEPS), (set(rules) ^ set(STEPS))


@pytest.mark.parametrize("step", STEPS)
def test_a_steps_rule_module_command_log_and_benchmark_share_its_name(rules, step):
    r = rules[step]
    assert step_module(step).__name__ == f"powerlens.pipeline.steps.{step}"
    assert re.search(rf" -m powerlens {step} ", r.shellcmd), r.shellcmd  # the command the rule runs
    log, = (str(x) for x in r.log)
    assert _plain(log) == job_path(step, "log", "test"), log
    assert _plain(str(r.benchmark)) == job_path(step, "benchmark", "test"), r.benchmark
    # the step's name and no other spelling: the path's words are the run, the step, then wildcards only
    under = _plain(log).split("/", 2)[2]
    assert under.split("/")[0].removesuffix(".log") == step
    assert re.fullmatch(rf"{step}(/\{{\w+\}}(-\{{\w+\}})*)?\.log", under), under


def test_resource_entries_are_steps_by_name():
    coeffs = load_coefficients(REPO / "workflow/resources.yaml")
    assert set(coeffs) == set(JOB_KINDS)
    for key, (step, wildcards) in JOB_KINDS.items():
        assert step in STEPS
        assert key == "_".join([step, *wildcards.values()]), key  # dynamics_model: the step, then its mode
    measured = yaml.safe_load((REPO / "workflow/resources.yaml").read_text())["rules"]
    assert set(measured) == set(JOB_KINDS)


def test_job_files_follow_the_declared_wildcards():
    assert job_file("dynamics", "benchmark", model="m", mode="model") == "dynamics/m-model.tsv"
    assert job_file("claims", "log") == "claims.log"
    assert job_path("spectra", "benchmark", "offline", model="minilm-l6") == "benchmarks/offline/spectra/minilm-l6.tsv"
    assert set(JOBS) <= set(STEPS)
    with pytest.raises(KeyError):
        job_file("extract" + "_weights", "log")  # the old rule name is no step


def test_no_old_rule_name_is_left():
    """The names three steps had before (their rules were named otherwise than their modules) appear
    nowhere in the code, the workflow or the docs."""
    old = ("extract" + "_weights", "lock" + "_models", "check_steering" + "_targets:")
    files = [p for pat in ("src/**/*.py", "scripts/*.py", "workflow/**/*.smk", "workflow/**/*.yaml", "Snakefile",
                           "README.md", "workflow/README.md", "tests/**/*.py", "tests/**/*.sh")
             for p in REPO.glob(pat)]
    hits = [(str(p.relative_to(REPO)), o) for p in files for o in old if o in p.read_text(errors="replace")]
    assert not hits, hits

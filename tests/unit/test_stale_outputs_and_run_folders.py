"""Issue 52, stale outputs and runs that overwrite each other: the step's code and the prompt corpus are params
of the rules they affect, provenance reads the project's own repository (untracked files counted), a run folder
remembers the config that made it, inspect --csv never writes into a run folder, and a SLURM profile on a
machine without a working SLURM is refused before any job starts.

The workflow tests run a copy of the project (Snakefile, workflow/, config/, src/ on PYTHONPATH) in a
temporary folder, so an edit of "the package's code" is made to the copy only; one real job (theory, a few
seconds) gives Snakemake metadata to compare with.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from powerlens.core.errors import PowerlensError
from powerlens.outputs.provenance import code_revision
from powerlens.pipeline import code_hash
from powerlens.pipeline.cluster import check_executor_tools, executor_tools
from powerlens.pipeline.report_check import check_report_fresh
from powerlens.pipeline.run_folder import RECORD, check_not_run_output, check_run_folder, claim_run_folder

from ..conftest import REPO

CONFIG = """run: stale
description: "one tiny twin (tests/unit/test_stale_outputs_and_run_folders.py)"
seed: 0
models:
  tiny-gpt2: {arch: gpt2, source: random, twin_of: tiny-gpt2, seed: 0}
prompts: PROMPTS
dynamics: {steps: 40, max_tokens: 32, batch_size: 8}
theory: {runs: 10, steps: 100, c4_sizes: [16], c4_heads: [1, 4], c4_sharpness: [0.3, 3], c4_equilibrium_steps: 300}
steering: {kappas: [0, 4, 64], max_prompts: 8, max_tokens: 32,
           targets: [{kind: embedding, token: e}, {kind: random, seed: 0}],
           continuations: {prompts: ["The cat"], new_tokens: 4}}
"""
TARGET = "results/stale/theory/real.json"


# ---- helpers ------------------------------------------------------------------------------------------------
def copy_project(dest: Path, names=("workflow", "config", "src")) -> Path:
    """The files a run needs, copied (no caches): the copy's package is the one its steps import."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in names:
        shutil.copytree(REPO / name, dest / name, ignore=skip, symlinks=True)
    shutil.copy2(REPO / "Snakefile", dest / "Snakefile")
    return dest


def snakemake(proj: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(proj / "src")}
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(proj / "Snakefile"), "--cores", "1", *args],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)


def rule_params(proj: Path, work: Path, *configfiles: Path) -> list[dict]:
    """Per config file, each rule's params `code` and `corpus` as the workflow defines them (the workflow
    parsed by Snakemake's API, in one subprocess on the copy's package)."""
    script = (
        "import json, sys\nfrom pathlib import Path\nfrom snakemake.api import SnakemakeApi\n"
        "from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings\n"
        "for cfg in sys.argv[3:]:\n"
        "    with SnakemakeApi(OutputSettings()) as api:\n"
        "        wf = api.workflow(ResourceSettings(cores=1), ConfigSettings(configfiles=[Path(cfg)]),\n"
        "                          snakefile=Path(sys.argv[1]), workdir=Path(sys.argv[2]))._workflow\n"
        "        out = {r.name: {k: v for k, v in r.params.items() if k in ('code', 'corpus')} for r in wf.rules}\n"
        "    print('PARAMS' + json.dumps(out))\n")
    r = subprocess.run([sys.executable, "-c", script, str(proj / "Snakefile"), str(work), *map(str, configfiles)],
                       env={**os.environ, "PYTHONPATH": str(proj / "src")}, capture_output=True, text=True,
                       timeout=120)
    out = [json.loads(ln[len("PARAMS"):]) for ln in r.stdout.splitlines() if ln.startswith("PARAMS")]
    assert len(out) == len(configfiles), r.stdout[-2000:] + r.stderr[-2000:]
    return out


def clean_refusal(r: subprocess.CompletedProcess, *words: str) -> str:
    """A refusal in the project's form: exit 2, ERROR and fix lines, the words named, no traceback."""
    assert r.returncode == 2, r.stdout[-1500:] + r.stderr[-1500:]
    assert "ERROR: " in r.stderr and "  fix: " in r.stderr and "Traceback" not in r.stderr, r.stderr[-1500:]
    for w in words:
        assert w in r.stderr, (w, r.stderr[-1500:])
    return r.stderr


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A copy of the project, a working folder with c1.yaml (one tiny twin) and one real job (theory, real)."""
    base = tmp_path_factory.mktemp("stale")
    proj = copy_project(base / "proj")
    work = base / "work"
    work.mkdir()
    corpus = work / "prompts.txt"
    shutil.copy2(REPO / "config" / "prompts_test.txt", corpus)
    cfg = work / "c1.yaml"
    cfg.write_text(CONFIG.replace("PROMPTS", str(corpus)))
    r = snakemake(proj, work, TARGET, "--configfile", str(cfg))
    assert r.returncode == 0, r.stderr[-3000:]
    return {"proj": proj, "work": work, "cfg": cfg, "corpus": corpus}


# ---- 1. the step's code is an input of what it affects -------------------------------------------------------
def test_the_code_hash_follows_the_imports_of_each_step(tmp_path):
    g = code_hash.import_graph()
    theory = code_hash.closure("theory", graph=g)
    assert "powerlens.analysis.theory" in theory and "powerlens.pipeline.steps.theory" in theory
    assert "powerlens.cli" in theory and "powerlens.core.errors" in theory  # the runner and what it imports
    assert "powerlens.analysis.dynamics" not in theory  # another step's science
    assert "powerlens.api" not in theory  # the package's lazy __getattr__ is not run by a step
    assert "powerlens.models.sources.twin" in code_hash.closure("fetch_model", graph=g)
    assert "powerlens.analysis.theory" not in code_hash.closure("fetch_model", graph=g)
    # the theory package loads its modules by name on first use (PEP 562): they are theory's code all the same
    for m in ("synthetic", "bipartite", "linearise", "verdicts"):
        assert f"powerlens.analysis.theory.{m}" in theory
    # the runner's loader of the step by name does not pull every other step in
    assert "powerlens.pipeline.steps.dynamics" not in theory
    # an edit changes exactly the hashes of the steps whose closure holds the edited file, wherever the copy is
    a = copy_project(tmp_path / "a", ["src"]) / "src" / "powerlens"
    b = copy_project(tmp_path / "b", ["src"]) / "src" / "powerlens"
    steps = ("theory", "fetch_model", "spectra", "dynamics", "plot_theory")
    before = code_hash.step_code_sha256(steps, a)
    assert before == code_hash.step_code_sha256(steps, b)  # the checkout's path does not count
    edited = a / "analysis" / "theory" / "__init__.py"
    edited.write_text("# a comment and a blank line change no code\n\n" + edited.read_text())
    assert code_hash.step_code_sha256(steps, a) == before
    edited.write_text(edited.read_text() + "\n_EDITED = 1\n")
    after = code_hash.step_code_sha256(steps, a)
    uses = {s: "powerlens.analysis.theory" in code_hash.closure(s, a) for s in steps}
    assert uses["theory"] and not uses["fetch_model"]
    assert {s: after[s] != before[s] for s in steps} == uses
    # the probe of #69: a default of a module only the lazy __getattr__ loads reruns theory and what reads it
    edited = a / "analysis" / "theory" / "synthetic.py"
    text = edited.read_text()
    assert "gap: float = 3.0" in text
    edited.write_text(text.replace("gap: float = 3.0", "gap: float = 5.0", 1))
    lazy = code_hash.step_code_sha256(steps, a)
    assert lazy["theory"] != after["theory"] and lazy["plot_theory"] != after["plot_theory"]
    assert lazy["fetch_model"] == after["fetch_model"] and lazy["dynamics"] == after["dynamics"]
    after = lazy
    edited = a / "core" / "errors.py"  # used by every step
    edited.write_text(edited.read_text() + "\n_EDITED = 2\n")
    again = code_hash.step_code_sha256(steps, a)
    assert all(again[s] != after[s] for s in steps)
    edited.write_text(edited.read_text() + "\ndef broken(:\n")  # a module that does not parse: told, no traceback
    with pytest.raises(PowerlensError) as e:
        code_hash.step_code_sha256(steps, a)
    assert "errors.py" in e.value.problem and "py_compile" in e.value.fix


def test_every_rule_carries_its_steps_code_hash_and_the_corpus_sha256(run):
    proj, work, cfg, corpus = run["proj"], run["work"], run["cfg"], run["corpus"]
    (params,) = rule_params(proj, work, cfg)
    code = code_hash.step_code_sha256([r for r in params if r != "all"], proj / "src" / "powerlens")
    assert {r: p.get("code") for r, p in params.items() if r != "all"} == code
    readers = {r for r, p in params.items() if "corpus" in p}
    assert readers == {"dynamics", "steering", "quantization", "provenance"}
    assert {params[r]["corpus"] for r in readers} == {hashlib.sha256(corpus.read_bytes()).hexdigest()}
    # the corpus replaced by another file under the old mtime: the param (so Snakemake's params trigger) sees it
    old, stat = corpus.read_bytes(), corpus.stat()
    try:
        corpus.write_text("".join(f"Prompt number {i} about a different topic.\n" for i in range(40)))
        os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        (changed,) = rule_params(proj, work, cfg)
    finally:
        corpus.write_bytes(old)
        os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert {changed[r]["corpus"] for r in readers} == {hashlib.sha256(b"".join(
        f"Prompt number {i} about a different topic.\n".encode() for i in range(40))).hexdigest()}


def test_editing_a_steps_code_reruns_it_and_the_report_check_agrees(run, monkeypatch):
    proj, work, cfg = run["proj"], run["work"], run["cfg"]
    r = snakemake(proj, work, TARGET, "--configfile", str(cfg), "-n")
    assert r.returncode == 0 and "Nothing to be done" in r.stdout + r.stderr
    pkg = proj / "src" / "powerlens"
    theory = pkg / "analysis" / "theory" / "__init__.py"
    # a module theory's code never imports (the closure is the import graph's: one is picked that is outside)
    outside = set(code_hash.module_files(pkg)) - set(code_hash.closure("theory", pkg))
    twin = code_hash.module_files(pkg)[next(m for m in ("powerlens.analysis.dynamics", "powerlens.outputs.article",
                                                        "powerlens.api") if m in outside)]
    old_twin, old_theory = twin.read_text(), theory.read_text()
    try:
        twin.write_text(old_twin + "\n_EDITED = 'outside theory'\n")
        r = snakemake(proj, work, TARGET, "--configfile", str(cfg), "-n")
        assert "Nothing to be done" in r.stdout + r.stderr, r.stdout[-2000:]
        theory.write_text(old_theory + "\n_EDITED = 'theory'\n")
        r = snakemake(proj, work, TARGET, "--configfile", str(cfg), "-n")
        out = r.stdout + r.stderr
        assert r.returncode == 0 and "params have changed" in out and "rule theory" in out, out[-2000:]
        assert not (work / "results" / "stale" / "theory" / "real.json.snakemake_timestamp").exists()
        # the report's freshness check asks Snakemake the same question and refuses
        monkeypatch.chdir(work)
        monkeypatch.setenv("PYTHONPATH", str(proj / "src"))
        with pytest.raises(PowerlensError) as e:
            check_report_fresh(["--report", "r.html", "--cores", "1", TARGET], proj / "Snakefile", [str(cfg)])
        assert "results/stale/theory/real" in e.value.problem and "params changed" in e.value.problem
    finally:
        twin.write_text(old_twin)
        theory.write_text(old_theory)


# ---- 2. provenance reads the project's own repository --------------------------------------------------------
def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def test_provenance_counts_untracked_files_and_ignores_an_outer_repository(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".gitignore").write_text("results/\n")
    (root / "a.py").write_text("x = 1\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    clean = code_revision(root)
    assert clean["commit"] and clean["uncommitted_changes"] is False and clean["untracked_files"] == 0
    (root / "results").mkdir()
    (root / "results" / "out.csv").write_text("ignored\n")
    assert code_revision(root)["uncommitted_changes"] is False  # an ignored file is not a change
    (root / "new.py").write_text("y = 2\n")
    dirty = code_revision(root)
    assert dirty["uncommitted_changes"] is True and dirty["untracked_files"] == 1 and dirty["modified_files"] == 0
    # a project copied inside another repository: the outer commit says nothing about it
    inner = root / "vendor" / "powerlens"
    inner.mkdir(parents=True)
    assert code_revision(inner) == {"commit": None, "git": "not a git checkout"}
    assert code_revision(tmp_path / "nowhere")["git"] == "not a git checkout"


def test_provenance_records_the_corpus_sha256(tmp_path):
    from powerlens.pipeline.steps.provenance import provenance_manifest

    corpus = tmp_path / "p.txt"
    corpus.write_text("one prompt\nanother prompt\n")
    man = tmp_path / "m.json"
    man.write_text(json.dumps({"model": "m", "source": "random", "arch": "gpt2", "weights_label": "random weights",
                               "files": {}}))
    doc = provenance_manifest(json.dumps({"run": "r", "seed": 0}), [str(man)], [], out_path=tmp_path / "prov.json",
                              prompts_path=corpus)
    assert doc["corpus"] == {"path": str(corpus), "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}
    assert json.loads((tmp_path / "prov.json").read_text())["corpus"]["sha256"] == doc["corpus"]["sha256"]


# ---- 4. a run folder remembers the config that made it -------------------------------------------------------
def test_a_run_folder_refuses_another_config_and_accepts_its_own(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    check_run_folder("r", [a], tmp_path)  # no record yet: nothing to compare
    assert claim_run_folder("r", [a], tmp_path) is True
    assert claim_run_folder("r", [a], tmp_path) is False  # recorded once
    check_run_folder("r", ["a.yaml"], tmp_path)  # the same file, however it is named
    with pytest.raises(PowerlensError) as e:
        check_run_folder("r", [b], tmp_path)
    assert "results/r/ was made by another config" in e.value.problem and str(a) in e.value.problem
    assert "another `run:` name" in e.value.fix and "delete results/r/" in e.value.fix
    with pytest.raises(PowerlensError):
        check_run_folder("r", [a, b], tmp_path)  # a config list with another file is another config
    (tmp_path / "results" / "r" / RECORD).write_text("{not json")
    with pytest.raises(PowerlensError) as e:
        check_run_folder("r", [a], tmp_path)
    assert "cannot be read" in e.value.problem


def test_the_config_that_sets_the_run_names_it_and_overlays_add_to_it(tmp_path):
    """`make offline` gives offline.yaml and offline-decoders.yaml (no `run:` of its own), the README's audit
    example offline.yaml alone: one run. Another file that sets the same `run:` is another config."""
    main, overlay, other = (tmp_path / n for n in ("main.yaml", "overlay.yaml", "other.yaml"))
    main.write_text("run: r\nseed: 0\n")
    overlay.write_text("models: {}\n")
    other.write_text("run: r\n")
    claim_run_folder("r", [main, overlay], tmp_path)
    check_run_folder("r", [main], tmp_path)
    check_run_folder("r", [main, overlay], tmp_path)
    for given in ([other], [main, other], [other, overlay]):
        with pytest.raises(PowerlensError, match="made by another config"):
            check_run_folder("r", given, tmp_path)


def test_the_workflow_refuses_a_second_config_with_the_same_run_name(run, tmp_path):
    proj, work, cfg = run["proj"], run["work"], run["cfg"]
    record = json.loads((work / "results" / "stale" / RECORD).read_text())
    assert record["configfiles"] == [str(cfg)]  # written by the real run
    other = tmp_path / "c2.yaml"
    other.write_text(cfg.read_text().replace("one tiny twin", "another config"))
    r = snakemake(proj, work, TARGET, "--configfile", str(other), "-n")  # a plan only reads: told, not refused
    assert r.returncode == 0 and "WARNING: run folder results/stale/ was made by another config" in r.stderr
    complex_json = work / "results" / "stale" / "theory" / "complex.json"
    r = snakemake(proj, work, str(complex_json.relative_to(work)), "--configfile", str(other))
    clean_refusal(r, "results/stale/ was made by another config", str(cfg), "another `run:` name")
    assert not complex_json.exists()  # refused before the job
    # editing the config that made it is a rerun, not another config
    text = cfg.read_text()
    try:
        cfg.write_text(text.replace("one tiny twin", "one tiny twin, edited"))
        r = snakemake(proj, work, TARGET, "--configfile", str(cfg), "-n")
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        cfg.write_text(text)
    # a dry run writes no record (nor its folder)
    fresh = tmp_path / "c3.yaml"
    fresh.write_text(cfg.read_text().replace("run: stale", "run: fresh"))
    assert snakemake(proj, work, TARGET.replace("stale", "fresh"), "--configfile", str(fresh), "-n").returncode == 0
    assert not (work / "results" / "fresh").exists()


# ---- 5. inspect --csv never writes into a run folder ---------------------------------------------------------
def test_inspect_csv_through_a_symlink_into_a_run_folder_is_refused(tmp_path, capsys):
    from powerlens.cli import main

    model = tmp_path / "results" / "other" / "m"
    model.mkdir(parents=True)
    tracked = model / "spectra.csv"
    tracked.write_text("layer,lambda\n0,1.0\n")
    link = tmp_path / "mine"
    link.symlink_to(model, target_is_directory=True)
    with pytest.raises(PowerlensError) as e:
        check_not_run_output(link / "spectra.csv")
    assert str(model) in e.value.problem and "outside any results/" in e.value.fix
    # a run's tables and figures too (the probe's second round), and its benchmark files and logs (#69: a
    # benchmark file overwritten by inspect --csv ended --forcerun speed in KeyError 's')
    for root in ("paper_tables", "figures", "benchmarks", "logs"):
        with pytest.raises(PowerlensError, match="inside run folder"):
            check_not_run_output(tmp_path / root / "other" / "table_spectra.csv")
    check_not_run_output(tmp_path / "results" / "spectra.csv")  # results/ itself is no run folder
    check_not_run_output(tmp_path / "out" / "spectra.csv")
    with pytest.raises(SystemExit) as ex:
        main(["inspect", str(tmp_path / "no-such-model"), "--csv", str(link / "spectra.csv")])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert "run folder" in err and "fix:" in err and "Traceback" not in err
    assert tracked.read_text() == "layer,lambda\n0,1.0\n"


# ---- 6. SLURM without SLURM ----------------------------------------------------------------------------------
def test_the_slurm_check_needs_its_commands_and_a_cluster():
    assert executor_tools("local") == [] and executor_tools(None) == []
    assert executor_tools("slurm") == ["sbatch", "sacct"] and executor_tools("slurm", "squeue")[-1] == "squeue"
    check_executor_tools("local", which=lambda t: None)  # the local executor needs nothing

    def ok(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 0, "", "")

    def no_cluster(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, "", "squeue: fatal: Could not establish a configuration source")

    check_executor_tools("slurm", "squeue", which=lambda t: f"/usr/bin/{t}", run=ok)
    with pytest.raises(PowerlensError) as e:
        check_executor_tools("slurm", None, which=lambda t: None if t == "sacct" else "/x", run=ok)
    assert "`sacct` is not on PATH" in e.value.problem and "--profile workflow/profiles/default" in e.value.fix
    with pytest.raises(PowerlensError) as e:
        check_executor_tools("slurm", "squeue", which=lambda t: f"/usr/bin/{t}", run=no_cluster)
    assert "finds no SLURM cluster" in e.value.problem and "configuration source" in e.value.problem


def slurm_works() -> bool:
    try:
        return subprocess.run(["squeue", "--me", "--noheader"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def test_the_slurm_profile_without_slurm_stops_before_any_job_and_keeps_the_article(run):
    if slurm_works():
        pytest.skip("this machine is a SLURM submit host: the profile would really submit")
    proj, work, cfg = run["proj"], run["work"], run["cfg"]
    article = work / "results" / "stale" / "replication.html"
    article.write_text("<p>the previous article</p>")
    target = "results/stale/theory/complex.json"
    r = snakemake(proj, work, target, "--configfile", str(cfg), "--profile", str(proj / "workflow/profiles/slurm"))
    clean_refusal(r, "slurm executor", "--profile workflow/profiles/default")
    assert article.read_text() == "<p>the previous article</p>"
    assert not (work / target).exists()

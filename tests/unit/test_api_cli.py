"""The public Python API (powerlens.Lens) and the `powerlens` command: same numbers as the pipeline steps,
the README's example as printed, every flag explained."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlens.core.errors import PowerlensError

from ..conftest import REPO


@pytest.fixture(scope="module")
def twin(prepared_twin):
    """A tiny GPT-2 twin fetched, extracted and solved by the pipeline's own step functions."""
    return prepared_twin("tiny-gpt2")


def test_lens_reads_arch_from_config_and_matches_the_pipelines_spectra(twin):
    import powerlens

    d, rec = twin
    lens = powerlens.Lens.from_pretrained(rec["path"])  # no arch given: config.json says gpt2
    assert lens.arch == "gpt2" and "gpt2" in repr(lens)
    sp = lens.spectra()
    with np.load(d / "s.npz") as z:
        assert np.array_equal(np.stack(sp.eigenvalues), z["eigvals"])  # the same function, the same numbers
        assert np.array_equal(np.stack(sp.eigenvectors), z["vecs"])
    csv = pd.read_csv(d / "s.csv").drop_duplicates("unique_layer")
    assert np.allclose(sp.table["abs_lambda1"], csv["abs_lambda1"], rtol=1e-12)
    F = lens.F(0)
    assert F.shape == (lens.weights.d_model, lens.weights.d_model)
    assert np.allclose(sorted(np.abs(np.linalg.eigvals(F)))[-1], sp.table["abs_lambda1"][0])
    # printing a spectrum is one line, not every eigenvalue
    assert len(repr(sp[0]).splitlines()) == 1 and "leading=" in repr(sp[0])


def test_lens_dynamics_is_the_pipelines_dynamics(twin, tmp_path):
    from powerlens.pipeline.config import schema_defaults
    from powerlens.pipeline.steps.dynamics import dynamics

    d, rec = twin
    prompts = ["The cat sat on the mat.", "Water boils at one hundred degrees.", "A b c d e f g."]
    (tmp_path / "p.txt").write_text("\n".join(prompts) + "\n")
    ref = dynamics(d / "m.json", d / "w.safetensors", d / "w.json", spectra_npz=d / "s.npz",
                   prompts_path=tmp_path / "p.txt", out_npz=tmp_path / "d.npz", out_csv=tmp_path / "d.csv",
                   out_json=tmp_path / "d.json", mode="model", null_draws=2000, null_draws_cap=200_000,
                   max_tokens=16, batch_size=2, long_run_prompts=32, batch_tokens=20, norm="l2", steps=200, seed=0,
                   device="cpu", dtype="float32", threads=1, control=True, alpha=0.05, robustness=False,
                   criteria=schema_defaults()["claims"], out_robustness=tmp_path / "r.csv")
    import powerlens

    lens = powerlens.Lens.from_pretrained(rec["path"], head=False)
    got = lens.dynamics(prompts, null_draws=2000, max_tokens=16, batch_size=2, batch_tokens=20)
    for c in ("gamma", "rho", "tilt", "gamma_p", "rho_null_q95", "tilt_eig_rank", "attn_tilt", "tilt_R"):
        assert np.allclose(got[c].to_numpy(), ref[c].to_numpy(), rtol=1e-9, atol=1e-12, equal_nan=True), c
    assert (got["tilt_sig"] == ref["tilt_sig"]).all()
    import json  # the step writes how much Monte Carlo projection it did, for the speed table's bound

    assert json.loads((tmp_path / "d.json").read_text())["arithmetic"]["null_projection_flops"] > 0


def test_steer_is_reversible_and_makes_u_principal(twin):
    import torch

    import powerlens

    _, rec = twin
    lens = powerlens.Lens.from_pretrained(rec["path"])
    before = {k: v.clone() for k, v in lens.model.state_dict().items()}
    with lens.steer("e", kappa=64) as edit:
        assert edit["principal"]["u_principal"]
        changed = [k for k, v in lens.model.state_dict().items() if not torch.equal(v, before[k])]
        assert len(changed) == 1 and "c_proj" in changed[0]  # the last layer's W_O only
    assert all(torch.equal(v, before[k]) for k, v in lens.model.state_dict().items())


def test_lens_from_a_loaded_model_and_bad_inputs(twin, tmp_path):
    import transformers

    import powerlens

    _, rec = twin
    model = transformers.AutoModel.from_pretrained(rec["path"], trust_remote_code=False)
    assert powerlens.Lens(model).arch == "gpt2"
    with pytest.raises(PowerlensError, match="no powerlens adapter"):
        powerlens.arch_of({"model_type": "mamba"})
    with pytest.raises(PowerlensError, match="has no config.json"):
        powerlens.Lens.from_pretrained(tmp_path)


def readme_block(lang: str, marker: str) -> str:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"README: one ```{lang} block containing {marker!r}"
    return found[0]


@pytest.mark.integration  # the installed command in subprocesses: make test
def test_readme_api_example_runs_as_printed(minilm_path):
    code = readme_block("python", "powerlens.Lens")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "complex pair" in r.stdout or "real positive" in r.stdout
    assert "u_principal: True" in r.stdout, r.stdout[-2000:]


def test_every_flag_of_every_command_is_explained():
    from powerlens.cli import build_parser
    from powerlens.pipeline.steps import STEPS

    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    assert set(sub.choices) == {"inspect"} | set(STEPS)  # each command named as its step (and its rule)
    for name, p in sub.choices.items():
        assert p.description, name
        for act in p._actions:
            assert act.help, (name, act.option_strings or act.dest)
            # a step's defaults live in the config schema only: the rule passes every option
            if name != "inspect" and act.option_strings and not isinstance(act, __import__("argparse")._HelpAction):
                assert act.required and act.default is None, (name, act.option_strings)


@pytest.mark.integration  # the installed command in subprocesses: make test
def test_powerlens_command_inspect_and_step_help(minilm_path, twin):
    from pathlib import Path

    console = Path(sys.executable).parent / "powerlens"  # the console script `pip install` made
    assert console.is_file(), "pip install -e . creates the `powerlens` command next to python"
    r = subprocess.run([str(console), "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("powerlens "), r.stderr
    exe = [sys.executable, "-m", "powerlens.cli"]
    r = subprocess.run(exe + ["--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "inspect" in r.stdout and "spectra" in r.stdout
    r = subprocess.run(exe + ["spectra", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--top-k" in r.stdout and "(default:" not in r.stdout
    r = subprocess.run(exe + ["inspect", str(minilm_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [ln for ln in r.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s", ln)]
    assert len(rows) == 6 and "Lens(bert" in r.stdout and "\r" not in r.stdout + r.stderr
    assert "not a run's model folder, so neither labelled trained nor random" in r.stdout.splitlines()[0]
    r = subprocess.run(exe + ["inspect", twin[1]["path"], "--csv", str(twin[0] / "t.csv")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "Lens(gpt2" in r.stdout and "[random weights]" in r.stdout, r.stderr[-2000:]
    first = r.stdout.splitlines()[0]
    assert "Lens(gpt2" in first and "loaded in" in first  # printed as soon as the model is loaded
    import pandas as pd

    t = pd.read_csv(twin[0] / "t.csv")
    assert {"Re lambda_1", "Im lambda_1"} <= set(t.columns) and t["Re lambda_1"].dtype.kind == "f"
    assert t["Im lambda_1"].dtype.kind == "f"  # complex values in two real columns, never "(1.2+0j)" strings
    r = subprocess.run(exe + ["inspect", "/nonexistent/folder"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "ERROR:" in r.stderr and "fix:" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(exe + ["inspect", "--help"], capture_output=True, text=True, timeout=120)
    assert "(default: None)" not in r.stdout and r.stdout.count("default:") >= 2, r.stdout
    r = subprocess.run(exe + ["--help"], capture_output=True, text=True, timeout=120)
    assert "``" not in r.stdout


def test_inspect_tells_paths_from_hub_ids(tmp_path, monkeypatch, twin):
    """An argument that cannot be a hub id is a path and never reaches the hub; a run's model folder stands for
    the weights its manifest names; a bad --csv stops before any work."""
    import json

    from powerlens.api import model_location, weights_label_of
    from powerlens.cli import main
    from powerlens.core.errors import PowerlensError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/run/m").mkdir(parents=True)
    for arg in ("results/offline/minilm", "./x", "~/nowhere/x", "a/b/c"):
        with pytest.raises(PowerlensError, match="local path"):
            model_location(arg)
    assert model_location("org/name") == ("hub", "org/name")
    assert model_location("gpt2") == ("hub", "gpt2")
    (tmp_path / "results/run/m/manifest.json").write_text(json.dumps({"path": twin[1]["path"],
                                                                      "weights_label": "random weights"}))
    assert model_location("results/run/m") == ("path", Path(twin[1]["path"]).resolve())
    assert weights_label_of("results/run/m") == "random weights" == weights_label_of(twin[1]["path"])
    import powerlens.api

    # patched where the API looks it up (its module namespace)
    monkeypatch.setattr(powerlens.api, "fetch_hf", lambda *a, **k: (_ for _ in ()).throw(AssertionError("hub called")))
    with pytest.raises(SystemExit) as e:
        main(["inspect", "results/run/m", "--csv", str(tmp_path / "no/such/dir/x.csv")])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["inspect", "results/offline/minilm"])  # a typo of a run's folder: a path, not a hub id
    assert e.value.code == 2


def test_a_target_after_configfile_is_refused_with_the_corrected_command(tmp_path, monkeypatch):
    import json

    from powerlens.core.errors import PowerlensError
    from powerlens.pipeline.config import check_configfiles_are_configs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/offline/m").mkdir(parents=True)
    out = tmp_path / "results/offline/m/extraction_check.json"
    out.write_text(json.dumps({"model": "m", "checks": [], "passed": True}))
    (tmp_path / "elsewhere.json").write_text(json.dumps({"model": "m", "passed": True}))
    (tmp_path / "mine.yaml").write_text("seed: 3\n")
    argv = ["snakemake", "--cores", "2", "--configfile", "mine.yaml", "results/offline/m/extraction_check.json"]
    with pytest.raises(PowerlensError) as e:
        check_configfiles_are_configs([str(tmp_path / "mine.yaml"), str(out)], argv)
    assert "looks like an output file" in e.value.problem and "put targets before --configfile" in e.value.problem
    assert e.value.fix == ("run: snakemake results/offline/m/extraction_check.json --cores 2 --configfile "
                           "mine.yaml")
    with pytest.raises(PowerlensError, match="none of its keys"):
        check_configfiles_are_configs([str(tmp_path / "elsewhere.json")], ["snakemake", "--configfile",
                                                                          "elsewhere.json"])
    check_configfiles_are_configs([str(tmp_path / "mine.yaml")], argv)  # a config passes


def test_steps_take_at_most_three_positional_arguments():
    """Every pipeline step is called with named arguments: at most three positional parameters each."""
    import inspect

    from powerlens.pipeline.steps import STEPS, step_module

    fns = [step_module(s).STEP for s in STEPS]
    assert len(fns) == len(STEPS) >= 18
    for f in fns:
        pos = [p for p in inspect.signature(f).parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert len(pos) <= 3, (f.__name__, [p.name for p in pos])


def test_each_option_is_declared_once_and_matches_its_step_and_rule():
    """A step's OPTIONS are the one declaration: each names a keyword of the step's function and every
    parameter without a default has an option; each rule running the step names the inputs, outputs and
    params its options take values from, and passes no option of its own (its shell line is step_shell)."""
    import inspect
    import re

    from powerlens.pipeline.steps import STEPS, step_module

    rules = {}
    for f in (REPO / "workflow/rules").glob("*.smk"):
        for block in re.split(r"(?m)^(?=rule \w+:)", f.read_text()):
            m = re.search(r'step_shell\("(\w+)"\)', block)
            if m:
                rules[m.group(1)] = block
    assert set(rules) == set(STEPS)
    for s in STEPS:
        mod = step_module(s)
        sig = inspect.signature(mod.STEP).parameters
        kws = [o.keyword for o in mod.OPTIONS]
        assert len(kws) == len(set(kws)), s
        var_kw = any(p.kind == p.VAR_KEYWORD for p in sig.values())
        assert all(k in sig or var_kw for k in kws), (s, [k for k in kws if k not in sig])
        need = [n for n, p in sig.items() if p.default is p.empty and p.kind not in (p.VAR_KEYWORD,)]
        assert set(need) <= set(kws), (s, set(need) - set(kws))
        block = rules[s]
        for o in mod.OPTIONS:
            where, _, key = o.source.partition(":")
            if where in ("input", "output", "param"):
                section = {"param": "params"}.get(where, where)
                assert re.search(rf"(?ms)^    {section}:.*?^        (\*\*\w+\(.*key=\"{key}\"|{key}=)", block), (s,
                                                                                                                 o.flag)
        assert ("flags=step_flags" in block) == any(o.source.startswith("config:") for o in mod.OPTIONS), s


def test_a_rules_flags_come_from_the_config_paths_the_step_declares():
    from powerlens.pipeline.config import schema_defaults
    from powerlens.pipeline.options import config_flags
    from powerlens.pipeline.steps import step_module

    cfg = {**schema_defaults(), "lock_file": ""}
    flags = config_flags(step_module("dynamics").OPTIONS, cfg)
    assert "--null-draws 2000" in flags and "--control yes" in flags and "--norm l2" in flags
    cfg["dynamics"] = {**cfg["dynamics"], "null_draws": 4000, "bias_free_control": False}
    flags = config_flags(step_module("dynamics").OPTIONS, cfg)
    assert "--null-draws 4000" in flags and "--control no" in flags


def test_a_step_receives_only_the_claims_keys_it_reads():
    """The dynamics, quantization and plot steps receive the ``claims:`` keys the per-layer readings read: editing
    C9's or C5's threshold changes none of their flags (so no dynamics job reruns); editing C1's share does. A
    hand-given --criteria without those keys, or with a value its key refuses, is refused naming them."""
    from powerlens.analysis.verdict_tests import criteria_keys
    from powerlens.pipeline.config import schema_defaults
    from powerlens.pipeline.options import CRITERIA, check_flag, config_flags
    from powerlens.pipeline.steps import step_module

    cfg = {**schema_defaults(), "lock_file": ""}
    steps = ("dynamics", "quantization", "plot_dynamics")
    before = {s: config_flags(step_module(s).OPTIONS, cfg) for s in steps}
    claims_before = config_flags(step_module("claims").OPTIONS, cfg)
    cfg["claims"] = {**cfg["claims"], "C9_alignment": 0.5, "C5_null_quantile": 0.9}
    assert {s: config_flags(step_module(s).OPTIONS, cfg) for s in steps} == before
    assert config_flags(step_module("claims").OPTIONS, cfg) != claims_before  # the claims step reads them
    cfg["claims"]["C1_share_layers"] = 0.75
    assert all('"C1_share_layers": 0.75' in config_flags(step_module(s).OPTIONS, cfg) for s in steps)
    assert set(criteria_keys()) == {"C1_share_layers", "C6_weak_below", "C7_share_layers", "C10_ffn_negative_below"}
    with pytest.raises(PowerlensError, match="not the keys") as e:
        check_flag(CRITERIA, {"C1_share_layers": 0.5})
    assert "C7_share_layers" in str(e.value)
    with pytest.raises(PowerlensError, match="C1_share_layers"):
        check_flag(CRITERIA, {k: (5.0 if k == "C1_share_layers" else 0.5) for k in criteria_keys()})


def test_the_draw_cap_is_one_config_value_every_step_reads():
    """dynamics.null_draws_cap: its default is the schema's, the steps that decide or judge draws take it from
    there (no constant in the code), and a cap below the first draws is refused before any job."""
    from powerlens.pipeline.config import check_draws, schema_defaults
    from powerlens.pipeline.options import config_flags
    from powerlens.pipeline.steps import step_module

    cfg = {**schema_defaults(), "lock_file": ""}
    assert cfg["dynamics"]["null_draws_cap"] == 200_000
    cfg["dynamics"] = {**cfg["dynamics"], "null_draws_cap": 50_000}
    for s in ("dynamics", "quantization", "claims", "plot_dynamics"):
        assert "--null-draws-cap 50000" in config_flags(step_module(s).OPTIONS, cfg), s
    with pytest.raises(PowerlensError, match="null_draws_cap 3000 is below null_draws 4000"):
        check_draws({"dynamics": {"null_draws": 4000, "null_draws_cap": 3000}})
    import powerlens.analysis.decisions as dc

    assert not hasattr(dc, "R_CAP")


def test_architectures_live_in_their_adapters():
    """No branch on an architecture's name outside the adapters (`arch ==`, `arch in`)."""
    import re

    from ..conftest import REPO

    adapters = REPO / "src/powerlens/models/adapters"
    hits = [f"{p.name}:{i}" for p in sorted((REPO / "src/powerlens").rglob("*.py")) if adapters not in p.parents
            for i, ln in enumerate(p.read_text().splitlines(), 1) if re.search(r"\barch (==|in)\b", ln)]
    assert hits == []


def test_inspect_reads_a_safetensors_folder_without_torch_and_prints_the_same_table(minilm_path, tmp_path,
                                                                                    monkeypatch):
    """`powerlens inspect` of MiniLM's package folder reads W_V and W_O from its safetensors by the names the BERT
    adapter declares (a subprocess in which importing torch or transformers raises), and its table is the one
    the built model gives (the transformers path, forced here): the same rows, types and numbers."""
    import pandas as pd

    import powerlens.models.direct as direct
    from powerlens.cli import main

    blocked = tmp_path / "blocked"
    for name in ("torch", "transformers"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f'raise ImportError("{name} imported")\n')
    r = subprocess.run([sys.executable, "-m", "powerlens", "inspect", str(minilm_path), "--csv",
                        str(tmp_path / "direct.csv")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked), *filter(None, [
                           os.environ.get("PYTHONPATH")])])})
    assert r.returncode == 0 and "Lens(bert, d_model=384, layers=6" in r.stdout, r.stderr[-2000:]
    monkeypatch.setattr(direct, "direct_value_output", lambda *a: None)  # the model is built instead
    main(["inspect", str(minilm_path), "--csv", str(tmp_path / "built.csv")])
    a, b = pd.read_csv(tmp_path / "direct.csv"), pd.read_csv(tmp_path / "built.csv")
    assert list(a.columns) == list(b.columns) and len(a) == 6
    for c in a.columns:
        if a[c].dtype.kind == "f":
            assert np.allclose(a[c], b[c], rtol=1e-10, atol=1e-12), c
        else:
            assert a[c].tolist() == b[c].tolist(), c

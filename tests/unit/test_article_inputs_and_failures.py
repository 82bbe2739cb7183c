"""Issue #52, the claims step's inputs and the article and plot steps' failures: broken dynamics CSVs are
refused, a table edited after the claims step never reaches the article, a symlinked figures folder works, an
interrupted plot step replaces all of its outputs or none, the article's HTML and PDF are one pair, a failed
article leaves the previous one, and the article command names each bad input."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from powerlens.core.errors import PowerlensError
from powerlens.outputs.staging import staged
from powerlens.pipeline.steps.article import article, pair_stamps
from powerlens.pipeline.steps.claims import DYNAMICS_COLUMNS, read_dynamics, write_record

from ..conftest import REPO
from .test_article import run_dir  # noqa: F401  (the fixture: a run's article inputs)
from .test_step_names import rules  # noqa: F401  (the fixture: the workflow's rules, config/test.yaml)

METAS = {"m": {"model": "m"}, "n": {"model": "n"}}


def _dynamics(tmp_path, model="m", mode="model", rows=3, **change) -> str:
    """A dynamics CSV with the columns the claims read (values as the dynamics step writes them)."""
    base = {c: [0.1] * rows for c in DYNAMICS_COLUMNS}
    base.update(model=[model] * rows, mode=[mode] * rows, layer=list(range(rows)))
    base.update({c: ["no"] * rows for c in DYNAMICS_COLUMNS if c.endswith("_sig")})
    base.update({c: [False] * rows for c in DYNAMICS_COLUMNS if c.endswith("_saturated")})
    df = pd.DataFrame(base)
    for k, v in change.items():
        if v is None:
            df = df.drop(columns=[c for c in df.columns if c == k or c.startswith(k + "_")])
        else:
            df[k] = v
    p = tmp_path / f"{model}-{mode}.csv"
    df.to_csv(p, index=False)
    return str(p)


def test_good_dynamics_are_read_whole(tmp_path):
    paths = [_dynamics(tmp_path, m, mode) for m in METAS for mode in ("model", "attention-only")]
    assert len(read_dynamics(paths, METAS)) == 12


@pytest.mark.parametrize("case, words", [
    ("rho_nan", "column 'rho' is not a finite number in 1 of 3 rows"),
    ("no_rho", "lacks the column(s) rho, rho_p_holm, rho_sig, rho_saturated"),
    ("header_only", "has no rows"),
    ("three_columns", "lacks the column(s) gamma"),
    ("model_missing", "have no 'model' rows for n"),
    ("layers_twice", "depth 0 has more than one row (3 repeated rows of 6)"),
    ("rho_above_one", "column 'rho' holds 1.7 at row 2 (1 of 3 rows outside [0, 1]); it is a probability"),
    ("p_below_zero", "column 'gamma_p_holm' holds -0.2 at row 1 (1 of 3 rows outside [0, 1])"),
])
def test_claims_refuse_broken_dynamics(tmp_path, case, words):
    if case == "rho_nan":
        paths = [_dynamics(tmp_path, "m", rho=[0.7, float("nan"), 0.6]), _dynamics(tmp_path, "n")]
    elif case == "no_rho":
        paths = [_dynamics(tmp_path, "m", rho=None), _dynamics(tmp_path, "n")]
    elif case == "header_only":
        paths = [_dynamics(tmp_path, "m", rows=0), _dynamics(tmp_path, "n")]
    elif case == "three_columns":
        p = tmp_path / "m-model.csv"
        pd.DataFrame({"model": ["m"], "mode": ["model"], "layer": [0]}).to_csv(p, index=False)
        paths = [str(p), _dynamics(tmp_path, "n")]
    elif case == "layers_twice":  # #69: every row duplicated ended in a shape error inside the claims
        p = _dynamics(tmp_path, "m")
        df = pd.read_csv(p)
        pd.concat([df, df]).to_csv(p, index=False)
        paths = [p, _dynamics(tmp_path, "n")]
    elif case == "rho_above_one":  # #69: rho 1.7 with a p of -0.2 was judged as given
        paths = [_dynamics(tmp_path, "m", rho=[0.6, 1.7, 0.6]), _dynamics(tmp_path, "n")]
    elif case == "p_below_zero":
        paths = [_dynamics(tmp_path, "m", gamma_p_holm=[-0.2, 0.1, 0.1]), _dynamics(tmp_path, "n")]
    else:
        paths = [_dynamics(tmp_path, "m")]
    with pytest.raises(PowerlensError) as e:
        read_dynamics(paths, METAS)
    assert words in e.value.problem, e.value.problem
    assert "--forcerun dynamics" in e.value.fix


def test_claims_command_refuses_a_three_column_csv_without_a_traceback(tmp_path):
    """The probe of the issue: model/mode/layer only ended in IndexError; now exit 2 with problem and fix."""
    (tmp_path / "m.json").write_text(json.dumps({"model": "m", "arch": "bert", "random_weights": False}))
    pd.DataFrame({"model": ["m"], "mode": ["model"], "layer": [0]}).to_csv(tmp_path / "d.csv", index=False)
    for name in ("s.csv", "t.json", "st.csv"):  # the other inputs exist (never read: the dynamics CSV stops it)
        (tmp_path / name).write_text("")
    args = ["--meta", "m.json", "--spectra", "s.csv", "--dynamics", "d.csv", "--theory", "t.json", "--steering",
            "st.csv", "--robustness", "--quantized", "--criteria", "{}", "--alpha", "0.05", "--null-draws-cap",
            "200000", "--labels", "{}", "--table", "a", "--verdicts", "b", "--twins", "c", "--robust", "d",
            "--record", "r.json"]
    r = subprocess.run([sys.executable, "-m", "powerlens", "claims", *args], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "ERROR: d.csv (written by the dynamics step) lacks the column(s) gamma" in r.stderr
    assert "fix: rebuild it: run the same snakemake command with `--forcerun dynamics`" in r.stderr
    assert not list(tmp_path.glob("a.*")) and not (tmp_path / "r.json").exists()


def _record(run_dir):  # noqa: F811
    t = run_dir / "paper_tables/r"
    write_record(str(t / "claims_record.json"), [str(t / s) for s in ("table_claims", "table_claim_verdicts",
                                                                      "table_robustness", "table_claims_twins")])


def _article(run_dir, monkeypatch):  # noqa: F811
    monkeypatch.chdir(run_dir)
    return article(run="r", out_html="results/r/replication.html", out_pdf="results/r/replication.pdf",
                   index=[], command="snakemake --cores N")


def test_the_article_refuses_a_claims_table_edited_by_hand(run_dir, monkeypatch):  # noqa: F811
    _record(run_dir)
    first = _article(run_dir, monkeypatch)
    out = run_dir / "results/r"
    html, pdf = (out / "replication.html").read_bytes(), (out / "replication.pdf").read_bytes()
    claims = run_dir / "paper_tables/r/table_claims.csv"
    claims.write_text(claims.read_text().replace("not reproduced", "reproduced"))  # the trace check cannot see it
    with pytest.raises(PowerlensError) as e:
        _article(run_dir, monkeypatch)
    assert "table_claims.csv is not the file the claims step wrote" in e.value.problem
    assert "--forcerun claims" in e.value.fix
    assert (run_dir / "results/r/replication.html").read_bytes() == html  # the previous article stays
    assert (run_dir / "results/r/replication.pdf").read_bytes() == pdf and first["traced"] > 10
    (run_dir / "paper_tables/r/claims_record.json").unlink()
    with pytest.raises(PowerlensError, match="claims_record.json does not exist"):
        _article(run_dir, monkeypatch)


def test_a_symlinked_figures_folder_gives_the_article(run_dir, tmp_path_factory, monkeypatch):  # noqa: F811
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "figs"
    shutil.move(run_dir / "figures/r", elsewhere)
    (run_dir / "figures/r").symlink_to(elsewhere, target_is_directory=True)
    _record(run_dir)
    _article(run_dir, monkeypatch)
    html, pdf = run_dir / "results/r/replication.html", run_dir / "results/r/replication.pdf"
    assert pdf.read_bytes().startswith(b"%PDF") and "data:image/png;base64," in html.read_text()
    a, b = pair_stamps(html, pdf)
    assert a and a == b


def test_html_and_pdf_are_one_pair_and_a_failed_pdf_keeps_the_old_pair(run_dir, monkeypatch):  # noqa: F811
    import typst

    _record(run_dir)
    _article(run_dir, monkeypatch)
    html, pdf = run_dir / "results/r/replication.html", run_dir / "results/r/replication.pdf"
    old = (html.read_bytes(), pdf.read_bytes())
    (run_dir / "results/r/provenance.json").write_text(
        (run_dir / "results/r/provenance.json").read_text().replace("2026-12-03", "2026-12-04"))

    def killed(*a, **k):  # the process dies between the HTML and the PDF
        raise KeyboardInterrupt

    monkeypatch.setattr(typst, "compile", killed)
    with pytest.raises(KeyboardInterrupt):
        _article(run_dir, monkeypatch)
    assert (html.read_bytes(), pdf.read_bytes()) == old
    assert not list((run_dir / "results/r").glob(".powerlens-staging-*"))
    monkeypatch.undo()
    _article(run_dir, monkeypatch)
    a, b = pair_stamps(html, pdf)
    assert a and a == b and html.read_bytes() != old[0]


@pytest.mark.parametrize("case, words", [
    ("no run", "run 'r' has no claims table here"),
    ("empty csv", "table_claims.csv (written by the claims step) cannot be read: EmptyDataError"),
    ("header only", "table_claims.csv (written by the claims step) has no rows"),
    ("truncated provenance", "provenance.json (written by the provenance step) cannot be read: JSONDecodeError"),
    ("missing figure", "figures/r/fig_gamma.png, the figure of claim C1, does not exist"),
])
def test_the_article_names_each_bad_input(run_dir, monkeypatch, case, words):  # noqa: F811
    t = run_dir / "paper_tables/r"
    if case == "no run":
        shutil.rmtree(t)
    elif case == "empty csv":
        (t / "table_claims.csv").write_text("")
    elif case == "header only":
        (t / "table_claims.csv").write_text((t / "table_claims.csv").read_text().splitlines()[0] + "\n")
    elif case == "truncated provenance":
        p = run_dir / "results/r/provenance.json"
        p.write_text(p.read_text()[:40])
    else:
        (run_dir / "figures/r/fig_gamma.png").unlink()
    if t.is_dir():
        _record(run_dir)  # the record matches: only the named problem is left
    with pytest.raises(PowerlensError) as e:
        _article(run_dir, monkeypatch)
    assert words in e.value.problem, e.value.problem
    assert e.value.fix and not (run_dir / "results/r/replication.html").exists()


def test_the_article_command_for_a_missing_run_prints_problem_and_fix(tmp_path):
    r = subprocess.run([sys.executable, "-m", "powerlens", "article", "--run", "nope", "--out-html", "a.html",
                        "--out-pdf", "a.pdf", "--index", "[]", "--command", "x", "--paper-config",
                        str(Path(__file__).resolve().parents[2] / "config/config.yaml")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "ERROR: run 'nope' has no claims table here" in r.stderr and "  fix: run the pipeline for it" in r.stderr


def _old_outputs(folder: Path, names) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_text("previous " + n)
    return {n: (folder / n).read_text() for n in names}


def test_an_interrupted_plot_dynamics_replaces_no_output(tmp_path, monkeypatch):
    """SIGINT after some figures were drawn: every previous output is still there, unchanged (before: the
    drawn ones were already renamed into place and the command said "no output was replaced")."""
    import powerlens.outputs.figures as figures
    from powerlens.pipeline.steps.plot_dynamics import plot_dynamics

    stems = {k: str(tmp_path / k) for k in ("fig_gamma", "fig_rho", "fig_tilt", "fig_albert_consensus",
                                            "fig_albert_rotation", "table_alignment")}
    before = _old_outputs(tmp_path, [f"{k}.{e}" for k in stems for e in ("png", "pdf")])

    def half_way(*a, stems, **k):
        for s in list(stems.values())[:3]:
            Path(s + ".png").write_text("new")
            Path(s + ".pdf").write_text("new")
        raise KeyboardInterrupt

    monkeypatch.setattr(figures, "dynamics_figures", half_way)
    with pytest.raises(KeyboardInterrupt):
        plot_dynamics(csv=[], npz=[], meta=[], labels={}, alpha=0.05, null_draws_cap=200_000, criteria={}, dpi=50,
                      fig_gamma=stems["fig_gamma"], fig_rho=stems["fig_rho"], fig_tilt=stems["fig_tilt"],
                      fig_albert_consensus=stems["fig_albert_consensus"],
                      fig_albert_rotation=stems["fig_albert_rotation"], table_alignment=stems["table_alignment"])
    assert {n: (tmp_path / n).read_text() for n in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)  # no staging folder left


def test_an_interrupted_table_step_replaces_no_file_of_its_table(tmp_path, monkeypatch):
    """The same for a table: the interrupt lands after its .html and .csv were written."""
    import powerlens.outputs.tables as tables
    from powerlens.pipeline.steps.table_quantization import table_quantization

    before = _old_outputs(tmp_path, [f"table_quantization.{e}" for e in ("csv", "md", "tex", "html")])
    real = tables.write_text

    def dies_at_md(path, text):
        if str(path).endswith(".md"):
            raise KeyboardInterrupt
        real(path, text)

    monkeypatch.setattr(tables, "write_text", dies_at_md)
    with pytest.raises(KeyboardInterrupt):
        table_quantization(csv=[], labels={}, table=str(tmp_path / "table_quantization"))
    assert {n: (tmp_path / n).read_text() for n in before} == before


def test_an_interrupt_during_the_renames_finishes_them_and_says_so(tmp_path, monkeypatch, capsys):
    import powerlens.outputs.staging as staging

    _old_outputs(tmp_path, ["a.png", "b.png"])
    real = os.replace
    monkeypatch.setattr(staging, "_rename", lambda a, b: (os.kill(os.getpid(), signal.SIGINT), real(a, b)))
    with pytest.raises(SystemExit) as e:
        with staged({"a": tmp_path / "a", "b": tmp_path / "b"}) as s:
            for k in s:
                Path(s[k] + ".png").write_text("new")
    assert e.value.code == 130 and "every output of this step was replaced" in capsys.readouterr().err
    assert [(tmp_path / n).read_text() for n in ("a.png", "b.png")] == ["new", "new"]


def test_a_killed_writers_staging_folder_is_cleared_and_a_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    from powerlens.outputs.staging import _host

    litter = tmp_path / f".powerlens-staging-{dead.pid}-{_host()}-x"
    live = tmp_path / f".powerlens-staging-{os.getppid()}-{_host()}-y"
    elsewhere = tmp_path / f".powerlens-staging-{dead.pid}-othernode-z"  # another node's writer: not judged here
    for f in (litter, live, elsewhere):
        f.mkdir()
    with staged({"a": tmp_path / "a"}) as s:
        Path(s["a"] + ".csv").write_text("x")
    assert not litter.exists() and live.exists() and elsewhere.exists() and (tmp_path / "a.csv").read_text() == "x"


def test_the_workflow_keeps_the_previous_article_and_records_the_claims_tables(rules):  # noqa: F811
    """Snakemake removes a job's outputs before it runs and after it fails (jobs.py: remove_existing_output,
    cleanup) unless they are flagged update(): then it neither deletes them first nor leaves them deleted (it
    restores its copy after a failure). The article's two outputs carry the flag; the claims rule writes its
    record and the article reads it. Read from Snakemake's own objects (the Snakefile loaded, nothing run)."""
    from snakemake.io import is_flagged

    art, claims = rules["article"], rules["claims"]
    assert all(is_flagged(f, "update") for f in art.output) and len(art.output) == 2
    assert claims.output._names["record"] and "claims_record.json" in str(art.input[art.input._names[
        "claims_record"][0]])


@pytest.mark.parametrize("text,says", [("root:x:0:0:root:/root:/bin/bash\n", "holds no `models:` mapping"),
                                       ("a: [1\n", "cannot be read as YAML"), ("models: [1, 2]\n", "holds no"),
                                       ("models:\n  m: 3\n", "holds no")])
def test_a_paper_config_that_is_not_one_is_named(tmp_path, text, says):
    """#69: `article --paper-config /etc/passwd` ended in an AttributeError traceback."""
    from powerlens.outputs.article_front import paper_models

    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(PowerlensError, match=says) as e:
        paper_models(p)
    assert "config/config.yaml" in e.value.fix
    assert len(paper_models(REPO / "config" / "config.yaml")) == 13  # the guard: the paper's 13 checkpoints


def test_the_article_refuses_a_models_table_edited_by_hand(run_dir, monkeypatch):  # noqa: F811
    """#69: table_models.csv edited so a twin reads "trained weights" reached the article's summary."""
    from powerlens.outputs.records import write_record as record

    _record(run_dir)
    t = run_dir / "paper_tables/r"
    pd.DataFrame({"model": ["m"], "key": ["m"], "hub id / origin": ["twin of tiny-bert"], "revision": ["-"],
                  "params (M)": [0.1], "d_model": [32], "layers": [2], "heads": [4], "shared weights": ["no"],
                  "source": ["random"], "weights": ["random weights"]}).to_csv(t / "table_models.csv", index=False)
    with pytest.raises(PowerlensError, match="table_models_record.json does not exist"):
        _article(run_dir, monkeypatch)
    record(t / "table_models_record.json", [str(t / "table_models")], "table_models")
    _article(run_dir, monkeypatch)  # the guard: the recorded table passes
    (t / "table_models.csv").write_text((t / "table_models.csv").read_text().replace("random", "trained"))
    with pytest.raises(PowerlensError, match="table_models.csv is not the file the table_models step wrote") as e:
        _article(run_dir, monkeypatch)
    assert "--forcerun table_models" in e.value.fix

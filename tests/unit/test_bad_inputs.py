"""The bad-input catalogue at the command line: each stops before heavy work, exits 2 and names the fix."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from powerlens.corpus import tokenize
from powerlens.sources import byte_tokenizer

from ..conftest import REPO

SCRIPTS = REPO / "scripts"


def cli(script, *args):
    return subprocess.run([sys.executable, str(SCRIPTS / script), *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_fetch_missing_local_path_exits_2_with_fix(tmp_path):
    r = cli("fetch_model.py", "--name", "mine", "--entry",
            json.dumps({"arch": "bert", "source": "local", "path": str(tmp_path / "nope")}), "--out", tmp_path / "m.json")
    assert r.returncode == 2
    assert "ERROR: model 'mine' (source: local): directory" in r.stderr and "fix:" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "m.json").exists()


def test_fetch_unknown_twin_exits_2(tmp_path):
    r = cli("fetch_model.py", "--name", "x", "--entry", json.dumps({"arch": "bert", "source": "random",
                                                                  "twin_of": "bert-huge"}), "--out", tmp_path / "m.json")
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
    from powerlens.errors import PowerlensError
    from powerlens.sources import load_model
    from powerlens.steps import fetch_model

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
    code = ("from powerlens.steps import fetch_model; "
            f"fetch_model('evil', {{'arch': 'bert', 'source': 'local', 'path': {str(src)!r}}}, "
            f"{str(tmp_path / 'm.json')!r})")
    r = subprocess.run([sys.executable, "-c", code], input="y\ny\ny\n", capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "ships its own model code" in r.stderr, r.stderr[-1500:]
    assert not marker.exists()
    from powerlens.errors import PowerlensError as Err
    from powerlens.sources import load_model

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
    from powerlens.errors import PowerlensError
    from powerlens.steps import check_extraction, extract, fetch_model

    rec = fetch_model("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert"}, tmp_path / "m.json")
    extract(tmp_path / "m.json", tmp_path / "w.safetensors", tmp_path / "w.json")
    with pytest.raises(PowerlensError, match="below that dtype's round-off") as e:
        check_extraction(tmp_path / "m.json", tmp_path / "w.safetensors", tmp_path / "w.json",
                         tmp_path / "c.json", tol32=1e-15)
    assert "tol_float32" in e.value.fix and "report" not in e.value.fix
    assert rec["source"] == "random"


def test_unknown_model_type_and_bad_lock_file_get_the_projects_message(tmp_path):
    from powerlens.errors import PowerlensError
    from powerlens.sources import load_model
    from powerlens.steps import fetch_model

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

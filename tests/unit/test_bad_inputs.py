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
    for p in list((REPO / "src").rglob("*.py")) + list(SCRIPTS.glob("*.py")):
        assert "trust_remote_code" not in p.read_text(), p
    for p in (REPO / "src").rglob("*.py"):
        text = p.read_text()
        assert "torch.load(" not in text and "pickle.load" not in text, p

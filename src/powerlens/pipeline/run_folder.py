"""A run folder remembers the config that made it, and a different config refuses to write there.

Every output of a run lies under its ``run:`` name (``results/<run>/``, ``paper_tables/<run>/``,
``figures/<run>/``): a second config with the same name replaced the first one's tables, figures and article
without a word and left its model folders orphaned. The first real run writes :data:`RECORD` into
``results/<run>/`` (the config files it was given); a later real run whose config files are others is refused
before any job starts (the workflow's ``onstart``). Editing the same config file is a rerun, not another
config: the files are compared by path, never by content. What names the run is the config file that sets its
``run:`` (the last one given that does); files laid over it without a ``run:`` key add to the same run (``make
offline`` gives ``config/offline.yaml`` and ``config/offline-decoders.yaml``; the README's audit example gives the
first alone: the same run folder). A dry run (``snakemake -n``) or a report only reads
the record (and warns): it writes nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.core.io import write_json

#: The record in ``results/<run>/``: which config files made the run (a dot first: a model's name starts with a
#: letter or digit, so no model folder can take its place).
RECORD = ".powerlens-run.json"

__all__ = ["RECORD", "check_not_run_output", "check_run_folder", "claim_run_folder", "config_keys"]


def _sets_run(path: Path) -> bool:
    """Does this config file set ``run:`` at its top level? (Unreadable: no; the config check names it.)"""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return False
    return isinstance(doc, dict) and "run" in doc


def config_keys(configfiles, workdir: str | os.PathLike = ".") -> list[str]:
    """The config file that names the run, as the record compares it: the last file given that sets ``run:``
    (every file given where none does), resolved, and relative to the working directory where it lies inside
    it (a checkout moved or cloned elsewhere still recognises its own run)."""
    base = Path(workdir).resolve()
    owners = [f for f in configfiles if _sets_run(base / f)]
    out = []
    for f in owners[-1:] or configfiles:
        p = (base / f).resolve()
        out.append(p.relative_to(base).as_posix() if p.is_relative_to(base) else p.as_posix())
    return out


def record_path(run: str, workdir: str | os.PathLike = ".") -> Path:
    return Path(workdir) / "results" / run / RECORD


def _recorded(run: str, workdir) -> dict | None:
    """The folder's record, or None where the run folder has none yet (a new run, or one from before)."""
    path = record_path(run, workdir)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        keys = doc["config_keys"]
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            raise TypeError("config_keys is not a list of paths")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PowerlensError(
            f"{path} (which config made run folder results/{run}/) cannot be read: {e}",
            f"delete {path} if this config made results/{run}/ (the next run records it again), or give this "
            "config another `run:` name") from None
    return doc


def check_run_folder(run: str, configfiles, workdir: str | os.PathLike = ".") -> None:
    """Refuse (PowerlensError) when ``results/<run>/`` was made by other config files than these."""
    doc = _recorded(run, workdir)
    if doc is None or doc["config_keys"] == config_keys(configfiles, workdir):
        return
    made_by = ", ".join(doc.get("configfiles") or doc["config_keys"]) or "the default config (no --configfile)"
    given = ", ".join(map(str, configfiles)) or "the default config (no --configfile)"
    raise PowerlensError(
        f"run folder results/{run}/ was made by another config ({made_by}); this run's config ({given}) has "
        f"the same `run: {run}` and would overwrite its tables, figures and article",
        f"give this config another `run:` name, or delete results/{run}/, paper_tables/{run}/ and "
        f"figures/{run}/ if the earlier run is no longer wanted")


def claim_run_folder(run: str, configfiles, workdir: str | os.PathLike = ".") -> bool:
    """At a real run's start: record which config files make ``results/<run>/`` (once; True if written)."""
    check_run_folder(run, configfiles, workdir)
    path = record_path(run, workdir)
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {
        "run": run, "config_keys": config_keys(configfiles, workdir),
        "configfiles": [Path(workdir, f).resolve().as_posix() for f in configfiles],
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    })
    return True


#: The folders under which a run keeps its outputs, each as ``<folder>/<run>/...``: its results, tables and
#: figures, and its jobs' logs and benchmark files (the speed step reads those: one overwritten by `inspect --csv`
#: ended `--forcerun speed` in a KeyError).
OUTPUT_ROOTS = ("results", "paper_tables", "figures", "logs", "benchmarks")


def check_not_run_output(path: str | os.PathLike, flag: str = "--csv") -> None:
    """Refuse (PowerlensError) a file a command would write inside a run's output folders (``results/<run>/``,
    ``paper_tables/<run>/``, ``figures/<run>/``), where the pipeline's own outputs live (followed through
    symlinks: a linked folder pointing into a run is that run's folder). ``powerlens inspect --csv`` through a
    link overwrote another run's tracked spectra.csv, and into paper_tables/ another run's table."""
    target = Path(path).expanduser().resolve()
    for folder in target.parents:
        if folder.parent.name in OUTPUT_ROOTS and folder.parent != folder:
            shown = str(path) if str(target) == str(path) else f"{path} (that is {target})"
            raise PowerlensError(
                f"{flag} {shown} is inside run folder {folder}, where the pipeline keeps its outputs: writing "
                "there would replace a run's file",
                f"write {flag} outside any results/, paper_tables/, figures/, logs/ or benchmarks/ <run>/ folder (e.g. "
                f"{flag} {target.name} in the current directory)")

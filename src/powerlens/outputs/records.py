"""What a table step wrote, by content, and the check every reader of those tables makes first.

A step that writes tables a reader sees (claims: the verdicts and their evidence; table_models: which weights
each model has) also writes ``paper_tables/<run>/<step>_record.json``: the sha256 of each of its table files. The
article and the Snakemake report (:func:`check_records`, before either is built) refuse a table whose bytes are
not the recorded ones: an edit by hand or by another program (a twin relabelled "trained weights", a verdict
changed by sed in the HTML the report embeds) would otherwise reach the reader, since the article's read-back
compares the article with those same files and Snakemake's triggers see dates, not bytes.
"""

from __future__ import annotations

from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_generated_json, sha256_file, write_json

#: The record a step writes beside its tables: ``<step>_record.json`` (claims_record.json, table_models_record.json)
SUFFIX = "_record.json"


def rerun_fix(step: str) -> str:
    """The way out for a table changed after its step: rebuild it (never edit it)."""
    return (f"rebuild them: run the same snakemake command with `--forcerun {step}` added (change what a table "
            "says through the config, never by editing the table)")


def write_record(path: str | Path, stems: list[str], step: str) -> dict:
    """The record of what ``step`` wrote: the sha256 of each file of its tables' ``stems`` (every suffix), by
    file name."""
    files = sorted(f for s in stems for f in Path(s).parent.glob(Path(s).name + ".*") if f.is_file())
    doc = {"step": step, "sha256": {f.name: sha256_file(f) for f in files}}
    write_json(path, doc)
    return doc


def check_record(path: Path, step: str, shown: str | None = None) -> None:
    """Refuse tables that are not the ones ``step`` wrote: every file its record at ``path`` names must exist
    beside it with the recorded sha256 (``shown``: the record's path as the message names it)."""
    shown = shown or str(path)
    if not path.is_file():
        raise PowerlensError(f"{shown} does not exist: nothing says the tables of the {step} step are the ones it "
                             "wrote", rerun_fix(step))
    doc = read_generated_json(path, step)
    sums = doc.get("sha256") if isinstance(doc, dict) else None
    if not isinstance(sums, dict) or not sums or doc.get("step", step) != step:
        raise PowerlensError(f"{shown} names no table (it is not the {step} step's record)", rerun_fix(step))
    folder = Path(shown).parent
    for name, want in sorted(sums.items()):
        f = path.parent / Path(name).name
        if not f.is_file():
            raise PowerlensError(f"{folder / Path(name).name}, written by the {step} step, is missing",
                                 rerun_fix(step))
        if sha256_file(f) != want:
            raise PowerlensError(f"{folder / Path(name).name} is not the file the {step} step wrote (its sha256 "
                                 f"differs from {shown}): it was changed after the step, by hand or by another "
                                 "program", rerun_fix(step))


def check_records(tables: Path, shown: str | None = None) -> int:
    """Every step record in a run's tables folder checked (:func:`check_record`); returns how many."""
    found = sorted(tables.glob("*" + SUFFIX))
    for rec in found:
        step = rec.name[: -len(SUFFIX)]
        check_record(rec, step, f"{shown}/{rec.name}" if shown else None)
    return len(found)

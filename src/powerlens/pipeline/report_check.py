"""A report is built only from outputs that are up to date for the current config and code.

``snakemake --report`` renders whatever files it finds: after a config change (kappas, a label, the
description) it would show the new config beside tables computed with the old one, a document that misstates
what produced it. Before the report is built, the workflow asks Snakemake itself which outputs it would
rebuild (``--summary``, the same arguments less the report's: its rerun triggers, params and code included)
and refuses while any would be, naming the first stale file, why, and the command that brings it up to date.
An edit of the package or of the prompt corpus shows there too: every rule carries its step's code hash
(:mod:`powerlens.pipeline.code_hash`) and the rules that read the corpus its sha256 as params, so Snakemake
reports their outputs as "params changed".
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from powerlens.core.errors import PowerlensError

#: Options the freshness check drops and the number of values each takes ("+": one or more): the report's
#: own, and where the workflow and its config are (given again, resolved: the check runs in the working
#: directory Snakemake has already moved to). ``--report-after-run`` runs the jobs first, so the report that
#: follows is up to date by construction (no check).
DROPPED = {"--report": 1, "--report-stylesheet": 1, "--report-html-path": 1, "--report-html-stylesheet": 1,
           "--directory": 1, "-d": 1, "--snakefile": 1, "-s": 1, "--configfile": "+", "--configfiles": "+",
           # forcing options: a report runs no job, and with them every output would count as stale for ever
           "--forceall": 0, "-F": 0, "--force": 0, "-f": 0, "--forcerun": "+", "-R": "+"}
FORCE = ("--forceall", "-F", "--force", "-f", "--forcerun", "-R")
CORES = ("--cores", "-c", "--jobs", "-j", "--profile", "--workflow-profile")


def runnable(args: list[str]) -> str:
    """A Snakemake command line as a user can run it: ``--cores all`` added where it sets no core count."""
    has = any(a.split("=", 1)[0] in CORES or (a[:2] in ("-c", "-j") and a[2:].isdigit()) for a in args)
    return shlex.join(["snakemake", *args, *([] if has else ["--cores", "all"])])


def is_report_request(argv: list[str]) -> bool:
    """Does this Snakemake command line build a report from existing outputs?"""
    return any(a == "--report" or a.startswith("--report=") for a in argv) and "--report-after-run" not in argv


REPORT_ONLY = ("--report", "--report-stylesheet", "--report-html-path", "--report-html-stylesheet")


def run_arguments(argv: list[str], drop=tuple(DROPPED)) -> list[str]:
    """The command line less the options ``drop`` (of :data:`DROPPED`; ``--report`` takes an optional file
    name)."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if name not in drop:
            out.append(a)
            i += 1
            continue
        i += 1
        if "=" in a:
            continue
        n = 0
        while i < len(argv) and not argv[i].startswith("-") and (DROPPED[name] == "+" or n < DROPPED[name]):
            i, n = i + 1, n + 1
    return out


def stale_outputs(summary: str) -> list[tuple[str, str, str]]:
    """(file, rule, status) of every output Snakemake's ``--summary`` plans to update."""
    rows = [ln.split("\t") for ln in summary.splitlines()]
    if not rows or rows[0][:1] != ["output_file"]:
        return []
    head = rows[0]
    col = {k: head.index(k) for k in ("output_file", "rule", "status", "plan") if k in head}
    return [(r[col["output_file"]], r[col["rule"]], r[col["status"]]) for r in rows[1:]
            if len(r) == len(head) and r[col["plan"]] != "no update"]


def check_report_fresh(argv: list[str], snakefile: str, configfiles: list[str]) -> None:
    """Refuse the report while Snakemake would rebuild any output of this run (raises PowerlensError). Runs
    in the current directory (the run's working directory)."""
    args = run_arguments(argv)
    where = ["--snakefile", str(snakefile)] + (["--configfile", *map(str, configfiles)] if configfiles else [])
    r = subprocess.run([sys.executable, "-m", "snakemake", *where, *args, "--summary", "--nolock"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise PowerlensError(
            "the report's freshness check (snakemake --summary with this command line) failed: "
            + (r.stderr.strip().splitlines() or ["no message"])[-1][:300],
            "run the workflow without --report first and fix what it reports")
    stale = stale_outputs(r.stdout)
    if stale:  # the first output stale in itself (its params, code or inputs changed), not only downstream of one
        path, rule, status = next((s for s in stale if s[2] != "ok"), stale[0])
        shown = runnable(run_arguments(argv, REPORT_ONLY + FORCE))
        raise PowerlensError(
            f"the report would show outputs that are out of date for the current config and code: {path} "
            f"(rule {rule}: {status}; {len(stale)} output(s) in all)",
            f"bring them up to date first (the same command without --report: `{shown}`), then build "
            "the report again")

"""A cluster executor is refused before any job starts where SLURM cannot be used from this machine.

With the SLURM profile on a machine without SLURM, Snakemake "submitted" the jobs, retried its status queries
for about 40 s and then removed the outputs of the jobs it had started: the previous article was deleted.
The workflow's ``onstart`` (a real run, after the plan and before the first job) asks this module whether the
executor's commands are on PATH and answer (SLURM's client tools installed without a cluster to talk to fail
the same way as missing ones), and stops with the fix when they do not.
"""

from __future__ import annotations

import shutil
import subprocess

from powerlens.core.errors import PowerlensError

__all__ = ["check_executor_tools", "executor_tools"]

#: A query of each status command that succeeds on a working SLURM (no job needed) and fails without one.
PROBES = {"squeue": ["squeue", "--me", "--noheader", "--format=%i"],
          "sacct": ["sacct", "-X", "--noheader", "--format=JobID", "--starttime=now"]}

FIX = ("run on this machine with `--profile workflow/profiles/default` (or without --profile), or run from a "
       "SLURM submit host (install SLURM, or load its module, so that sbatch and sacct/squeue work)")


def executor_tools(executor: str | None, status_command: str | None = None) -> list[str]:
    """The commands an executor runs on the submit host: SLURM submits with ``sbatch`` and asks for the
    jobs' state with its status command (``sacct`` unless the profile says ``squeue``); local: none."""
    if executor != "slurm":
        return []
    return ["sbatch", status_command or "sacct"]


def _probe(tool: str, run) -> str | None:
    """None if the status command answers, else why not (its last line of error output)."""
    try:
        r = run(PROBES[tool], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if r.returncode == 0:
        return None
    return ((r.stderr or r.stdout or "").strip().splitlines() or [f"exit status {r.returncode}"])[-1][:200]


def check_executor_tools(executor: str | None, status_command: str | None = None, which=shutil.which,
                         run=subprocess.run) -> None:
    """Refuse (PowerlensError) when a command the executor needs is not on PATH or its status command finds
    no cluster."""
    tools = executor_tools(executor, status_command)
    missing = [t for t in tools if which(t) is None]
    if missing:
        raise PowerlensError(
            f"the {executor} executor was asked for (e.g. by --profile workflow/profiles/slurm), but "
            f"{' and '.join(f'`{t}`' for t in missing)} {'is' if len(missing) == 1 else 'are'} not on PATH: this "
            "machine cannot submit or follow SLURM jobs (no job was started, no output touched)", FIX)
    why = _probe(tools[-1], run) if tools and tools[-1] in PROBES else None
    if why is not None:
        raise PowerlensError(
            f"the {executor} executor was asked for (e.g. by --profile workflow/profiles/slurm), but `{tools[-1]}` "
            f"finds no SLURM cluster from this machine ({why}): jobs could be neither submitted nor followed (no "
            "job was started, no output touched)", FIX)

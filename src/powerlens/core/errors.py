"""One exception type for every failure a user can fix.

A :class:`PowerlensError` carries *what* went wrong and *how to fix it*; the command-line wrappers print
both and exit with status 2, without a traceback, so the message is the first thing a user reads in the log.
"""

from __future__ import annotations

from pathlib import Path


class PowerlensError(Exception):
    """A user-facing error: ``problem`` names the bad input, ``fix`` says what to do."""

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(problem if not fix else f"{problem}\n  fix: {fix}")


def user_errors_in_logs(log_dir, since: float) -> list[tuple[str, str | None]]:
    """The problem + fix pairs the step CLIs printed (``ERROR: ...`` then ``  fix: ...``) in logs under
    ``log_dir`` written since ``since`` (a time stamp), each once: the summary a failed run ends with."""
    found: list[tuple[str, str | None]] = []
    root = Path(log_dir)
    if not root.is_dir():
        return found
    for p in sorted(root.rglob("*.log")):
        try:
            if p.stat().st_mtime < since:
                continue
            lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for i, ln in enumerate(lines):
            if ln.startswith("ERROR: "):
                fix = lines[i + 1].strip()[len("fix: "):] if i + 1 < len(lines) and \
                    lines[i + 1].strip().startswith("fix: ") else None
                if (ln[7:], fix) not in found:
                    found.append((ln[7:], fix))
    return found

"""One exception type for every failure a user can fix.

A :class:`PowerlensError` carries *what* went wrong and *how to fix it*; the command-line wrappers print
both and exit with status 2, without a traceback, so the message is the first thing a user reads in the log.
"""

from __future__ import annotations


class PowerlensError(Exception):
    """A user-facing error: ``problem`` names the bad input, ``fix`` says what to do."""

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(problem if not fix else f"{problem}\n  fix: {fix}")

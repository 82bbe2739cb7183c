"""Shared plumbing for the step CLIs: PowerlensError -> clear message and exit status 2."""

from __future__ import annotations

import sys
import traceback


def run(main) -> None:
    from powerlens.errors import PowerlensError

    try:
        main()
    except PowerlensError as e:
        print(f"ERROR: {e.problem}", file=sys.stderr)
        if e.fix:
            print(f"  fix: {e.fix}", file=sys.stderr)
        sys.exit(2)
    except Exception:
        traceback.print_exc()
        sys.exit(1)

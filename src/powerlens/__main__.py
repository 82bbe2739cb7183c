"""``python -m powerlens <command>``: the same command as ``powerlens`` (what the Snakemake rules run).

``POWERLENS_TRACE_MODULES=<folder>``: at exit, the command writes the ``powerlens`` modules it loaded, one a line,
to ``<folder>/<command>.<pid>.txt`` (a check that a step's code hash covers every module it runs, however loaded:
:mod:`powerlens.pipeline.code_hash`; the workflow test reads them)."""

import atexit
import os
import sys


def _trace_modules(folder: str) -> None:
    from pathlib import Path

    name = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].isidentifier() else "main"
    loaded = sorted(m for m in list(sys.modules) if m == "powerlens" or m.startswith("powerlens."))
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"{name}.{os.getpid()}.txt").write_text("\n".join(loaded) + "\n", encoding="utf-8")


if os.environ.get("POWERLENS_TRACE_MODULES"):
    atexit.register(_trace_modules, os.environ["POWERLENS_TRACE_MODULES"])

from powerlens.cli import main  # noqa: E402 (the trace is registered before anything is loaded)

main()

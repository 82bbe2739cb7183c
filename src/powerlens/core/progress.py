"""Progress of long steps: a tqdm bar on a terminal, plain lines in logs.

In a log file (stderr not a terminal, as under Snakemake) a bar's carriage returns make one unreadable
line; :func:`progress` then prints ``<what>: i/n (p%), elapsed, about r left`` as a plain line at most every
``every`` seconds (and at the end). :func:`quiet_third_party_bars` switches off the bars of transformers and
huggingface_hub in that case.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def _tty() -> bool:
    return sys.stderr.isatty()


def quiet_third_party_bars() -> None:
    """No carriage-return bars from transformers / huggingface_hub when stderr is not a terminal."""
    if _tty():
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    if "transformers" not in sys.modules:  # it reads HF_HUB_DISABLE_PROGRESS_BARS when imported: no import here
        return  # (importing it costs about a second, which `powerlens inspect` of a safetensors folder never pays)
    try:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    except Exception:
        pass


def progress(items: Iterable[T], what: str, total: int | None = None, every: float = 5.0,
             enabled: bool = True) -> Iterator[T]:
    """Iterate ``items``, reporting progress (``what``: e.g. "steering, target 1/2, kappa 16 (batches)")."""
    if not enabled:
        yield from items
        return
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    if _tty():
        from tqdm import tqdm

        yield from tqdm(items, desc=what, total=total, mininterval=1)
        return
    t0 = last = time.monotonic()
    i = 0
    for i, x in enumerate(items, 1):
        yield x
        now = time.monotonic()
        if now - last >= every or (total is not None and i == total):
            last = now
            el = now - t0
            if total:
                left = el / i * (total - i)
                print(f"{what}: {i}/{total} ({100 * i / total:.0f}%), {el:.0f} s elapsed, about {left:.0f} s left",
                      file=sys.stderr, flush=True)
            else:
                print(f"{what}: {i} done, {el:.0f} s elapsed", file=sys.stderr, flush=True)

"""Scratch buffers of a step's hot loop: blocks reused from one iteration to the next instead of fresh memory.

Every block above the allocator's mmap threshold (:func:`powerlens.core.runtime.fixed_mmap_threshold`, kept: it
holds the resident memory down) is otherwise mapped fresh and zero-filled by the kernel page by page on its
first write, then unmapped. Measured on the 2-core machine: SmolLM2's attention-only dynamics spent 22 of its
47 s in the kernel (sys time), most of it faulting in the Monte Carlo null's (tokens, draws) blocks; Gemma 3's
steering 55 of its 105 s, faulting in its (tokens, 262144) logits. The values are the same bits: the same
operations write into kept memory instead of new memory.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import torch


class Scratch:
    """Scratch buffers reused across a hot loop's iterations (:func:`reusing_scratch`), two kinds:

    * by name (:meth:`torch`, :meth:`numpy`): grown (never shrunk) to the largest request and handed out as a
      view of its first elements, for a value read before the next request of the same name and never returned
      to a caller who keeps it (the null's (tokens, R r) product, steering's logits);
    * a pool of whole blocks (:meth:`take`, :meth:`give`): the caller owns a block until it gives it back (the
      null's alignments, cached across depths within a chunk of draws)."""

    def __init__(self) -> None:
        self._bufs: dict[tuple[str, object], object] = {}
        self._free: dict[tuple[tuple[int, ...], torch.dtype], list[torch.Tensor]] = {}

    def take(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """A block of ``shape`` that the caller owns until it :meth:`give` s it back: one given back earlier if
        there is one (its old values, to be overwritten), else a new one."""
        free = self._free.get((tuple(shape), dtype))
        return free.pop() if free else torch.empty(shape, dtype=dtype)

    def give(self, block: torch.Tensor) -> None:
        """Hand a block from :meth:`take` back (its owner no longer reads it); blocks not from :meth:`take` are
        accepted too (a view is not: its base may still be read)."""
        if block._base is None and block.is_contiguous():
            self._free.setdefault((tuple(block.shape), block.dtype), []).append(block)

    def torch(self, name: str, shape: tuple[int, ...], dtype: torch.dtype = torch.float64) -> torch.Tensor:
        numel = int(np.prod(shape))
        buf = self._bufs.get((name, dtype))
        if buf is None or buf.numel() < numel:
            buf = self._bufs[(name, dtype)] = torch.empty(numel, dtype=dtype)
        return buf[:numel].view(shape)

    def numpy(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        numel = int(np.prod(shape))
        buf = self._bufs.get((name, "numpy"))
        if buf is None or buf.size < numel:
            buf = self._bufs[(name, "numpy")] = np.empty(numel)
        return buf[:numel].reshape(shape)


#: The open scratch of :func:`reusing_scratch` (None: every block is allocated afresh).
_SCRATCH: ContextVar["Scratch | None"] = ContextVar("powerlens_scratch", default=None)


@contextmanager
def reusing_scratch():
    """Reuse scratch buffers inside the block (:class:`Scratch`), freed on leaving the outermost one: the dynamics
    step opens it around its passes and Monte Carlo tests, the steering experiment around all its passes (and
    each pass around its own, which inside the experiment's is the experiment's: a new scratch per pass maps
    and faults its (tokens, 262144) blocks afresh, measured 19.8 million page faults in Gemma 3's steering).
    Measured on SmolLM2's (2540, 576) states: one chunk's (tokens, 8000) product 165 ms into a fresh block, 123 ms
    into a kept one."""
    if _SCRATCH.get() is not None:  # inside an open scratch: that one, kept until its own block ends
        yield _SCRATCH.get()
        return
    token = _SCRATCH.set(Scratch())
    try:
        yield _SCRATCH.get()
    finally:
        _SCRATCH.reset(token)


def scratch() -> Scratch | None:
    """The open :class:`Scratch`, or None outside :func:`reusing_scratch`."""
    return _SCRATCH.get()

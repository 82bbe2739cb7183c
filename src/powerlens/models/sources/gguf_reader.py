"""Reading a GGUF file fast and once: the header parsed through a plain view of the memory map
(:func:`plain_reader`), and one parse per file however often transformers' GGUF loader asks
(:func:`one_reader`). The same fields, tensors and dequantized weights as gguf's own reader."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def one_reader():
    """Inside the block, one GGUF file is parsed once, however often transformers asks for it.

    transformers' GGUF loader parses the whole file again for each thing it reads from it (the config for
    AutoConfig, again for the model's config, the tensors, the tokenizer twice), and converts every field again
    each time: with the header check, five parses of one header, each reading the vocabulary token by token
    (Gemma 3's 262144 tokens: over 10 s a parse). Here every ``gguf.GGUFReader(path)`` of one file returns the
    same reader (read-only: a memory map and the fields parsed from it), and the loader's header-only answer
    (``load_gguf_checkpoint(path)`` without tensors) is converted once and handed out as a deep copy (its
    callers pop keys from it). The values read, hence the dequantized weights, are the same.

    The reader is :func:`plain_reader`'s: the same parse over a plain array view of the memory map."""
    import copy

    import gguf
    from transformers import modeling_gguf_pytorch_utils as loader

    made, cls, load = {}, plain_reader(gguf.GGUFReader), loader.load_gguf_checkpoint
    original = gguf.GGUFReader

    def reader(path, *args, **kwargs):
        key = ("reader", os.path.realpath(path), args, tuple(sorted(kwargs.items())))
        if key not in made:
            made[key] = cls(path, *args, **kwargs)
        return made[key]

    def header(path, return_tensors=False, **kwargs):
        if return_tensors or kwargs:
            return load(path, return_tensors=return_tensors, **kwargs)
        key = ("header", os.path.realpath(path))
        if key not in made:
            made[key] = load(path, return_tensors=False)
        return copy.deepcopy(made[key])

    gguf.GGUFReader, loader.load_gguf_checkpoint = reader, header
    try:
        yield
    finally:
        gguf.GGUFReader, loader.load_gguf_checkpoint = original, load


def plain_reader(base):
    """``base`` (gguf's GGUFReader) reading through a plain ndarray view of its memory map.

    The reader slices its ``np.memmap`` once for every value of the header, and each slice of a memmap runs
    numpy's Python-level ``memmap.__getitem__`` and ``__array_finalize__``: Gemma 3's 262144-token vocabulary
    took 7.9 s to parse here, 2.4 s through a plain view. The view holds the same mapped bytes (the map stays
    open as its base), so every field and tensor is the same (``tests/unit/test_gguf_source.py`` compares them)."""
    import numpy as np

    class PlainReader(base):
        @property
        def data(self):
            return self._plain

        @data.setter
        def data(self, mapped):  # the base class's __init__ assigns its np.memmap here
            self._plain = mapped.view(np.ndarray)

    PlainReader.__name__ = PlainReader.__qualname__ = f"Plain{base.__name__}"
    return PlainReader

"""Do the weights cover the model its config describes, and nothing more? Read from the safetensors headers
alone (no torch) where possible: the tensors and their shapes, the layer count held vs the config's, tensors
the loaded model has no place for, token ids beyond the embedding, an untied LM head missing at fetch."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

from powerlens.core.errors import PowerlensError

#: transformers' own file names (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME): what from_pretrained loads
SINGLE, INDEX = "model.safetensors", "model.safetensors.index.json"


def weight_files(path: Path) -> list[Path]:
    """The files of a model folder that are its weights, by the rule transformers' ``from_pretrained`` loads
    them: ``model.safetensors``, else the shards ``model.safetensors.index.json`` names (sorted; a named shard
    may be missing: :func:`powerlens.models.sources.files.check_shards` says which), else none. Every reader
    (the load, inspect's direct read, the fetch's checks and its sha256 record) takes this list, so a stray
    ``*.safetensors`` beside them (a backup, another variant) is read by none of them."""
    if (path / SINGLE).is_file():
        return [path / SINGLE]
    if (path / INDEX).is_file():
        try:
            shards = json.loads((path / INDEX).read_text(encoding="utf-8"))["weight_map"].values()
            return [path / str(s) for s in sorted(set(shards))]
        except (ValueError, KeyError, TypeError, AttributeError, OSError):
            raise PowerlensError(f"{path / INDEX} is not a shard index (no weight_map)",
                                 "save the model again with save_pretrained, or remove the file") from None
    return []


#: bytes per element of safetensors' dtypes: a tensor's data must be exactly its shape times this
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "U64": 8, "I32": 4,
               "U32": 4, "I16": 2, "U16": 2, "I8": 1, "U8": 1, "BOOL": 1}

#: safetensors' integer dtypes: a matrix of them is codes (an int8 re-save), not weights powerlens can read
INTEGER_DTYPES = ("I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "BOOL")


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Name -> shape of every tensor in the folder's weight files (:func:`weight_files`), read from their headers
    alone (8-byte length, then JSON; no tensor data read, no torch); a header that is not one, a tensor lying
    outside its file's data, or a ``.weight`` of integers (codes of a quantized re-save, whose scales safetensors does
    not carry: read as weights they would be wrong by orders of magnitude) is refused."""
    shapes: dict[str, list[int]] = {}
    for f in [f for f in weight_files(path) if f.is_file()]:
        with open(f, "rb") as fh:
            head = fh.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
            if not 0 < n <= 100_000_000:
                raise PowerlensError(f"{f} is not a safetensors file (header length {n})",
                                     "replace it with a file written by safetensors (save_pretrained)")
            try:
                header = json.loads(fh.read(n))
            except ValueError:
                raise PowerlensError(f"{f}: its safetensors header is not valid JSON (a truncated or corrupt file)",
                                     "replace it with a file written by safetensors (save_pretrained)") from None
        room = f.stat().st_size - 8 - n
        for k, v in header.items():
            if k == "__metadata__":
                continue
            lo, hi = (v.get("data_offsets") or [0, 0]) if isinstance(v, dict) else (0, -1)
            if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= room):
                raise PowerlensError(
                    f"{f}: tensor {k!r} lies at bytes {lo}..{hi} of a data section of {room} bytes (a truncated "
                    "or corrupt file)", "replace it with a file written by safetensors (save_pretrained)")
            shapes[k] = list(v.get("shape", []))
            size = DTYPE_BYTES.get(v.get("dtype"))
            if size is not None and hi - lo != math.prod(shapes[k]) * size:
                raise PowerlensError(
                    f"{f}: tensor {k!r} is declared {v.get('dtype')} of shape {shapes[k]} "
                    f"({math.prod(shapes[k]) * size} bytes) but holds {hi - lo} bytes (a header that does not "
                    "describe its data)", "replace it with a file written by safetensors (save_pretrained)")
            if k.endswith(".weight") and v.get("dtype") in INTEGER_DTYPES:  # buffers (position_ids) may be ints
                raise PowerlensError(
                    f"{f}: tensor {k!r} holds {v.get('dtype')} integers, not floating-point weights (a "
                    "quantized re-save: its codes without their scales)",
                    "give the model's floating-point weights (save_pretrained of the float model, or the original "
                    "checkpoint); 4-bit GGUF files are read through `source: package` or a local .gguf")
    return shapes




#: A numbered layer in a tensor name: GPT-2 / GPT-Neo ``h.3.``, BERT ``encoder.layer.3.``, Llama / Gemma
#: ``layers.3.`` (ALBERT's shared ``albert_layers.0.`` is no depth and does not match).
_LAYER_KEY = re.compile(r"^(?P<stack>(?:.*?\.)?(?:h|layer|layers))\.(?P<i>\d+)\.")


def stored_layers(names) -> dict[str, set[int]]:
    """Layer stack (the name before the index, e.g. ``transformer.h``) -> the layer indices its tensors hold."""
    stacks: dict[str, set[int]] = {}
    for k in names:
        m = _LAYER_KEY.match(k)
        if m:
            stacks.setdefault(m["stack"], set()).add(int(m["i"]))
    return stacks


def check_layer_count(names, n_layers: int, what: str) -> None:
    """Refuse weights whose layers are not the config's: transformers builds the config's layer count and
    silently drops the layers beyond it (a 6-layer GPT-2 under ``n_layer: 2`` runs as 2 layers) or fills the
    missing ones with random values. Passes when some layer stack holds exactly layers 0..n-1 (a multimodal
    checkpoint's vision tower is another stack), or when no name is numbered (ALBERT's shared layer)."""
    stacks = stored_layers(names)
    if not stacks or any(ix == set(range(n_layers)) for ix in stacks.values()):
        return
    stack, ix = max(stacks.items(), key=lambda kv: len(kv[1]))
    held = f"{len(ix)} layer(s), {stack}.{min(ix)} to {stack}.{max(ix)}"
    if max(ix) + 1 > n_layers:
        fate = f"layers {n_layers} to {max(ix)} would be dropped without a word"
    else:
        fate = "the layers it lacks would be filled with random values"
    raise PowerlensError(
        f"{what}: config.json describes a model of {n_layers} layer(s) but its *.safetensors files hold {held}: "
        f"{fate}", f"use the config.json saved with these weights (save_pretrained writes both), or set its "
        f"layer count to {max(ix) + 1} if that is the model")


def _layers_text(names: list[str]) -> str:
    """"; layers transformer.h.2 to transformer.h.5" for the numbered layers among ``names`` ("" for none)."""
    stacks = stored_layers(names)
    return "".join(f"; layer {s}.{min(ix)}" if len(ix) == 1 else f"; layers {s}.{min(ix)} to {s}.{max(ix)}"
                   for s, ix in stacks.items())


def _mismatch_text(k) -> str:
    """One entry of transformers' ``mismatched_keys`` ((name, shape in the files, shape the config gives))."""
    if isinstance(k, (tuple, list)) and len(k) == 3:
        return f"{k[0]}: files {tuple(k[1])}, config {tuple(k[2])}"
    return str(k[0] if isinstance(k, (tuple, list)) else k)


def unplaced_keys(model, unexpected: list[str], unused: tuple[str, ...] = ()) -> list[str]:
    """The tensors of a checkpoint that the loaded model has no place for and that are no head of its
    architecture: those inside the model itself (their name, less the base model's prefix, starts with one of
    its submodules: layers beyond the config's count, a tensor no layer has) and any other name no head of the
    architecture's LM or pre-training classes holds. Heads the loaded class leaves out (an MLM head loaded as the
    base model, BERT's next-sentence head) and ``unused`` submodules pass."""
    base = getattr(model, "base_model", model)
    prefix = getattr(model, "base_model_prefix", "") or ""
    own = {n for n, _ in base.named_children()} | {n for n, _ in base.named_parameters(recurse=False)}
    heads = None
    out = []
    for k in sorted(unexpected):
        parts = k.split(".")
        if set(parts) & set(unused):
            continue
        inner = parts[1:] if prefix and parts[0] == prefix else parts
        if parts[0] != prefix and inner[0] not in own:
            heads = _head_names(model.config, prefix) if heads is None else heads
            if parts[0] in heads:
                continue
        out.append(k)
    return out


def _head_names(config, prefix: str) -> set[str]:
    """Top-level submodule names of the architecture's head classes (LM, masked LM, pre-training), built on the
    meta device (no memory): e.g. ``lm_head``, ``cls``, ``predictions``, ``sop_classifier``."""
    import torch
    import transformers

    names: set[str] = set()
    was = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # e.g. "add is_decoder=True": about a model never used
    for auto in ("AutoModelForCausalLM", "AutoModelForMaskedLM", "AutoModelForPreTraining"):
        try:
            with torch.device("meta"):
                m = getattr(transformers, auto).from_config(config)
        except Exception:  # an architecture without this head
            continue
        names |= {n for n, _ in m.named_children()} - {prefix}
    transformers.logging.set_verbosity(was)
    return names


def embedding_rows(config) -> int | None:
    """The token-embedding rows a transformers config describes (its text config's ``vocab_size``)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    rows = getattr(text, "vocab_size", None)
    return int(rows) if isinstance(rows, int) else None


def check_token_ids(tokenizer, rows: int | None, what: str) -> None:
    """Refuse a tokenizer that can produce ids the embedding has no row for (a tokenizer.json entry at id 5000
    over 320 rows): every step up to the dynamics would pass, and the first forward pass would end in an
    IndexError."""
    if tokenizer is None or not rows:
        return
    if not (callable(getattr(tokenizer, "get_vocab", None)) and callable(getattr(tokenizer, "__call__", None))
            and hasattr(tokenizer, "__len__")):
        raise PowerlensError(f"{what}: {type(tokenizer).__name__} {str(tokenizer)[:40]!r} is not a tokenizer",
                             "pass a transformers tokenizer (AutoTokenizer, loaded from the model's folder), "
                             "or none: Lens(model) computes the matrices without one")
    vocab = tokenizer.get_vocab()
    top = max([len(tokenizer) - 1, *vocab.values()]) if vocab else len(tokenizer) - 1
    if top >= rows:
        over = sorted(((i, t) for t, i in vocab.items() if i >= rows))[:3]
        shown = ", ".join(f"{t!r} = {i}" for i, t in over)
        raise PowerlensError(
            f"{what}: its tokenizer gives token ids up to {top} but the model's embedding has {rows} rows "
            f"(ids 0 to {rows - 1}; beyond: {shown or 'added tokens'}): those tokens would crash the forward pass",
            "use the tokenizer saved with this model (tokenizer.save_pretrained into the same folder), or a "
            "config.json whose vocab_size covers it, with weights to match")


def check_lm_head(path: Path, config, adapter, what: str) -> None:
    """Refuse, at fetch, a causal model with an LM head in its config, untied from the embeddings, whose files
    hold no ``lm_head.weight``: the steering step loads that head and would refuse it only then, after every
    other step ran."""
    from powerlens.models.archs import has_lm_head

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    tied = bool(getattr(text, "tie_word_embeddings", getattr(config, "tie_word_embeddings", True)))
    if not adapter.causal or tied or not has_lm_head(getattr(config, "architectures", None)):
        return
    names = safetensors_shapes(path)
    if not any(k == "lm_head.weight" or k.endswith(".lm_head.weight") for k in names):
        raise PowerlensError(
            f"{what}: config.json declares an LM head ({', '.join(config.architectures)}) not tied to the "
            "embeddings (tie_word_embeddings: false), but its *.safetensors files hold no lm_head.weight: the "
            "steering step would refuse the model after every other step ran",
            "save the model with its head (AutoModelForCausalLM ... save_pretrained), or set "
            "`tie_word_embeddings: true` in config.json if the head is the embedding")

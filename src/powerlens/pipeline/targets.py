"""Steering targets checked before any model-heavy job (no torch, no transformers).

A target names a direction u in token space: ``embedding`` / ``unembedding`` of one ``token``, or a seeded
``random`` unit vector. What can go wrong is known from the tokenizer and config.json alone: the token is
split into several pieces, or is not in the vocabulary (it becomes the unknown token), or ``unembedding`` is
asked of a checkpoint without an LM head. :func:`check_targets` finds each of these from a
``tokenizers.Tokenizer`` (the fast tokenizer's own backend, so its ids are the ones the steering step gets
from transformers). The workflow runs it when it builds its DAG, for every model whose tokenizer
:func:`tokenizer_on_disk` finds (twins, local folders, packages, anything fetched before); the
``steering_targets`` step runs it right after the fetch for the rest (hub and GGUF models on their
first run), before extraction starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import get_adapter
from powerlens.models.archs import has_lm_head, twin_config
from powerlens.models.sources import built_twin, source_folder
from powerlens.models.sources.twin import kind_of, twin_core


def check_targets(name: str, targets: list[dict], tokenizer, head: bool) -> list[dict[str, Any]]:
    """Each target with the token id it stands for (``None`` for random ones); PowerlensError otherwise.

    ``tokenizer`` is a ``tokenizers.Tokenizer``; ``head`` says whether the checkpoint has an LM head."""
    out = []
    for i, t in enumerate(targets):
        where = f"model {name!r}, steering target {i + 1} ({t['kind']}"
        if t["kind"] == "random":
            out.append({**t, "token_id": None})
            continue
        token = t.get("token")
        if not token:
            raise PowerlensError(f"{where}): no `token` given",
                                 "add `token: <text>` (a single vocabulary entry), or use kind: random")
        where += f" {token!r})"
        if t["kind"] == "unembedding" and not head:
            raise PowerlensError(f"{where}: the checkpoint has no language-model head to take the unembedding "
                                 "row from", "use kind: embedding (the input embedding row) or kind: random")
        ids = tokenizer.encode(token, add_special_tokens=False).ids
        if not ids:
            raise PowerlensError(f"{where}: the tokenizer gives no token for it",
                                 "choose a token of the model's vocabulary, or use kind: random")
        if len(ids) != 1:
            pieces = [tokenizer.id_to_token(j) for j in ids[:12]] + (["..."] if len(ids) > 12 else [])
            raise PowerlensError(
                f"{where}: the tokenizer splits the token into {len(ids)} pieces {pieces}",
                "choose a token that is a single vocabulary entry (for GPT-2-style tokenizers often with a "
                "leading space, e.g. ' the'; the tiny test twins tokenize bytes: one ASCII character), or use "
                "kind: random")
        unk = _unk_id(tokenizer)
        if unk is not None and ids[0] == unk:
            raise PowerlensError(f"{where}: the token is not in the vocabulary (it becomes the unknown token "
                                 f"{tokenizer.id_to_token(unk)!r})",
                                 "choose a token of the model's vocabulary, or use kind: random")
        out.append({**t, "token_id": int(ids[0])})
    return out


def _unk_id(tokenizer) -> int | None:
    model = tokenizer.model
    unk = getattr(model, "unk_token", None)
    return tokenizer.token_to_id(unk) if unk else None


def _folder_tokenizer(path: Path):
    """The fast tokenizer saved in a model folder (tokenizer.json), and whether its config has an LM head;
    None when the folder holds no tokenizer.json (then the step after the fetch checks)."""
    from tokenizers import Tokenizer

    tj, cj = path / "tokenizer.json", path / "config.json"
    if not (tj.is_file() and cj.is_file()):
        return None
    try:
        archs = json.loads(cj.read_text(encoding="utf-8")).get("architectures")
        tok = Tokenizer.from_file(str(tj))
        tok.no_padding()  # a saved tokenizer.json may pad/truncate; transformers switches both off per call
        tok.no_truncation()
        return tok, has_lm_head(archs)
    except Exception:
        return None  # a malformed file: the fetch step names it


def tokenizer_on_disk(entry: dict | None, manifest: str | Path | None):
    """(tokenizer, has_head) for a model entry without fetching it (or for a fetched model: ``entry`` None and
    its manifest), or None when not available yet."""
    if manifest is not None and Path(manifest).is_file():
        try:
            return _folder_tokenizer(Path(json.loads(Path(manifest).read_text())["path"]))
        except (OSError, ValueError, KeyError):
            return None
    if entry is None:
        return None
    if built_twin(entry):  # a twin the run builds: its tokenizer is made, not read
        twin = twin_config(entry["twin_of"])
        if kind_of(twin.arch, int(twin.kwargs["vocab_size"])) == "bpe":
            return None  # read from a GGUF (seconds): checked right after the fetch instead
        return twin_core(entry["twin_of"])[0], has_lm_head([get_adapter(twin.arch).head_class])

    folder = source_folder(entry)  # a local folder or an installed package's weights
    if folder is not None:
        return _folder_tokenizer(folder)
    return None


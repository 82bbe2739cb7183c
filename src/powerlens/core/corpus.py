"""The prompt corpus: a UTF-8 text file, one natural-language prompt per line.

Tokenisation is recorded: the tokenizer's special tokens are kept in the forward pass (a model expects
them) and left out of every statistic (our choice: [CLS]/[SEP] and friends are not text tokens). Prompts
longer than the model's context are truncated, and how many were truncated is recorded.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from powerlens.core.errors import PowerlensError

if TYPE_CHECKING:  # torch is imported where batches are built, not to read prompts (Snakemake's DAG)
    import torch


def read_prompts(path: str | Path) -> list[str]:
    """Prompts, one per line ("\n" ends a line; a trailing "\r" is dropped). Control characters other than tab
    (NUL, vertical tab, form feed, file separators, ...) are refused, naming the line: Python's splitlines()
    would cut a line at some of them and silently turn one prompt into several. So are a line of nothing but
    invisible characters, a repeated prompt and a corpus of fewer than :data:`MIN_PROMPTS` prompts (the
    prompts are the units of the prompt-level tests and of the thirds split: see :func:`check_corpus`)."""
    path = Path(path)
    fix = "set `prompts:` to a UTF-8 text file, one prompt per line"
    if path.is_dir():
        raise PowerlensError(f"prompt file {path} is a directory", fix)
    if not path.exists():
        raise PowerlensError(f"prompt file {path} does not exist", fix)
    if not path.is_file():  # a FIFO would block the read, a device would never end
        raise PowerlensError(f"prompt file {path} is not a regular file (a pipe, socket or device)", fix)
    raw = path.read_bytes()
    utf16 = raw.startswith((b"\xff\xfe", b"\xfe\xff")) or raw.count(b"\x00") * 3 > len(raw) > 1  # ASCII in UTF-16
    if utf16:
        raise PowerlensError(f"prompt file {path} is UTF-16 (or UTF-32) encoded, not UTF-8",
                             f"re-save it as UTF-8 (e.g. iconv -f utf-16 -t utf-8 {path} > prompts.txt)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PowerlensError(f"prompt file {path} is not UTF-8 (byte {e.start})",
                             "re-save it as UTF-8 (e.g. iconv -t utf-8)") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark is not text of prompt 1
    prompts, where = [], []
    for i, ln in enumerate(text.split("\n"), start=1):
        ln = ln.removesuffix("\r")
        check_prompt(ln, f"prompt file {path}, line {i}")
        if ln.strip():
            check_visible(ln, f"prompt file {path}, line {i}")
            prompts.append(ln.strip())
            where.append(f"line {i}")
    if not prompts:
        raise PowerlensError(f"prompt file {path} holds no prompts", "write one natural-language prompt per line")
    check_corpus(prompts, where, f"prompt file {path}")
    return prompts


def check_prompt(text: str, where: str) -> None:
    """Refuse control characters other than tab (NUL, vertical tab, form feed, file separators, ...) in one
    prompt: Python's splitlines() would cut a line at some of them and silently make one prompt several."""
    bad = [c for c in text if (ord(c) < 32 and c != "\t") or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029\x85"]
    if bad:
        raise PowerlensError(f"{where}: control character {bad[0]!r}",
                             "remove control characters (NUL, vertical tab, form feed, separators) from the prompts")


def check_prompt_list(prompts) -> list[str]:
    """Prompts given to the Python API: a list of non-empty strings without control characters, none of them
    only invisible characters, none repeated (the checks :func:`read_prompts` makes of a prompt file; the API
    runs no thirds split, so one prompt is enough there)."""
    if isinstance(prompts, str):
        raise PowerlensError("prompts is one string, not a list of prompts (each of its characters would be "
                             "taken for a prompt)", f"pass a list: [{prompts[:40]!r}]")
    try:
        prompts = list(prompts)
    except TypeError:
        raise PowerlensError(f"prompts must be a list of strings, got {type(prompts).__name__}",
                             "pass a list of natural-language prompts") from None
    if not prompts:
        raise PowerlensError("no prompts given", "pass a list of natural-language prompts")
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise PowerlensError(f"prompt {i + 1} is a {type(p).__name__}, not a string", "pass strings")
        if not p.strip():
            raise PowerlensError(f"prompt {i + 1} is empty", "remove empty prompts")
        check_prompt(p, f"prompt {i + 1}")
        check_visible(p, f"prompt {i + 1}")
    prompts = [p.strip() for p in prompts]
    check_distinct(prompts, [f"prompt {i + 1}" for i in range(len(prompts))], "the prompts")
    return prompts


#: Characters that show nothing yet are neither whitespace nor format characters (category Cf): the combining
#: grapheme joiner, Hangul and Khmer fillers, the braille blank, Mongolian and other variation selectors.
_BLANKS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0"
                    + "".join(map(chr, [*range(0x180B, 0x1810), *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])))


def invisible(c: str) -> bool:
    """A character that shows nothing: whitespace, a separator (Zs, Zl, Zp), a format character (Cf: zero-width
    space and joiners, byte-order mark, soft hyphen, tags) or one of :data:`_BLANKS`."""
    return c.isspace() or unicodedata.category(c) in ("Cf", "Cc", "Zs", "Zl", "Zp") or c in _BLANKS


def check_visible(text: str, where: str) -> None:
    """Refuse a prompt of nothing but invisible characters ("\\u200b\\u200b", a stray byte-order mark): it is
    no text, yet the tokenizer makes tokens of it and the analysis would count it as a prompt."""
    if text and all(invisible(c) for c in text):
        names = list(dict.fromkeys(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in text
                                   if not c.isspace()))
        raise PowerlensError(f"{where}: the prompt is only invisible characters ({', '.join(names[:4])}"
                             f"{', ...' if len(names) > 4 else ''})",
                             "remove that prompt, or write visible text in it (zero-width, format and blank "
                             "characters are not text)")


_NON_ASCII = re.compile(r"[^\x00-\x7f]")  # the only characters that may be invisible but not space


def prompt_key(text: str) -> str:
    """What two prompts must differ in to count as two: the text once Unicode-normalised (NFKC), case-folded,
    without invisible characters and with its whitespace runs made one space."""
    if text.isascii():  # the common case, fast: no invisible character but whitespace, NFKC changes nothing
        return " ".join(text.lower().split())
    folded = unicodedata.normalize("NFKC", text).casefold()
    drop = {ord(c): None for c in _NON_ASCII.findall(folded) if not c.isspace() and invisible(c)}
    return " ".join((folded.translate(drop) if drop else folded).split())  # translate is slow: when needed


def check_distinct(prompts: list[str], where: list[str], source: str) -> None:
    """Refuse repeated prompts (compared by :func:`prompt_key`), naming where each repeat and its first copy
    are: the prompt-level tests count prompts as independent units, so a prompt given n times is counted n
    times and its p-value shrinks without any new evidence (24 copies took one from 0.5 to 6e-8)."""
    first: dict[str, int] = {}
    again: dict[int, list[str]] = {}  # first copy -> where its repeats are
    for i, p in enumerate(prompts):
        j = first.setdefault(prompt_key(p), i)
        if j != i:
            again.setdefault(j, []).append(where[i])
    if again:
        groups = [f"{where[j]} ({_show(prompts[j])}) again at {', '.join(w[:6])}{', ...' if len(w) > 6 else ''}"
                  for j, w in list(again.items())[:3]]
        n, more = sum(map(len, again.values())), "; ..." if len(again) > 3 else ""
        raise PowerlensError(f"{source}: {n} repeated prompt(s): {'; '.join(groups)}{more}",
                             "keep each prompt once (they are compared ignoring case, repeated whitespace and "
                             "invisible characters): the prompts are the units of the prompt-level tests, and a "
                             "repeat counts one prompt as several independent ones")


#: Fewest prompts a corpus may hold: the robustness check splits the corpus into 3 interleaved thirds (prompts
#: j, j + 3, ...), each analysed on its own, so a smaller corpus leaves a third empty (its statistics 0 / 0); the
#: prompt-level Wilcoxon test needs 2 prompts.
MIN_PROMPTS = 3


def check_corpus(prompts: list[str], where: list[str], source: str) -> None:
    """A corpus the analysis is defined for: no repeated prompt (:func:`check_distinct`) and at least
    :data:`MIN_PROMPTS` prompts."""
    check_distinct(prompts, where, source)
    if len(prompts) < MIN_PROMPTS:
        raise PowerlensError(f"{source} holds {len(prompts)} prompt(s); the analysis needs at least {MIN_PROMPTS}: "
                             f"the robustness check splits the corpus into 3 interleaved thirds, each needs a "
                             f"prompt (the prompt-level Wilcoxon test needs 2)",
                             f"add distinct natural-language prompts, one per line, to make {MIN_PROMPTS} or more "
                             "(the shipped config/prompts.txt holds 220)")


def _show(text: str, n: int = 40) -> str:
    """A prompt quoted for a message: repr (escapes what a terminal would act on), cut to ``n`` characters."""
    return repr(text[:n] + ("..." if len(text) > n else ""))


#: Fewest text tokens (special tokens excluded) a corpus must give for the statistics to be computed.
MIN_COUNTED_TOKENS = 8


def check_counted_tokens(ids: list[list[int]], special: list[list[int]], tokenizer) -> None:
    """Stop when the corpus gives fewer than :data:`MIN_COUNTED_TOKENS` text tokens (special tokens do not
    count: every prompt tokenized to nothing but [CLS]/[SEP] leaves no statistic to compute), and warn on
    stderr when most of them are the unknown token (the statistics would then describe [UNK], not the text)."""
    counted = [t for x, s in zip(ids, special) for t, sp in zip(x, s) if not sp]
    if len(counted) < MIN_COUNTED_TOKENS:
        raise PowerlensError(
            f"the prompts give {len(counted)} text token(s) for the statistics (special tokens excluded; at "
            f"least {MIN_COUNTED_TOKENS} are needed)", "use more or longer natural-language prompts")
    unk = getattr(tokenizer, "unk_token_id", None)
    n_unk = sum(t == unk for t in counted) if unk is not None else 0
    if n_unk * 2 > len(counted):
        print(f"WARNING: {n_unk} of the {len(counted)} text tokens of the prompts are the unknown token "
              f"{getattr(tokenizer, 'unk_token', '')!r}: the statistics describe it, not the text (use prompts in "
              "the tokenizer's language and script)", file=sys.stderr)


@dataclass
class Batch:
    ids: torch.Tensor  # (B, T) token ids, right-padded
    mask: torch.Tensor  # (B, T) 1 for real positions (incl. special tokens)
    stat_mask: torch.Tensor  # (B, T) bool: positions that count in statistics (no specials, no padding)
    prompt_index: torch.Tensor  # (B,) index of each row's prompt in the corpus


#: A prompt longer than this many characters per allowed token is tokenized from growing prefixes, never whole.
PREFIX_CHARS_PER_TOKEN = 32
_ENCODE = dict(add_special_tokens=True, truncation=False, return_special_tokens_mask=True,
               # text is data: "[SEP]" or "<|endoftext|>" typed in a prompt is tokenized as the characters it is,
               # never as the tokenizer's control token
               split_special_tokens=True)


def _head_of_long(text: str, tokenizer, max_len: int) -> tuple[list[int], list[int], bool]:
    """The first ``max_len`` tokens of a very long prompt without tokenizing all of it: prefixes of doubling
    length until two consecutive ones agree on their first ``max_len`` ids (the cut can only change the tokens
    next to it), or the whole text is reached. (ids, special mask, truncated)."""
    c, prev = PREFIX_CHARS_PER_TOKEN * max_len, None
    while c < len(text):
        e = tokenizer(text[:c], **_ENCODE)
        ids, s = e["input_ids"], e["special_tokens_mask"]
        if len(ids) > max_len and prev is not None and prev == ids[:max_len]:
            return ids[:max_len], s[:max_len], True
        prev = ids[:max_len] if len(ids) > max_len else None
        c *= 2
    e = tokenizer(text, **_ENCODE)
    ids, s = e["input_ids"], e["special_tokens_mask"]
    return ids[:max_len], s[:max_len], len(ids) > max_len


def tokenize(prompts: list[str], tokenizer, max_len: int) -> tuple[list[list[int]], list[list[int]], int]:
    """Token ids and special-token masks per prompt (truncated to ``max_len``); returns the truncation count.
    A position is special when the tokenizer's mask says so or its id is one of the tokenizer's special ids
    (some tokenizers, SmolLM2's, mark none); typed control tokens are text (``split_special_tokens``)."""
    long = {i for i, p in enumerate(prompts) if len(p) > PREFIX_CHARS_PER_TOKEN * max_len}
    short = [p for i, p in enumerate(prompts) if i not in long]
    enc = tokenizer(short, **_ENCODE) if short else {"input_ids": [], "special_tokens_mask": []}
    it = iter(zip(enc["input_ids"], enc["special_tokens_mask"]))
    special_ids = set(getattr(tokenizer, "all_special_ids", None) or [])
    ids, special, truncated = [], [], 0
    for i, p in enumerate(prompts):
        if i in long:
            x, s, cut = _head_of_long(p, tokenizer, max_len)
        else:
            x, s = next(it)
            cut = len(x) > max_len
            x, s = x[:max_len], s[:max_len]
        truncated += cut
        ids.append(list(x))
        special.append([int(bool(m) or t in special_ids) for t, m in zip(x, s)])
    return ids, special, truncated


def batch_groups(lengths: list[int], batch_size: int, batch_tokens: int | None = None) -> list[list[int]]:
    """Prompt indices per batch: sorted by length (ties by index), each batch at most ``batch_size`` prompts
    and, if ``batch_tokens`` is given, at most that many tokens once padded (rows x longest row; a prompt
    longer than the budget gets a batch of its own). Deterministic."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    groups: list[list[int]] = []
    for i in order:
        g = groups[-1] if groups else None
        if g is None or len(g) >= batch_size or (batch_tokens is not None
                                                  and (len(g) + 1) * lengths[i] > batch_tokens):
            groups.append([i])
        else:
            g.append(i)
    return groups


def prompt_batches(prompts: list[str], tokenizer, max_len: int, batch_size: int, batch_tokens: int | None = None
                   ) -> tuple[list[Batch], list[list[int]], list[list[int]], int]:
    """Tokenize ``prompts`` (truncated to ``max_len``) and batch them, padding with the tokenizer's pad token
    (else its end-of-text token, else 0): (batches, ids, special-token masks, number truncated)."""
    ids, special, truncated = tokenize(prompts, tokenizer, max_len)
    check_counted_tokens(ids, special, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    return batches(ids, special, batch_size, pad, batch_tokens), ids, special, truncated


def batches(ids: list[list[int]], special: list[list[int]], batch_size: int, pad_id: int,
            batch_tokens: int | None = None) -> list[Batch]:
    """Right-padded batches of :func:`batch_groups` (length-sorted: less padding); deterministic order."""
    import torch

    out = []
    for idx in batch_groups([len(x) for x in ids], batch_size, batch_tokens):
        T = max(len(ids[i]) for i in idx)
        B = len(idx)
        x = torch.full((B, T), pad_id, dtype=torch.long)
        m = torch.zeros(B, T, dtype=torch.long)
        st = torch.zeros(B, T, dtype=torch.bool)
        for b, i in enumerate(idx):
            n = len(ids[i])
            x[b, :n] = torch.tensor(ids[i])
            m[b, :n] = 1
            st[b, :n] = torch.tensor([not s for s in special[i]], dtype=torch.bool)
        out.append(Batch(x, m, st, torch.tensor(idx)))
    return out

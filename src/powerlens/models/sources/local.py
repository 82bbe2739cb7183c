"""``source: local``: a folder holding a saved model (config.json + *.safetensors)."""

from __future__ import annotations

from pathlib import Path

from powerlens.models.sources.files import check_model_dir, file_table


def fetch_local(name: str, entry: dict) -> dict:
    path = folder(entry)
    check_model_dir(path, f"model {name!r} (source: local)")
    return {"source": "local", "path": str(path), "files": file_table(path), "resolved_revision": None}


def folder(entry: dict) -> Path:
    """The user's model folder, as given."""
    return Path(entry["path"]).expanduser().resolve()

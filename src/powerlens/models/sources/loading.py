"""Loading what a manifest records: every file checked against its sha256, safetensors only, eager
attention, no remote code, weights that cover the config."""

from __future__ import annotations

from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import ADAPTERS, get_adapter
from powerlens.models.sources.coverage import check_token_ids, embedding_rows
from powerlens.models.sources.files import (
    CONFIG_FIX,
    changed_files_fix,
    from_pretrained_checked,
    refuse_remote_code,
    require_model_type,
    verify_files,
)


def load_model(manifest: dict, dtype=None, head: bool = False, verify: bool = True):
    """Load the model a manifest points to (safetensors only, eager attention, no remote code).

    ``head=True`` loads the LM / masked-LM head when the checkpoint has one; otherwise the base model.
    """
    import torch
    import transformers

    dtype = dtype or torch.float32
    if verify:
        verify_files(manifest)
    path = manifest["path"]
    refuse_remote_code(Path(path), f"model {manifest['model']!r}")
    try:
        cfg = transformers.AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except (ValueError, KeyError, OSError) as e:  # unknown model_type, malformed config.json
        raise PowerlensError(
            f"model {manifest['model']!r}: transformers cannot read {Path(path) / 'config.json'} "
            f"({type(e).__name__}: {str(e).splitlines()[0][:200]})",
            f"use a checkpoint of a supported architecture ({', '.join(sorted(ADAPTERS))}) saved by "
            "transformers' save_pretrained") from None
    require_model_type(manifest["model"], Path(path) / "config.json", cfg.model_type, manifest["arch"])
    cls = transformers.AutoModel
    if head:
        cls = getattr(transformers, get_adapter(manifest["arch"]).head_class)
    kw = dict(dtype=dtype, attn_implementation="eager", use_safetensors=True, local_files_only=True,
              trust_remote_code=False)
    model = from_pretrained_checked(
        cls, path, f"model {manifest['model']!r} ({path})",
        "give a checkpoint whose config.json matches its weights (save both with save_pretrained)",
        unused=get_adapter(manifest["arch"]).unused_modules,
        corrupt_fix=(CONFIG_FIX + " (its files are the ones the fetch step recorded: their sha256 match)" if verify
                     else "the files may be corrupt or truncated; if they changed after the fetch step recorded "
                     "them: " + changed_files_fix(manifest.get("source"))), **kw)
    model.eval()
    return model


def load_tokenizer(manifest: dict):
    """The tokenizer of a manifest's folder, refused when it gives ids the embedding has no row for (its config's
    vocab_size): the forward pass would end in an IndexError."""
    import transformers

    refuse_remote_code(Path(manifest["path"]), f"model {manifest['model']!r}")
    tok = transformers.AutoTokenizer.from_pretrained(manifest["path"], local_files_only=True,
                                                     trust_remote_code=False)
    try:
        cfg = transformers.AutoConfig.from_pretrained(manifest["path"], local_files_only=True,
                                                      trust_remote_code=False)
    except (ValueError, KeyError, OSError):
        return tok  # the model's load names an unreadable config.json
    check_token_ids(tok, embedding_rows(cfg), f"model {manifest['model']!r} ({manifest['path']})")
    return tok


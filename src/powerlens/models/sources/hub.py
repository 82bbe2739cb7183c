"""``source: hf``: the Hugging Face hub (snapshot_download of config, tokenizer and safetensors files at a
pinned revision), and the one reachability check made before any job."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.models.sources.files import check_model_dir, compare_files, file_table

HF_PATTERNS = ["config.json", "*.safetensors", "*.safetensors.index.json", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json", "merges.txt",
               "spiece.model", "POWERLENS_TWIN.json"]  # a twin uploaded to the hub stays random


def hub_downloads_needed(models: dict, done) -> list[tuple[str, str, str]]:
    """(name, repo_id, revision) of every hub model whose fetch step has not run (``done(name)`` is false)
    and whose snapshot is not in the local Hugging Face cache: the models a run cannot start without."""
    from huggingface_hub import try_to_load_from_cache

    need = []
    for name, m in models.items():
        if m["source"] != "hf" or done(name):
            continue
        rev = m.get("revision") or "main"
        cached = try_to_load_from_cache(m["repo_id"], "config.json", revision=rev,
                                        cache_dir=os.environ.get("HF_HUB_CACHE"))
        if not isinstance(cached, str):
            need.append((name, m["repo_id"], rev))
    return need


def check_hub_reachable(need: list[tuple[str, str, str]], timeout: float = 5.0) -> None:
    """One connectivity check before any job: a GET of the first needed model's metadata on the endpoint.
    Unreachable (refused, no route, DNS, timeout, or HF_HUB_OFFLINE set) -> one PowerlensError naming every
    model that needs the hub and the ways out; HTTP errors (a wrong repo_id, a gated repo) are left to the
    fetch step, which names them exactly."""
    if not need:
        return
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    names = ", ".join(n for n, _, _ in need)
    reason = None
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        reason = "HF_HUB_OFFLINE is set"
    else:
        url = f"{endpoint}/api/models/{need[0][1]}"
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout).close()
        except urllib.error.HTTPError:
            return  # the hub answered
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = f"{type(getattr(e, 'reason', e)).__name__}: {getattr(e, 'reason', e)}"
    if reason:
        raise PowerlensError(
            f"the Hugging Face hub ({endpoint}) is unreachable ({reason}) and {len(need)} model(s) of this run "
            f"are neither downloaded nor cached: {names}; nothing was started",
            "one of: (1) run the offline config: `snakemake --cores 2 --configfile config/offline.yaml`; "
            "(2) pre-fill a Hugging Face cache where the hub is reachable (`hf download <repo_id> --revision "
            "<rev>`), copy it here and set HF_HOME to it; (3) use `source: local` with `path:` to a saved model; "
            "(4) set HF_ENDPOINT to a reachable mirror")


def fetch_hf(name: str, entry: dict, lock: dict | None = None, cache_dir: str | None = None) -> dict:
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import snapshot_download

    repo_id = entry["repo_id"]
    revision = entry.get("revision") or "main"
    locked = (lock or {}).get(name)
    if locked and locked.get("repo_id") == repo_id:
        revision = locked["resolved_revision"]
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    cache_dir = cache_dir or os.environ.get("HF_HUB_CACHE")  # read per call (huggingface_hub reads it at import)
    try:
        path = Path(snapshot_download(repo_id, revision=revision, allow_patterns=HF_PATTERNS,
                                      cache_dir=cache_dir, endpoint=os.environ.get("HF_ENDPOINT")))
    except hf_errors.RevisionNotFoundError:
        raise PowerlensError(
            f"model {name!r}: revision {revision!r} does not exist in {repo_id} ({endpoint})",
            "set `revision` to a commit SHA, branch or tag listed on the model's hub page",
        ) from None
    except hf_errors.RepositoryNotFoundError:
        raise PowerlensError(
            f"model {name!r}: repository {repo_id!r} was not found on {endpoint}",
            "check `repo_id` (namespaced, e.g. openai-community/gpt2); gated repos need `hf auth login`",
        ) from None
    except hf_errors.EntryNotFoundError as e:
        if not isinstance(e, hf_errors.LocalEntryNotFoundError):
            raise PowerlensError(f"model {name!r}: a file of {repo_id}@{revision} is missing on {endpoint}",
                                 "check `repo_id` and `revision`") from None
        raise _unreachable(name, repo_id, revision, endpoint, e) from None
    except (hf_errors.OfflineModeIsEnabled, ConnectionError, TimeoutError) as e:
        raise _unreachable(name, repo_id, revision, endpoint, e) from None
    except Exception as e:  # a transfer cut off half-way, a broken proxy, ...
        raise PowerlensError(
            f"model {name!r}: downloading {repo_id}@{revision} from {endpoint} failed: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:200] if str(e) else ''}",
            "re-run the step: completed files are kept in the cache and the rest is downloaded again; no "
            "manifest was written, so nothing downstream used the partial download",
        ) from None
    check_model_dir(path, f"model {name!r} ({repo_id}@{revision})")
    files = file_table(path)
    if locked and locked.get("files"):
        compare_files(name, files, locked["files"], "the lock file", "hf")
    return {
        "source": "hf", "repo_id": repo_id, "requested_revision": entry.get("revision") or "main",
        "resolved_revision": path.name, "path": str(path), "files": files, "endpoint": endpoint,
    }


def _unreachable(name, repo_id, revision, endpoint, e) -> PowerlensError:
    return PowerlensError(
        f"model {name!r}: cannot reach the Hugging Face hub ({endpoint}) to download "
        f"{repo_id}@{revision}, and no cached copy was found ({type(e).__name__})",
        "one of: (1) pre-fill a cache where the hub is reachable (`hf download "
        f"{repo_id} --revision {revision}`), copy it here and set HF_HOME to it; (2) use "
        "`source: local` with `path:` to a saved model; (3) run the offline config: "
        "`snakemake --cores 2 --configfile config/offline.yaml`",
    )


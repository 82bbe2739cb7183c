"""The Python API: one model seen as power-method steps, in a few lines.

    >>> import powerlens
    >>> lens = powerlens.Lens.from_pretrained("path/to/saved/model")   # or a hub id, or Lens(model)
    >>> lens.spectra().table                     # one row per depth (the spectra step's): lambda_1, type, gap, ...
    >>> lens.spectra()[3].eigvals[:4]            # layer 3's leading eigenvalues (sorted by modulus)
    >>> lens.dynamics(["The cat sat on the mat."])   # gamma_t, rho_t, tilt per layer, with the null
    >>> with lens.steer("water", kappa=16):     # rank-1 change of the last layer's W_O, undone on exit
    ...     model(...)

Everything here calls the functions the pipeline's steps call: the adapters' extraction,
:func:`powerlens.analysis.spectra.model_spectra` and :func:`~powerlens.analysis.spectra.spectra_table` (the
spectra step's table), :func:`powerlens.analysis.dynamics.analyse` (the dynamics step's analysis, both modes)
and :func:`powerlens.analysis.steering.rank1_output_edit` with
:func:`~powerlens.analysis.steering.principal_check`, so a number from the API is the number the pipeline
writes (``tests/unit/test_dynamics_parity.py``, ``test_api_cli.py``). :func:`layer_matrices_of` reads a
safetensors folder's W_V and W_O without building the model where the adapter names them (``powerlens
inspect``).

Conventions (differ from TransformerLens): matrices act on column vectors, ``y = W x``, and are stored
whole, ``W_Q``, ``W_K``, ``W_V`` as (H d_head, d) and ``W_O`` as (d, H d_head), so ``F = W_O W_V`` is (d, d)
and its eigenvectors are *right* eigenvectors, ``F v = lambda v``. TransformerLens stores per-head
``W_V[h]`` as (d_model, d_head) acting on row vectors (``x @ W``): its ``OV`` matrix is ``F^T`` per head, whose
eigenvalues are the same and whose right eigenvectors are the *left* eigenvectors of ``F``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from powerlens.analysis.spectra import layer_matrices, model_spectra, spectra_arrays, spectra_table
from powerlens.core.corpus import check_prompt_list
from powerlens.core.errors import PowerlensError
from powerlens.core.fmt import is_random_label
from powerlens.core.io import read_generated_json
from powerlens.models.adapters import ADAPTERS, adapter_of_model_type, get_adapter
from powerlens.models.archs import has_lm_head
from powerlens.models.sources import TWIN_MARKER, check_model_dir, fetch_hf, from_pretrained_checked, has_tokenizer
from powerlens.pipeline.config import check_options, schema_defaults
from powerlens.pipeline.targets import check_targets


def arch_of(model_or_config) -> str:
    """The powerlens architecture (adapter name) of a transformers model or config, from its model_type."""
    cfg = getattr(model_or_config, "config", model_or_config)
    mt = cfg.get("model_type") if isinstance(cfg, dict) else getattr(cfg, "model_type", None)
    if (a := adapter_of_model_type(mt)) is not None:
        return a.arch
    raise PowerlensError(f"model_type {mt!r} has no powerlens adapter",
                         f"supported: {', '.join(sorted(ADAPTERS))} (model types "
                         f"{', '.join(sorted(a.model_type for a in ADAPTERS.values()))})")


@dataclass
class Spectra:
    """The spectra of every unique layer of one model: ``table`` (the spectra step's table,
    :func:`~powerlens.analysis.spectra.spectra_table`: one row per depth, ``layer`` the depth, ``unique_layer``),
    ``layers[u]`` (a :class:`~powerlens.analysis.spectra.Spectrum`: eigvals sorted by modulus, eigenvectors with a
    canonical phase), ``layer_map`` (depth -> unique layer; ALBERT's layers are one)."""

    layers: list
    layer_map: list[int]
    table: Any

    def __getitem__(self, u: int):
        return self.layers[u]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def eigenvalues(self) -> list[np.ndarray]:
        return [s.eigvals for s in self.layers]

    @property
    def eigenvectors(self) -> list[np.ndarray]:
        """(d, k) complex per unique layer: right eigenvectors of the k leading eigenvalues."""
        return [s.vecs for s in self.layers]

    def __repr__(self) -> str:
        return f"Spectra({len(self.layers)} unique layers)\n" + self.table[
            ["layer", "leading_type", "abs_lambda1", "ratio_next", "gap_beyond_pair"]].to_string(index=False)


def is_gguf(path: Path) -> bool:
    """A GGUF file (llama.cpp's format) by its name or its 4-byte magic."""
    try:
        with open(path, "rb") as f:
            return path.suffix.lower() == ".gguf" or f.read(4) == b"GGUF"
    except OSError:
        return False


def model_location(path_or_id) -> tuple[str, Path | str]:
    """("path", folder) or ("hub", id) for an argument of :meth:`Lens.from_pretrained` / ``powerlens inspect``.

    It is a path, never sent to the hub, when it cannot be a hub id: it starts with ``.``, ``/`` or ``~``, has
    more than one ``/``, or its first part is an existing folder (``results/...``). A run's model folder
    (``results/<run>/<model>``, which holds a manifest.json but no config.json) stands for the weights its
    manifest names. A path that does not exist, or is not a model folder, stops with the reason."""
    s = str(path_or_id)
    p = Path(s).expanduser()
    first = s.split("/", 1)[0]
    looks_like_path = (s.startswith((".", "/", "~")) or s.count("/") > 1 or p.exists()
                       or (first != s and Path(first).expanduser().is_dir()))
    if not looks_like_path:
        return "hub", s
    if not p.exists():
        raise PowerlensError(f"{s!r} is read as a local path (it cannot be a hub id), and it does not exist",
                             "check the path (e.g. results/<run>/<model>, a folder saved by save_pretrained), "
                             "relative to the current folder")
    gguf = [p] if p.is_file() and is_gguf(p) else sorted(p.glob("*.gguf")) if p.is_dir() else []
    if gguf and not (p.is_dir() and (p / "config.json").exists()):
        raise PowerlensError(f"{s!r} is {'a GGUF file' if p.is_file() else 'a folder of GGUF files'} "
                             f"({gguf[0].name}): inspect and Lens read safetensors folders",
                             "run it through the pipeline (a model entry with `source: gguf`), then inspect its "
                             "dequantized folder: results/<run>/<model>")
    if not p.is_dir():
        raise PowerlensError(f"{s!r} is a file, not a model folder",
                             "give the folder that holds config.json and *.safetensors, or a run's model folder "
                             "results/<run>/<model>")
    if not (p / "config.json").exists() and (p / "manifest.json").exists():
        man = read_generated_json(p / "manifest.json", "fetch_model")  # a truncated file: a message, not a trace
        where = man.get("path") if isinstance(man, dict) else None
        if not isinstance(where, str) or not where or not Path(where).is_dir():
            raise PowerlensError(f"{s!r}: its manifest.json names no weights folder that exists ({where!r})",
                                 "re-run the run's fetch step for this model "
                                 "(snakemake ... --forcerun fetch_model), then inspect again")
        return "path", Path(man["path"]).resolve()
    return "path", p.resolve()


def weights_label_of(path_or_id) -> str:
    """The weights label of a run's model folder (its manifest: "random weights" for a twin), else ""."""
    p = Path(str(path_or_id)).expanduser()
    if (p / TWIN_MARKER).is_file():  # a twin, or a matched control ("random layer weights"): the marker says which
        with contextlib.suppress(Exception):
            label = json.loads((p / TWIN_MARKER).read_text(encoding="utf-8")).get("weights_label")
            if isinstance(label, str) and is_random_label(label):
                return label
        return "random weights"
    for man_path in (p / "manifest.json", p.parent / "manifest.json"):  # a run's model folder, or its weights
        with contextlib.suppress(Exception):
            man = json.loads(man_path.read_text(encoding="utf-8"))
            if man_path.parent == p or Path(man.get("path", "")).resolve() == p.resolve():
                return man.get("weights_label", "")
    return ""


def layer_matrices_of(path_or_id, arch: str | None = None, revision: str | None = None):
    """``(description, matrices, layer_map, n_heads)`` of a model for its spectra: the
    :class:`~powerlens.analysis.spectra.LayerMatrices` of every unique layer (no norm gains) and depth ->
    unique layer. A safetensors folder whose adapter names its W_V and W_O (:mod:`powerlens.models.direct`) is
    read without building the model (numpy only); anything else (a hub id, an architecture without names, a
    config.json that leaves out a default, bfloat16 weights) goes through :meth:`Lens.from_pretrained`.
    ``description`` is what ``repr(Lens)`` says of it."""
    from powerlens.analysis.spectra import LayerMatrices
    from powerlens.models.direct import direct_value_output

    kind, where = model_location(path_or_id)
    if kind == "path":
        check_model_dir(where, f"model {str(path_or_id)!r}")
        cfg = json.loads((where / "config.json").read_text(encoding="utf-8"))
        a = arch or arch_of(cfg)
        got = direct_value_output(where, a, cfg)
        if got is not None:
            layers, layer_map, heads = got
            mats = [LayerMatrices(F=W_O @ W_V, V=W_V, W_O=W_O) for W_V, W_O in layers]  # (d, d) float64
            text = (f"Lens({a}, d_model={mats[0].F.shape[0]}, layers={len(layer_map)}, unique={len(mats)}, "
                    f"heads={heads})")
            return text, mats, layer_map, heads
    lens = Lens.from_pretrained(path_or_id, arch=arch, revision=revision, head=False)
    w = lens.weights
    mats = [dataclasses.replace(m, gain=None, post_gain=None) for m in layer_matrices(w)]
    return repr(lens), mats, list(w.layer_map), w.n_heads


class Lens:
    """One transformers model (ALBERT, BERT, GPT-2, GPT-Neo, Llama, Gemma 3) read as power-method steps."""

    def __init__(self, model, tokenizer=None, arch: str | None = None):
        if not (hasattr(model, "config") and callable(getattr(model, "eval", None))):
            raise PowerlensError(f"Lens takes a transformers model, got {type(model).__name__}",
                                 "for a folder or hub id use Lens.from_pretrained(path_or_id)")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.arch = arch or arch_of(model)
        self.adapter = get_adapter(self.arch)
        self.adapter.check(self.adapter.base(model))
        self._weights = None
        self.random_weights = False  # a twin (from_pretrained reads its label): its tests are not extended

    # ---------------------------------------------------------------------------------------- loading
    @classmethod
    def from_pretrained(cls, path_or_id: str | Path, arch: str | None = None, revision: str | None = None,
                        head: bool = True) -> "Lens":
        """A local folder saved by ``save_pretrained`` (config.json + *.safetensors) or a hub id (downloaded
        with huggingface_hub at ``revision``); ``arch`` from config.json's model_type unless given. Loads
        safetensors only, never a model's own code; with ``head`` the LM head too when the checkpoint has one."""
        import transformers

        kind, where = model_location(path_or_id)
        if kind == "path":
            check_model_dir(where, f"model {str(path_or_id)!r}")
            path = where
        else:
            try:
                path = Path(fetch_hf(where, {"repo_id": where, "revision": revision})["path"])
            except PowerlensError as e:
                raise PowerlensError(f"{where!r} was read as a Hugging Face hub id (it is not an existing folder): "
                                     f"{e.problem}", "check the id (org/name), or give a local folder: one saved by "
                                     "save_pretrained, or a run's model folder results/<run>/<model>") from None

        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        arch = arch or arch_of(cfg)
        cls_name = get_adapter(arch).head_class if head and has_lm_head(cfg.get("architectures")) else "AutoModel"
        kw = dict(attn_implementation="eager", use_safetensors=True, local_files_only=True, trust_remote_code=False)

        model = from_pretrained_checked(getattr(transformers, cls_name), str(path), f"model {str(path_or_id)!r}",
                                        "give a folder whose config.json matches its weights (save_pretrained)",
                                        unused=get_adapter(arch).unused_modules, **kw)
        tok = None  # without tokenizer files, dynamics and steering say so (transformers would build a placeholder)
        if has_tokenizer(path):
            with contextlib.suppress(Exception):
                tok = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True,
                                                                 trust_remote_code=False)
        lens = cls(model, tok, arch)
        lens.random_weights = is_random_label(weights_label_of(path))
        return lens

    # ---------------------------------------------------------------------------------------- matrices
    @property
    def weights(self):
        """Every unique layer's matrices (:class:`~powerlens.models.weights.ModelWeights`: ``layers[u].W_Q``, ...,
        ``.F``), extracted by the architecture's adapter exactly as the pipeline's extract step does."""
        if self._weights is None:
            self._weights = self.adapter.extract(self.adapter.base(self.model))
        return self._weights

    def F(self, layer: int) -> np.ndarray:
        """F = W_O W_V of the layer at depth ``layer`` (float64, (d, d))."""
        w = self.weights
        n = len(w.layer_map)
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not -n <= int(layer) < n:
            raise PowerlensError(f"layer {layer!r} is not a depth of this model (it has {n}: 0 to {n - 1})",
                                 f"pass an integer from 0 to {n - 1} (negative counts from the last)")
        return w.layers[w.layer_map[int(layer)]].F.double().numpy()

    # ---------------------------------------------------------------------------------------- analyses
    def spectra(self, k: int | None = None, threads: int = 1, seed: int | None = None) -> Spectra:
        """Eigenvalues (float64, sorted by modulus) and the k leading eigenvectors of every unique F (``k`` and
        ``seed``: the config schema's ``spectra.top_k`` and ``seed`` unless given)."""
        check_options("", seed=seed)  # the pipeline's bounds, with its wording
        d = self.weights.d_model
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= d):
            raise PowerlensError(f"k {k!r} is not a number of leading eigenvectors from 1 to d_model {d}",
                                 "pass an integer k from 1 to d_model, or leave it out (the schema's spectra.top_k)")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise PowerlensError(f"threads {threads!r} is not a positive integer", "pass threads=1 or more")
        defaults = schema_defaults()
        k = defaults["spectra"]["top_k"] if k is None else k
        seed = defaults["seed"] if seed is None else seed
        w = self.weights
        specs = model_spectra(layer_matrices(w), n_heads=w.n_heads, k=k, threads=threads, seed=seed)
        return Spectra(specs, list(w.layer_map), spectra_table(specs, w.layer_map))

    def dynamics(self, prompts: list[str], mode: str = "model", max_tokens: int | None = None,
                 batch_size: int | None = None, steps: int | None = None, null_draws: int | None = None,
                 seed: int | None = None, norm: str | None = None, long_run_prompts: int | None = None,
                 batch_tokens: int | None = None, dtype: str | None = None, bias_free_control: bool | None = None,
                 alpha: float | None = None):
        """Token dynamics over ``prompts``: per depth gamma_t, rho_t and the tilt towards F_t's leading
        direction, each with the Monte Carlo null of random directions (``null_draws`` draws), in ``mode``
        "model" (the real forward pass) or "attention-only" (the paper's law; ``steps`` for shared-weight
        models; past the depth only a seeded sample of ``long_run_prompts`` prompts goes on; ``dtype`` of the
        law; ``bias_free_control`` adds the law without attention biases as ``*_nobias`` columns; ``alpha`` the
        level the tests are decided at, extending the Monte Carlo draws where needed). Every option
        left at None takes the config schema's default (``dynamics:`` and ``seed``), as the pipeline does: the
        same function (:func:`powerlens.analysis.dynamics.analyse`) computes both. Returns the per-layer
        DataFrame the pipeline's dynamics step writes, less its model, mode and weights label columns."""
        from powerlens.analysis.dynamics import MODES, DynamicsOptions, analyse

        if self.tokenizer is None:
            raise PowerlensError("this Lens has no tokenizer (a folder without tokenizer files gives none)",
                                 "save the tokenizer into the model's folder (`tokenizer.save_pretrained(dir)`) or "
                                 "pass one: Lens(model, tokenizer)")
        if mode not in MODES:
            raise PowerlensError(f"unknown dynamics mode {mode!r}", "use mode='model' or mode='attention-only'")
        prompts = check_prompt_list(prompts)
        given = dict(max_tokens=max_tokens, batch_size=batch_size, batch_tokens=batch_tokens, null_draws=null_draws,
                     norm=norm, steps=steps, long_run_prompts=long_run_prompts, dtype=dtype,
                     bias_free_control=bias_free_control, alpha=alpha)
        check_options("dynamics", **given)
        check_options("", seed=seed)
        defaults = schema_defaults()
        opts = {k: defaults["dynamics"][k] if v is None else v for k, v in given.items()}
        opts = DynamicsOptions(mode=mode, seed=defaults["seed"] if seed is None else seed,
                               criteria=defaults["claims"], extend=not self.random_weights, **opts)
        w = self.weights
        specs = self.spectra(seed=opts.seed)
        run = analyse(lambda: self.model, self.adapter, self.tokenizer, prompts,
                      spectra_arrays(specs.layers, list(w.layer_map)), lambda: w, depth=w.n_layers,
                      d_model=w.d_model, options=opts, progress=False)
        return run.table

    @contextlib.contextmanager
    def steer(self, target, kappa: float, kind: str = "embedding", seed: int = 0) -> Iterator[dict]:
        """Rank-1 steering of the last layer, undone on exit: W_O' = W_O + alpha u z^T with V^T z = u and
        alpha = kappa |lambda_1(F_last)|, so u becomes F's principal eigenvector for kappa large enough.
        ``target``: a token (its ``kind`` = embedding or unembedding row), a unit vector (d,), or "random".
        Yields {"u", "scale", "principal"}: the edit's scale alpha = kappa |lambda_1| and the eigen-check of the
        edited F."""
        from powerlens.analysis.steering import principal_check, rank1_output_edit, rank1_z, target_vector

        check_options("steering", kappas=[kappa, 0])  # the pipeline's rule for a kappa: finite, 0 to 1e6
        if not (isinstance(seed, int) and not isinstance(seed, bool)):
            raise PowerlensError(f"seed {seed!r} is not an integer", "pass an integer seed")
        check_options("", seed=seed)
        if isinstance(target, str) and target != "random":
            if kind not in ("embedding", "unembedding"):
                raise PowerlensError(f"unknown target kind {kind!r}", "use kind='embedding' or 'unembedding'")
            self._check_target_token(target, kind)
        w = self.weights
        last = w.layers[w.layer_map[-1]]
        W_V = last.v_per_head().double().numpy()
        F = last.F.double().numpy()
        if isinstance(target, str) and target != "random":
            u, _ = target_vector(self.model, self.tokenizer, self.arch, kind, target, seed, d=w.d_model)
        elif isinstance(target, str):
            u, _ = target_vector(self.model, self.tokenizer, self.arch, "random", None, seed, d=w.d_model)
        else:
            u = np.asarray(target, dtype=np.float64)
            if u.shape != (w.d_model,) or not np.isfinite(u).all() or not np.linalg.norm(u) > 0:
                raise PowerlensError(f"target vector of shape {u.shape} (finite and non-zero: "
                                     f"{bool(np.isfinite(u).all() and np.linalg.norm(u) > 0)})",
                                     f"pass a finite, non-zero vector of shape ({w.d_model},), a token or 'random'")
            u = u / np.linalg.norm(u)
        lam1 = float(np.abs(np.linalg.eigvals(F)).max())
        scale = float(kappa) * lam1
        z = rank1_z(W_V, u)
        with rank1_output_edit(self.model, self.arch, u, z, scale):
            yield {"u": u, "scale": scale, "principal": principal_check(F, W_V, u, scale, None, z)}

    def _check_target_token(self, token: str, kind: str) -> None:
        """The pipeline's check of a steering target (:func:`powerlens.pipeline.targets.check_targets`): one vocabulary
        entry, not the unknown token, an LM head for unembedding targets."""
        if self.tokenizer is None:
            raise PowerlensError("this Lens has no tokenizer to find the token in", "pass one: Lens(model, tokenizer)")
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None:
            return  # a slow tokenizer: target_vector's own checks apply
        from tokenizers import Tokenizer

        core = Tokenizer.from_str(backend.to_str())  # a copy: a saved tokenizer may pad or truncate every call
        core.no_padding()
        core.no_truncation()
        head = has_lm_head([type(self.model).__name__]) or has_lm_head(getattr(self.model.config, "architectures",
                                                                               None))
        check_targets("this Lens", [{"kind": kind, "token": token}], core, head)

    def __repr__(self) -> str:
        cfg = self.model.config
        return (f"Lens({self.arch}, d_model={self.adapter.d_model(cfg)}, layers={len(self.weights.layer_map)}, "
                f"unique={len(self.weights.layers)}, heads={self.adapter.n_heads(cfg)})")

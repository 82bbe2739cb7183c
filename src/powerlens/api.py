"""The Python API: one model seen as power-method steps, in a few lines.

    >>> import powerlens
    >>> lens = powerlens.Lens.from_pretrained("path/to/saved/model")   # or a hub id, or Lens(model)
    >>> lens.spectra().table                     # one row per depth (the spectra step's): lambda_1, type, gap, ...
    >>> lens.spectra()[3].eigvals[:4]            # layer 3's leading eigenvalues (sorted by modulus)
    >>> lens.dynamics(["The cat sat on the mat."])   # gamma_t, rho_t, tilt per layer, with the null
    >>> with lens.steer("water", kappa=16):     # rank-1 change of the last layer's W_O, undone on exit
    ...     model(...)                           # lens.F(-1), lens.spectra() see the edited layer here

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
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from powerlens.analysis.spectra import layer_matrices, model_spectra, spectra_arrays, spectra_table
from powerlens.core.corpus import check_prompt_list
from powerlens.core.errors import PowerlensError
from powerlens.core.fmt import is_random_label
from powerlens.models.adapters import ADAPTERS, adapter_of_model_type, get_adapter
from powerlens.models.archs import has_lm_head
from powerlens.models.locate import is_gguf, model_id_text, model_location, weights_label_of  # noqa: F401  (API)
from powerlens.models.sources import check_model_dir, fetch_hf, from_pretrained_checked, has_tokenizer
from powerlens.models.sources.coverage import check_token_ids
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


def layer_matrices_of(path_or_id, arch: str | None = None, revision: str | None = None):
    """``(description, matrices, layer_map, n_heads)`` of a model for its spectra: the
    :class:`~powerlens.analysis.spectra.LayerMatrices` of every unique layer (no norm gains) and depth ->
    unique layer. A safetensors folder is read without building the model, its W_V and W_O found by the
    architecture's adapter (:mod:`powerlens.models.direct`, numpy only; V = W_V (H d_head, d) with each key-value
    group repeated for its query heads, W_O (d, H d_head), H d_head = d or not); anything else (a hub id, a
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
            mats = [LayerMatrices(F=W_O @ W_V, V=W_V, W_O=W_O) for W_V, W_O in layers]  # F (d, d) float64
            text = (f"Lens({a}, d_model={mats[0].F.shape[0]}, layers={len(layer_map)}, unique={len(mats)}, "
                    f"heads={heads})")
            return text, mats, layer_map, heads
    lens = Lens.from_pretrained(path_or_id, arch=arch, revision=revision, head=False)
    w = lens.weights
    mats = [dataclasses.replace(m, gain=None, post_gain=None) for m in layer_matrices(w)]
    return repr(lens), mats, list(w.layer_map), w.n_heads


def _integer(x, otherwise=None):
    """``x`` as a Python int when it is an integer of any kind (int, numpy.int64, ...: ``operator.index``), else
    ``otherwise``: a bool, a float (3.0 too), a string or None is not a count."""
    if isinstance(x, (bool, np.bool_)):
        return otherwise
    try:
        return operator.index(x)
    except TypeError:
        return otherwise


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
        rows = int(self.adapter.input_embeddings(model).shape[0])  # ids beyond it: IndexError in dynamics (#52)
        check_token_ids(tokenizer, rows, "Lens: the tokenizer given with the model")
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
        seed = _integer(seed, seed)  # numpy integers as ints; anything else as given, for the pipeline's check
        check_options("", seed=seed)  # the pipeline's bounds, with its wording
        d = self.weights.d_model
        if k is not None and not 1 <= _integer(k, 0) <= d:
            raise PowerlensError(f"k {k!r} is not a number of leading eigenvectors from 1 to d_model {d}",
                                 "pass an integer k from 1 to d_model, or leave it out (the schema's spectra.top_k)")
        if _integer(threads, 0) < 1:
            raise PowerlensError(f"threads {threads!r} is not a positive integer", "pass threads=1 or more")
        k, threads = (None if k is None else _integer(k)), _integer(threads)
        defaults = schema_defaults()
        k = defaults["spectra"]["top_k"] if k is None else k
        seed = defaults["seed"] if seed is None else seed
        w = self.weights
        specs = model_spectra(layer_matrices(w), n_heads=w.n_heads, k=k, threads=threads, seed=seed)
        return Spectra(specs, list(w.layer_map), spectra_table(specs, w.layer_map))

    def dynamics(self, prompts: list[str], mode: str = "model", max_tokens: int | None = None,
                 batch_size: int | None = None, steps: int | None = None, null_draws: int | None = None,
                 null_draws_cap: int | None = None, seed: int | None = None, norm: str | None = None,
                 long_run_prompts: int | None = None,
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
        from powerlens.analysis.verdict_tests import decision_rule

        if self.tokenizer is None:
            raise PowerlensError("this Lens has no tokenizer (a folder without tokenizer files gives none)",
                                 "save the tokenizer into the model's folder (`tokenizer.save_pretrained(dir)`) or "
                                 "pass one: Lens(model, tokenizer)")
        if mode not in MODES:
            raise PowerlensError(f"unknown dynamics mode {mode!r}", "use mode='model' or mode='attention-only'")
        prompts = check_prompt_list(prompts)
        given = dict(max_tokens=max_tokens, batch_size=batch_size, batch_tokens=batch_tokens, null_draws=null_draws,
                     null_draws_cap=null_draws_cap,
                     norm=norm, steps=steps, long_run_prompts=long_run_prompts, dtype=dtype,
                     bias_free_control=bias_free_control, alpha=alpha)
        check_options("dynamics", **given)
        check_options("", seed=seed)
        defaults = schema_defaults()
        opts = {k: defaults["dynamics"][k] if v is None else v for k, v in given.items()}
        rule = decision_rule(defaults["claims"], opts.pop("alpha"), opts.pop("null_draws_cap"))
        opts = DynamicsOptions(mode=mode, seed=defaults["seed"] if seed is None else seed, criteria=rule,
                               extend=not self.random_weights, **opts)
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
        edited F. Inside, the lens's own matrices (:meth:`F`, :meth:`spectra`, :meth:`dynamics`) are the edited
        model's, F' = F + alpha u (V^T z)^T; on exit the unedited ones."""
        from powerlens.analysis.steering import principal_check, rank1_output_edit, rank1_z, target_vector

        check_options("steering", kappas=[kappa, 0])  # the pipeline's rule for a kappa: finite, 0 to 1e6
        seed = _integer(seed, seed)  # numpy integers too
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
        check = principal_check(F, W_V, u, scale, None, z)
        with rank1_output_edit(self.model, self.arch, u, z, scale), self._edited_last_layer():
            yield {"u": u, "scale": scale, "principal": check}

    @contextlib.contextmanager
    def _edited_last_layer(self) -> Iterator[None]:
        """While the model's last layer is edited in place, :attr:`weights` (so :meth:`F`, :meth:`spectra`,
        :meth:`dynamics`) reads the edited layer: F_t = W_O' V_t changes with W_O, and the matrices extracted
        before the edit would describe a model that is not the one running. Only the last unique layer is read
        again (ALBERT's one layer is every depth's, as the edited module is); on exit the unedited matrices,
        untouched, are back."""
        w = self.weights
        last = w.layer_map[-1]
        key = self.adapter.layer_map(self.model.config)[-1]
        edited = self.adapter.extract_unique(self.adapter.base(self.model), key)
        self._weights = dataclasses.replace(w, layers=[edited if u == last else lw for u, lw in enumerate(w.layers)])
        try:
            yield
        finally:
            self._weights = w

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

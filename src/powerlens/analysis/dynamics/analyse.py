"""The dynamics analysis, once: the function the API (:meth:`powerlens.api.Lens.dynamics`), the pipeline's
dynamics step, the quantization step and the benchmark all call, so that they cannot disagree. Callers add
only reading and writing; every option's default lives in the config schema (``dynamics:`` and ``seed``)."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import torch

from powerlens.analysis.dynamics.decided import VARIANTS, decide_run, layer_columns
from powerlens.analysis.dynamics.directions import LayerDirections, layer_directions
from powerlens.analysis.dynamics.per_depth import layer_stats, lead_nulls
from powerlens.analysis.dynamics.runs import long_run_subset, null_sets, run_attention_only, run_model_mode
from powerlens.analysis.nulls import counting_projections, tie_uniform
from powerlens.analysis.verdict_tests import CONTROL_SUFFIX, GAMMA, RHO, TILT, Field, Sums, control_spec
from powerlens.core.corpus import Batch, prompt_batches
from powerlens.core.errors import PowerlensError
from powerlens.core.scratch import reusing_scratch

if TYPE_CHECKING:
    import pandas as pd

    from powerlens.models.weights import ModelWeights

MODES = ("model", "attention-only")


@dataclass(frozen=True, kw_only=True)
class DynamicsOptions:
    """One dynamics run's options (config keys ``dynamics.<name>``; ``seed`` and ``device`` are top-level).
    ``batch_tokens`` None: no bound on a batch's padded tokens (the quantization step's batches)."""

    mode: str
    norm: str
    steps: int
    long_run_prompts: int
    batch_size: int
    batch_tokens: int | None
    max_tokens: int
    dtype: str
    null_draws: int
    bias_free_control: bool
    seed: int
    criteria: dict  # the decision rule (:func:`~powerlens.analysis.verdict_tests.decision_rule`): the claims'
    # numbers (which counts of layers the criteria read: R0, extension), alpha and the draw cap
    robustness: bool = False
    extend: bool = True  # extend undecided Monte Carlo tests (off for random weights: never evidence)
    device: str = "cpu"

    @property
    def variants(self) -> tuple[str, ...]:
        """The main statistics, and with ``robustness`` the six variants of table_robustness (paper.md
        section 4c): three other Monte Carlo seeds, three disjoint thirds of the corpus."""
        return VARIANTS if self.robustness else ("main",)


@dataclass(frozen=True, kw_only=True)
class DynamicsRun:
    """What one run measured: the per-depth table, the per-token arrays and the corpus' accounting."""

    table: "pd.DataFrame"  # one row per depth (the step's dynamics-<mode>.csv less its label columns)
    robustness: "pd.DataFrame"  # the verdict statistics of each robustness variant (column ``variant``)
    arrays: dict[str, np.ndarray]  # per-token alignments and per-depth sums (the step's .npz)
    directions: list[LayerDirections]
    batches: list[Batch]
    ids: list[list[int]]
    special: list[list[int]]
    truncated: int
    max_len: int
    n_steps: int
    long_run_subset: list[int] | None
    null_flops: float  # the Monte Carlo null's projections, as counted (:func:`counting_projections`)


def analyse(load_model: Callable[[], torch.nn.Module], adapter, tokenizer, prompts: list[str], spectra: dict,
            load_weights: Callable[[], "ModelWeights"], *, depth: int, d_model: int, options: DynamicsOptions,
            progress: bool = True) -> DynamicsRun:
    """Token dynamics over ``prompts`` in ``options.mode``: per depth gamma_t, rho_t and the tilt towards each
    layer's leading directions (``spectra``: arrays as the spectra step writes them), each against the Monte
    Carlo null of random subspaces; attention-only mode also runs the bias-free control if asked.

    ``load_model`` gives the model (its LM head, if any, is stripped); in attention-only mode it is dropped
    after the embeddings x(0) of every batch are taken, before ``load_weights`` gives the extracted attention
    matrices, so the peak memory is the larger of the two, not their sum."""
    o = options
    if o.mode not in MODES:
        raise PowerlensError(f"unknown dynamics mode {o.mode!r}", "use `model` or `attention-only`")
    # every Monte Carlo projection counted for the speed table's bound; the null's scratch buffers kept per step
    with counting_projections() as count, reusing_scratch():
        model = adapter.base(load_model())
        max_len = min(int(o.max_tokens), adapter.max_positions(model.config))
        bs, ids, special, truncated = prompt_batches(list(prompts), tokenizer, max_len, o.batch_size, o.batch_tokens)
        dirs = layer_directions(spectra, o.seed)
        nulls = null_sets(int(d_model), dirs, int(o.null_draws), o.seed, o.device)
        n_prompts, n_steps, subset, ctrl = len(prompts), int(depth), None, None
        if o.mode == "model":
            layer_of = adapter.depth_to_unique(model.config)
            arr = run_model_mode(model, adapter, dirs, bs, n_prompts, nulls, device=o.device, progress=progress)
            del model
        else:
            with torch.no_grad():
                x0s = [adapter.embed(model, b.ids.to(o.device)).cpu() for b in bs]  # (B, T, d) per batch
            del model
            gc.collect()
            w = load_weights()
            layer_of = w.layer_map
            n_steps = int(o.steps) if w.shared else w.n_layers
            if n_steps > w.n_layers:
                subset = long_run_subset(n_prompts, int(o.long_run_prompts), o.seed)
            kw = dict(norm=o.norm, device=o.device, dtype=getattr(torch, o.dtype), progress=progress)
            arr = run_attention_only(x0s, w, dirs, bs, n_steps, n_prompts, nulls, long_run_prompts=subset, **kw)
            if o.bias_free_control:
                ctrl = run_attention_only(x0s, w, dirs, bs, min(n_steps, w.n_layers), n_prompts, nulls, control=True,
                                          **kw)
            del w, x0s
        table, robust, mc = _tables(arr, ctrl, dirs, layer_of, o)
    return DynamicsRun(table=table, robustness=robust, arrays={**arr, **mc}, directions=dirs, batches=bs, ids=ids,
                       special=special, truncated=truncated, max_len=max_len, n_steps=n_steps,
                       long_run_subset=subset, null_flops=count.flops)


def verdict_table(arr, dirs, layer_of, *, mode: str, criteria: dict, seed: int, r0: int,
                  variants: tuple[str, ...] = ("main",), extend: bool = True):
    """The per-depth table of one run: the values of its sums (:func:`layer_stats`: every depth, a long run's
    later steps included) with the decided tests of F's lead
    (:func:`~powerlens.analysis.dynamics.decided.decide_run`: the random-direction null, the lead's rank among
    F's other eigen-directions, draws where the criteria of ``mode`` can move). The tests own the model's own
    depths: there a tested statistic's value is the tests' (measured on the kept states), past them the sums'
    (no test). Also the robustness variants' frames and the main tests' first R0 draws (``null_<q>_lead``)."""
    import pandas as pd

    table = layer_stats(arr, dirs, seed=seed).set_index("layer")
    frames, mc = decide_run(arr.states, dirs, lambda t: layer_of[t % len(layer_of)], mode=mode, crit=criteria,
                            seed=seed, r0=r0, variants=variants, extend=extend)
    tests = frames.pop("main").set_index("layer")
    values = [c for c in tests.columns if c in table.columns]  # the tested statistics' values
    table.loc[tests.index, values] = tests[values]
    return pd.concat([table, tests.drop(columns=values).reindex(table.index)], axis=1).reset_index(), frames, mc


#: The bias-free control's columns (suffix ``_nobias``): its lead's gamma, rho and tilt, each tested against
#: the random directions as the main run's are (:func:`~powerlens.analysis.dynamics.decided.layer_columns`),
#: with these fields; then its secondary tests and Holm's adjusted p
_CONTROL_TESTS = (GAMMA, RHO, TILT)
_CONTROL_FIELDS = (Field.NULL_MEDIAN, Field.NULL_Q95, Field.PCT, Field.P, Field.TIES, Field.SATURATED)
_CONTROL_SECONDARY = Sums.SECONDARY


def control_table(ctrl, dirs, *, seed: int, alpha: float):
    """The bias-free control's columns (:data:`_CONTROL_FIELDS`, suffix ``_nobias``) at each of its depths: the
    control keeps no states, so its lead is tested against the Accumulator's first R draws (the main stream's)."""
    import pandas as pd

    c = layer_stats(ctrl, dirs, seed=seed)
    depths = c["layer"].to_list()
    out = {"layer": depths}
    holm = {}
    draws = [lead_nulls(ctrl, i) for i in range(len(depths))]  # per depth: each statistic's draws
    for base in _CONTROL_TESTS:
        spec = control_spec(base)
        values = c[base.value].to_numpy(dtype=float)
        nulls = [d[spec.stat] for d in draws]
        us = [tie_uniform(seed, t, spec.prefix) for t in depths]  # the main run's keys: the same tie-breaks
        cols = layer_columns(spec, values, nulls, None, us, us, alpha)
        out[spec.value] = values
        for f in _CONTROL_FIELDS:  # no test where the lead's value is undefined (a depth without a change)
            out[spec.col(f)] = [np.nan if np.isnan(v) else r[spec.col(f)] for v, r in zip(values, cols)]
        holm[spec.col(Field.P_HOLM)] = [r[spec.col(Field.P_HOLM)] for r in cols]
    out.update({k + CONTROL_SUFFIX: c[k] for k in _CONTROL_SECONDARY if k in c})
    return pd.DataFrame({**out, **holm})


def _tables(arr, ctrl, dirs, layer_of, o: DynamicsOptions):
    """The per-depth table (the run's values, the decided tests of F's lead with both nulls, the bias-free
    control's columns), the robustness variants' tests, and the main tests' first R draws."""
    import pandas as pd

    table, frames, mc = verdict_table(arr, dirs, layer_of, mode=o.mode, criteria=o.criteria, seed=o.seed,
                                      r0=int(o.null_draws), variants=o.variants, extend=o.extend)
    if ctrl is not None:
        table = table.merge(control_table(ctrl, dirs, seed=o.seed, alpha=o.criteria["alpha"]), on="layer",
                            how="left")
    robust = (pd.concat([f.assign(variant=v) for v, f in frames.items()], ignore_index=True) if frames else
              pd.DataFrame({"variant": [], "layer": []}))
    return table, robust, mc

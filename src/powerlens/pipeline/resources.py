"""Job resources (``mem_mb``, ``runtime``) fitted from measured ``benchmark:`` files.

Each heavy rule's cost is a straight line in one size term of the model, fitted by non-negative least
squares (in relative error; the intercept then raised just enough to cover every measured job) to the rule's Snakemake
benchmark files (``max_rss`` in MB, ``s`` in seconds) from twin runs:

=================  ===========================  ==============================================================
rule               memory term                  time term
=================  ===========================  ==============================================================
fetch_model        params                       params
extract            params                       params
check_extraction   params                       params
spectra            d_model**2 * (n_unique + 10) n_unique_layers * d_model**3   (one eigen-solve per layer)
dynamics (model)   params                       forward_params * tokens        (FLOPs / 2 of the forward pass)
dynamics (attn)    params                       attention_params * steps * tokens
steering           params                       the step's multiply-adds (:func:`steering_work`)
=================  ===========================  ==============================================================

``params`` is the stored parameter count (ALBERT's shared layer once), ``forward_params`` the parameters a
token meets on its way through (ALBERT's layer once per depth), ``attention_params`` the four attention
matrices of one layer. ``tokens`` is an upper bound from the corpus (UTF-8 bytes per prompt + 2 special
tokens, capped at ``max_tokens``): exact for the byte-level tokenizer of the tiny test twins, about 4x above
real tokenizers and the paper twins' stand-ins, so those get more time than they need. Fitted lines are scaled by a
safety margin
(:data:`MARGIN`) and stored in ``workflow/resources.yaml`` with the measurements they came from
(``workflow/resources_measured.tsv``); ``scripts/fit_resources.py`` refits both. On top of the line, what it
cannot see (:func:`job_requests`, the one place a job's request is made): the corpus' own costs in dynamics
(:data:`CORPUS`), long shared-weight runs (:data:`LONG_RUN`), the robustness variants of trained models
(:data:`ROBUSTNESS_RUNTIME_FACTOR`) and steering's cost per target and kappa (:data:`STEERING_SETTING`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from powerlens.analysis.kappa_sweep import most_kappas
from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import get_adapter
from powerlens.models.archs import ArchConfig, twin_config
from powerlens.models.sources import random_weights
from powerlens.pipeline.config import model_arch, steering_targets

#: Trained models' dynamics with ``dynamics.robustness`` (3 more Monte Carlo streams, 3 corpus thirds, the
#: eigen-direction null, sublayer probes and the extension of undecided tests, paper.md section 4c): their
#: runtime is the fitted line (measured without them) times this. Measured on the offline decoders (2 cores,
#: shared machine, #38): 2.3x (Gemma 3 model mode) to 7.3x (SmolLM2 model mode) the revision-3 step.
ROBUSTNESS_RUNTIME_FACTOR = 8

#: Safety margin applied to fitted lines: memory x1.2 + 300 MB, time x1.5 + 60 s (then whole minutes).
MARGIN = {"mem_mb": (1.2, 300.0), "runtime_s": (1.5, 60.0)}

#: What a size line misses in long shared-weight runs (``dynamics.steps`` past the model's depth), added on
#: top of the fitted attention-only line (then the margin): measured on the 2-core machine on the tiny-albert
#: twin (24 prompts in 2 batches, 2000 vs 10000 steps: 16.5 s / 471 MB vs 63.5 s / 512 MB), each step costs
#: about 3 ms per batch whatever the model's size (Python and kernel-launch overhead) and 5.2 KB of memory
#: (its row of per-depth sums and statistics, which the outputs keep: CSV 0.28 KB and npz 0.42 KB a step).
LONG_RUN = {"runtime_s_per_step_batch": 0.003, "mem_mb_per_step": 0.0052}

#: Steering's parts in one unit, a multiply-add of the float32 forward pass, from the 2-core machine
#: (albert-xxlarge-v2 twin, d = 4096: a whole-stack pass about 53 G multiply-adds/s; the float64
#: attention-only law about 2.5x slower per multiply-add; an eigen-check (eigenvalues 16.0 s, plus an LU
#: factorisation for the leading vector) about 13 d^3 in that unit, the least-squares z per target about as
#: much, the 2-norm's SVD 13.4 s, about 10 d^3).
STEERING_COSTS = {"law_float64": 2.5, "eig_d3": 13.0, "lstsq_d3": 13.0, "svd_d3": 10.0}

#: The fitted entries of workflow/resources.yaml: each is a step's name (the rule's), dynamics' one per mode
#: (its ``mode`` wildcard after the name), with the step and wildcards whose benchmark files it is fitted to.
JOB_KINDS = {"fetch_model": ("fetch_model", {}), "extract": ("extract", {}),
             "check_extraction": ("check_extraction", {}), "spectra": ("spectra", {}),
             "dynamics_model": ("dynamics", {"mode": "model"}),
             "dynamics_attention-only": ("dynamics", {"mode": "attention-only"}), "steering": ("steering", {})}
RULES = tuple(JOB_KINDS)


@dataclass(frozen=True)
class Size:
    """The size terms of one architecture."""

    params: int
    forward_params: int
    attention_params: int  # one layer's W_Q, W_K, W_V, W_O and biases
    n_layers: int
    n_unique_layers: int
    d_model: int
    vocab: int = 0  # the vocabulary: the LM head's rows

    @property
    def eig_work(self) -> float:
        return float(self.n_unique_layers) * float(self.d_model) ** 3


def size_of(arch: ArchConfig) -> Size:
    """Size terms from the config alone (no weights built): the architecture's adapter knows them."""
    k = arch.kwargs
    t = get_adapter(arch.arch).size_terms(k)
    return Size(params=t["params"], forward_params=t["n_layers"] * t["layer_params"],
                attention_params=t["attention_params"], n_layers=t["n_layers"],
                n_unique_layers=t["n_unique_layers"], d_model=t["d_model"], vocab=int(k.get("vocab_size", 0)))


def corpus_tokens(prompts: list[str], max_tokens: int) -> int:
    """Upper bound on a corpus' token count: UTF-8 bytes + 2 special tokens per prompt, capped."""
    return sum(min(int(max_tokens), len(p.encode("utf-8")) + 2) for p in prompts)


def steering_work(size: Size, *, tokens: int, kappas: list[float], targets: int, shared_edit: str) -> float:
    """The steering step's work in multiply-adds of the float32 forward pass (:data:`STEERING_COSTS`), as
    :func:`powerlens.analysis.steering.run_steering` does it, with K kappas of which K+ are not 0:

    - model passes: targets x (1 + 2 K+) of them (unsteered, rank-1 edit, baseline). A shared layer edited at
      every depth runs the whole stack each time; otherwise one whole pass, the rest re-run the last depth;
    - the float64 attention-only law: the unedited depths once, the first edited depth's attention once,
      then two runs (edit, baseline) through the other edited depths per target and non-zero kappa, and one
      unedited run for kappa 0 (:class:`powerlens.analysis.steering.LawCache`);
    - eigen-checks: one of F for kappa 0, one per target and non-zero kappa; the least-squares z per target;
      the SVD for ||F||_2."""
    k_all = len(kappas)
    k_on = sum(1 for k in kappas if k != 0)
    c = STEERING_COSTS
    whole_stack = size.n_unique_layers < size.n_layers and shared_edit == "every_depth"
    edited = size.n_layers if whole_stack else 1
    passes = targets * (1 + 2 * k_on)
    layer = size.forward_params / size.n_layers
    model = float(tokens) * (passes * size.forward_params if whole_stack else
                             size.forward_params + (passes - 1) * layer)
    runs = targets * k_on * 2 + (1 if k_on < k_all else 0)
    law = float(tokens) * size.attention_params * c["law_float64"] * (size.n_layers - edited + 1 + runs * (edited - 1))
    eig = float(size.d_model) ** 3 * (c["eig_d3"] * (targets * k_on + (1 if k_on < k_all else 0))
                                      + c["lstsq_d3"] * targets + c["svd_d3"])
    return model + law + eig


def time_term(rule: str, size: Size, *, tokens: int, steps: int, kappas: list[float], targets: int,
              shared_edit: str) -> float:
    """The size term a rule's run time is proportional to (see the module docstring)."""
    if rule == "spectra":
        return size.eig_work
    if rule == "dynamics_model":
        return float(size.forward_params) * tokens
    if rule == "dynamics_attention-only":
        n = steps if size.n_unique_layers < size.n_layers else size.n_layers
        return float(size.attention_params) * n * tokens
    if rule == "steering":
        return steering_work(size, tokens=tokens, kappas=kappas, targets=targets, shared_edit=shared_edit)
    return float(size.params)


#: Floating-point operations of a general (nonsymmetric) eigen-decomposition of an n x n matrix, eigenvalues
#: only (Hessenberg reduction and the Francis QR steps; Golub and Van Loan, "Matrix Computations", 7.5.6):
#: the least any eigen-solve does, so a lower bound for the spectra step and steering's eigen-checks.
EIG_FLOPS_N3 = 10.0


def arithmetic(rule: str, size: Size, *, tokens: int, steps: int, kappas: list[float], targets: int,
               shared_edit: str, null_draws: int, head: bool = False, generated: int = 0,
               null_flops: float | None = None, passes: dict | None = None, settings: int | None = None
               ) -> dict[str, float]:
    """The floating-point operations a step cannot avoid, by dtype (``{"float32": ..., "float64": ...}``): at
    the measured matrix-product peak of each dtype, their time is the step's arithmetic lower bound (the
    benchmark prints it beside the wall time). Counted: the matrix products of the forward passes (2 flops per
    multiply-add of ``forward_params`` per token), the attention-only law's four attention matrices per step,
    the Monte Carlo null's projections (``null_flops``: as the dynamics step counted them, every draw of every
    stream, dimension and state; None, a run that predates the count: an estimate of the first R draws of
    dimension 1 before and after each layer, which undercounts), one eigenvalue solve per unique layer
    (:data:`EIG_FLOPS_N3`); in steering with an LM head (``head``), the head over the vocabulary on every
    counted token of every pass (2 d V flops a token), and per greedily generated token (``generated``, both
    methods together) one forward pass with the head (the prompts' prefill not counted). Steering's passes:
    ``passes``, the step's own count (:class:`powerlens.analysis.steering.experiment.PassWork`: tokens through
    the whole model, through the last depth alone, through the head; both prompt sets, every setting and the
    beta sweep); None, a run that predates the count: the settings' passes over the steering prompts alone (too
    low: the unrelated prompts' KL passes and the beta sweep are missing); not counted:
    ``settings``: the (target, non-zero kappa) pairs steering ran (revision 6 doubles kappa per target; None:
    ``targets`` x the non-zero ``kappas``); not counted: attention scores, norms, Python overhead, file reading
    and writing (so a ratio near 1 is out of reach)."""
    d = float(size.d_model)
    null = (float(null_flops) if null_flops is not None else  # the estimate: per depth, x(t) and x(t + 1)
            2.0 * 2 * null_draws * d * tokens * size.n_layers)  # against R directions of dimension 1
    if rule == "spectra":
        return {"float64": EIG_FLOPS_N3 * size.eig_work}
    if rule == "dynamics_model":
        return {"float32": 2.0 * size.forward_params * tokens, "float64": null}
    if rule == "dynamics_attention-only":
        n = steps if size.n_unique_layers < size.n_layers else size.n_layers
        return {"float32": 2.0 * size.attention_params * n * tokens, "float64": null}
    if rule == "steering":
        k_on = sum(1 for k in kappas if k != 0)
        pairs = targets * k_on if settings is None else int(settings)
        whole_stack = size.n_unique_layers < size.n_layers and shared_edit == "every_depth"
        n_passes = targets + 2 * pairs
        layer = size.forward_params / size.n_layers
        if passes is None:  # the estimate: the settings' passes over the steering prompts
            model = 2.0 * tokens * (n_passes * size.forward_params if whole_stack else
                                    size.forward_params + (n_passes - 1) * layer)
            lm = 2.0 * tokens * d * size.vocab * n_passes if head else 0.0  # logits of every token of every pass
        else:  # as the step counted them
            model = 2.0 * (float(passes["whole"]) * size.forward_params + float(passes["last_depth"]) * layer)
            lm = 2.0 * float(passes["head"]) * d * size.vocab if head else 0.0
        edited = size.n_layers if whole_stack else 1
        runs = pairs * 2 + (1 if k_on < len(kappas) else 0)
        law = 2.0 * tokens * size.attention_params * (size.n_layers - edited + 1 + runs * (edited - 1))
        eig = EIG_FLOPS_N3 * d ** 3 * (pairs + (1 if k_on < len(kappas) else 0))
        gen = 2.0 * generated * (size.forward_params + d * size.vocab)  # one token: the stack and the head
        return {"float32": model + lm + gen, "float64": law + eig}
    return {}


def mem_term(rule: str, size: Size) -> float:
    """The size term a rule's peak memory is proportional to: the parameter count, except for spectra
    (float64 F per unique layer plus LAPACK workspace: d_model**2 * (n_unique_layers + 10))."""
    if rule == "spectra":
        return float(size.d_model) ** 2 * (size.n_unique_layers + 10)
    return float(size.params)


def predict(coeffs: dict, rule: str, params: float, term: float, extra: tuple[float, float] = (0.0, 0.0),
            factor: float = 1.0) -> dict[str, int]:
    """``mem_mb`` and ``runtime`` (minutes) of one job: the fitted line (its time times ``factor``) plus
    ``extra`` = (MB, s) (see :func:`job_extras`), times the margin. ``params`` is the rule's memory term
    (:func:`mem_term`), ``term`` its time term (:func:`time_term`)."""
    c = coeffs[rule]
    fm, am = MARGIN["mem_mb"]
    ft, at = MARGIN["runtime_s"]
    mem = fm * (c["mem_mb"]["a"] + c["mem_mb"]["b"] * params + extra[0]) + am
    sec = ft * (factor * (c["runtime_s"]["a"] + c["runtime_s"]["b"] * term) + extra[1]) + at
    return {"mem_mb": int(math.ceil(mem / 100.0) * 100), "runtime": max(1, int(math.ceil(sec / 60.0)))}


#: Dynamics' costs that grow with the corpus beyond the fitted line (which was measured on corpora of 24 and
#: 220 prompts, where they hide in its intercept). Memory: the verdict statistics project every counted token's
#: kept states on a chunk of random directions at a time (:data:`powerlens.analysis.decisions.CHUNK`
#: draws: the alignments before and after the layer, their difference and comparisons, about 5 float64 arrays
#: of tokens x chunk), beside the kept states themselves (2 L + 1 vectors of d per token); the chunk is R0 wide
#: at first and CHUNK wide once a test is extended, so the request counts CHUNK. Measured (#52) on the 2-core
#: machine, one thread: the tiny-bert twin (d 32, 2 layers), model mode, R 2000, 24 vs 1100 prompts (1075 vs
#: 49230 tokens): 4.8 s / 544 MB vs 82.7 s / 4292 MB: 78 KB and 1.6 ms per token (5 x 8 B x 2000 = 80 KB; the
#: earlier term, 16 B x R x (layers + 1), asked 96 KB here and grew with depth, which the job no longer does).
#: Time: 1 ms per depth plus 1.1 ns per null value (layers x d x R x streams; #39: 2.0 ms per token on tiny-bert,
#: 24.6 ms on MiniLM with robustness). Both applied to the tokens the model's own tokenizer makes of the corpus
#: where it is on disk (:func:`model_tokens`; the byte bound :func:`corpus_tokens` was about 3.4x high for
#: MiniLM, so a 50,000-prompt corpus asked about 10x what it took).
CORPUS = {"arrays_per_token_chunk": 5, "s_per_token_depth": 1.0e-3, "s_per_null_value": 1.1e-9}


def model_tokens(m: dict, prompts: list[str], max_tokens: int) -> int:
    """The corpus' token count as the dynamics step makes it (special tokens included, cut at ``max_tokens``),
    with the model's own tokenizer where it is on disk before the fetch (a twin's, a local folder's or a
    package's: :func:`powerlens.pipeline.targets.tokenizer_on_disk`); else the byte bound :func:`corpus_tokens`
    (above any tokenizer's count but a byte-level one's, which it equals)."""
    from powerlens.pipeline.targets import tokenizer_on_disk

    try:
        found = tokenizer_on_disk(m, None)
        if found is None:
            return corpus_tokens(prompts, max_tokens)
        return sum(min(int(max_tokens), len(e.ids)) for e in found[0].encode_batch(list(prompts)))
    except Exception:  # an unreadable tokenizer is the fetch step's to name: size by the bound meanwhile
        return corpus_tokens(prompts, max_tokens)


def corpus_extra(config: dict, name: str, prompts: list[str], tokens: int | None = None) -> tuple[float, float]:
    """(MB, s) of :data:`CORPUS` for one model's dynamics job (either mode); ``tokens``: the corpus' tokens
    (:func:`model_tokens`, counted once per model by :func:`job_requests`)."""
    from powerlens.analysis.decisions import CHUNK  # numpy only: the DAG never imports torch

    m = config["models"][name]
    size = size_of_entry(name, m, config["models"])
    dyn = config["dynamics"]
    tokens = float(model_tokens(m, prompts, dyn["max_tokens"]) if tokens is None else tokens)
    R, L, streams = int(dyn["null_draws"]), size.n_layers, 4 if robust(config, name) else 1
    per_token = 8.0 * (CORPUS["arrays_per_token_chunk"] * CHUNK + (2 * L + 1) * size.d_model)
    mem = tokens * per_token / 1e6
    sec = tokens * L * (CORPUS["s_per_token_depth"] + CORPUS["s_per_null_value"] * size.d_model * R * streams)
    return mem, sec


#: Steering's costs per setting that its fitted line cannot see (measured with 3 kappas, where they hide in the
#: intercept): every target and non-zero kappa re-runs the steering batches (edit and baseline), each a fixed
#: overhead per batch and depth re-run (hooks, Python, the law's step, the eigen-check of a tiny layer) whatever
#: the model's size, and adds two result rows. Measured on the 2-core machine (24 prompts in 2 batches, one
#: thread, 3 vs 203 and 403 kappas): tiny-gpt2 (last depth re-run, 2 targets) 0.035 s per target and kappa,
#: 8.8 ms per batch-pass; tiny-albert (3 shared depths re-run, 1 target) 0.12 s, 10 ms per batch-pass and depth;
#: no visible growth of the peak memory at 800 rows, and 2.3 KB per row at 100,000 rows (dicts, the frame, the
#: CSV). So 50,000 kappas no longer ask for what 3 do.
STEERING_SETTING = {"s_per_batch_pass_depth": 0.012, "kb_per_row": 3.0}


def planned_kappas(config: dict) -> list[float]:
    """The kappas a steering job may run: the configured ones and revision 6's doublings up to C9_kappa_cap."""
    return most_kappas(config["steering"]["kappas"], config["claims"]["C9_kappa_cap"])


def steering_extra(config: dict, name: str, prompts: list[str]) -> tuple[float, float]:
    """(MB, s) of :data:`STEERING_SETTING` for one model's steering job: targets x non-zero kappas x 2 passes
    (edit, baseline) over the steering batches, each re-running the whole stack (a shared layer edited at every
    depth) or the last depth; two rows per target and kappa. The kappas are :func:`planned_kappas`: every
    doubling revision 6 may add, so a request holds whatever the doubling runs (the fitted line saw the
    configured kappas only)."""
    size = size_of_entry(name, config["models"][name], config["models"])
    st = config["steering"]
    settings = len(steering_targets(config, name)) * sum(1 for k in planned_kappas(config) if k != 0)
    batches = math.ceil(min(len(prompts), int(st["max_prompts"])) / int(st["batch_size"]))
    whole_stack = size.n_unique_layers < size.n_layers and st["shared_edit"] == "every_depth"
    depths = size.n_layers if whole_stack else 1
    return (settings * 2 * STEERING_SETTING["kb_per_row"] / 1000.0,
            settings * 2 * batches * depths * STEERING_SETTING["s_per_batch_pass_depth"])


def robust(config: dict, name: str) -> bool:
    """Does this model's dynamics run the robustness variants (trained models, ``dynamics.robustness``)?"""
    return bool(config["dynamics"]["robustness"]) and not random_weights(config["models"][name])


def job_requests(coeffs: dict, config: dict, name: str, prompts: list[str]) -> dict[str, dict[str, int]]:
    """Every per-model rule's request for one config entry: the fitted line of :func:`job_terms`, the
    robustness factor on trained models' dynamics (:data:`ROBUSTNESS_RUNTIME_FACTOR`), the corpus' own costs
    (:func:`corpus_extra`), long shared-weight runs (:func:`long_run_extra`) and steering's settings
    (:func:`steering_extra`). Rule -> {mem_mb, runtime}."""
    out = {}
    tokens = model_tokens(config["models"][name], prompts, config["dynamics"]["max_tokens"])
    for rule, (params, term) in job_terms(config, name, prompts).items():
        extra, factor = (0.0, 0.0), 1.0
        if rule.startswith("dynamics"):
            extra = corpus_extra(config, name, prompts, tokens)
            if rule == "dynamics_attention-only":
                lr = long_run_extra(config, name, prompts)
                extra = (extra[0] + lr[0], extra[1] + lr[1])
            factor = ROBUSTNESS_RUNTIME_FACTOR if robust(config, name) else 1.0
        elif rule == "steering":
            extra = steering_extra(config, name, prompts)
        out[rule] = predict(coeffs, rule, params, term, extra, factor)
    return out


#: The largest request a plan may make for one job: beyond any machine or cluster partition this pipeline
#: is meant for (the largest paper model asks about 15 GB and about an hour). A config whose sizes imply
#: more than this is wrong, not large.
PLAN_LIMITS = {"mem_mb": 2_000_000, "runtime": 60 * 24 * 14}


def check_plan(requests: dict[str, dict[str, dict[str, int]]]) -> None:
    """Refuse a plan in which one job's request (``requests``: model -> :func:`job_requests`) passes
    :data:`PLAN_LIMITS`, naming the model, the step and the request, before any job runs."""
    for name, per_rule in requests.items():
        for rule, got in per_rule.items():
            over = [k for k in PLAN_LIMITS if got[k] > PLAN_LIMITS[k]]
            if over:
                raise PowerlensError(
                    f"model {name!r}: its {rule} job would ask for {got['mem_mb'] / 1000:.3g} GB and "
                    f"{got['runtime'] / 60:.3g} hours (more than the {PLAN_LIMITS['mem_mb'] / 1000:.0f} GB / "
                    f"{PLAN_LIMITS['runtime'] / 60:.0f} hours any job of this pipeline may ask)",
                    "check the model's sizes (config.json: layers, hidden size, vocabulary) and the config's "
                    "dynamics.steps, prompts and steering settings")


def load_coefficients(path: str | Path) -> dict:
    import yaml

    return yaml.safe_load(Path(path).read_text())["rules"]


def size_of_entry(name: str, m: dict, models: dict | None = None) -> Size:
    """Size terms of a config entry (``models``: the run's entries, for a matched control's architecture); an
    architecture unknown before its fetch gets gpt-neo-2.7B's (the largest paper model: generous, never too
    small)."""
    arch = model_arch(name, m, models)
    try:
        return size_of(arch)
    except (KeyError, TypeError, AttributeError):
        return size_of(twin_config("gpt-neo-2.7B"))


def long_run_extra(config: dict, name: str, prompts: list[str]) -> tuple[float, float]:
    """(MB, s) a shared-weight model's attention-only run costs for its steps past the model's depth
    (:data:`LONG_RUN`), over the batches of the ``long_run_prompts`` that go on past it; (0, 0) for models
    without shared weights."""
    size = size_of_entry(name, config["models"][name], config["models"])
    dyn = config["dynamics"]
    extra_steps = max(0, int(dyn["steps"]) - size.n_layers) if size.n_unique_layers < size.n_layers else 0
    n_batches = math.ceil(min(len(prompts), int(dyn["long_run_prompts"])) / int(dyn["batch_size"]))
    return (extra_steps * LONG_RUN["mem_mb_per_step"],
            extra_steps * n_batches * LONG_RUN["runtime_s_per_step_batch"])


def job_terms(config: dict, name: str, prompts: list[str]) -> dict[str, tuple[int, float]]:
    """(memory term, time term) of every per-model rule of one config entry, as :func:`predict` takes them."""
    m = config["models"][name]
    size = size_of_entry(name, m, config["models"])
    dyn, st = config["dynamics"], config["steering"]
    tokens = corpus_tokens(prompts, dyn["max_tokens"])
    s_tokens = corpus_tokens(prompts[: st["max_prompts"]], st["max_tokens"])
    n_targets = len(steering_targets(config, name))
    terms = {}
    for rule in RULES:
        terms[rule] = (mem_term(rule, size), time_term(rule, size, tokens=tokens if rule != "steering" else s_tokens,
                                               steps=dyn["steps"], kappas=st["kappas"], targets=n_targets,
                                               shared_edit=st["shared_edit"]))
    return terms

"""How far each heavy step of a run is from the machine's limit: its measured wall time (the rule's
``benchmark:`` file) beside its arithmetic lower bound (the floating-point operations it cannot avoid,
:func:`powerlens.pipeline.resources.arithmetic`, at the matrix-product peak measured on the same machine at the
steps' thread count). The pipeline's ``speed`` step and ``scripts/bench.py`` both call these functions."""

from __future__ import annotations

import math
import time

import pandas as pd

from powerlens.outputs.tables import (  # table_speed's total rows: the article reads them too
    RUN_MODEL,
    RUN_STEP,
    TOTAL_MODEL,
    TOTAL_STEP,
    TOTAL_WEIGHTS,
)
from powerlens.pipeline.resources import arithmetic, size_of_entry

#: Rules with an arithmetic lower bound, by the step that runs them.
HEAVY = {"spectra": "spectra", "dynamics_model": "dynamics (model)",
         "dynamics_attention-only": "dynamics (attention-only)", "steering": "steering"}

#: What the bound counts and leaves out (table_speed's caption, the article's methods).
COUNTED = ("counted: the forward passes' matrix products, the attention-only law's attention matrices, every "
           "projection of the Monte Carlo null as the dynamics step counted it (all draws up to each test's "
           "extension, the robustness streams, both dimensions, every state; column null projections), one "
           "eigen-solve per unique layer, steering's passes as the step counted them (the whole model or the last "
           "depth alone, and the LM head over the vocabulary, on every counted token of every pass: the steering "
           "prompts and the unrelated prompts of the KL, every target, kappa and method and the beta sweep) and "
           "one forward pass with the head per greedily generated token; not counted: drawing the random "
           "subspaces, the null's per-prompt sums, attention scores, norms, the continuation prompts' prefill, "
           "imports, file reading and writing (so a ratio near 1 is out of reach)")

#: The null projections column: how a dynamics row's Monte Carlo projections entered its bound (the other
#: steps draw no null: a dash, footnoted by :data:`NO_NULL`).
NULL_COUNT = {"counted": "counted by the step",
              "estimate": "estimate, first null_draws draws only (the run predates the count; too low)"}

#: Why a row has no null projections (table_speed's footnote for the column's dashes).
NO_NULL = {"null projections": "the step draws no Monte Carlo null (spectra, steering)",
           "Monte Carlo draws (all tests)": "the step draws no Monte Carlo null (spectra, steering), or its run "
                                            "predates the count"}


def matmul_peak(threads: int) -> dict[str, float]:
    """The matrix-product peak of this machine at ``threads`` threads, in flop/s per dtype: the best of five
    square products large enough to be compute-bound."""
    import torch

    torch.set_num_threads(threads)
    out = {}
    for name, dt, n in (("float32", torch.float32, 2048), ("float64", torch.float64, 1536)):
        a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)  # [n, n]
        a @ b
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        out[name] = 2.0 * n ** 3 / best
    return out


def bound_s(flops: dict[str, float], peak: dict[str, float]) -> float:
    """Seconds the arithmetic takes at the peak (NaN where nothing is counted)."""
    return sum(v / peak[k] for k, v in flops.items()) if flops else float("nan")


def generated_tokens(config: dict, *, head: bool, causal: bool, token_targets: int, pairs: int | None = None) -> int:
    """Tokens the steering step generates greedily: per target with a token, per kappa, for both methods, each
    continuation prompt's ``new_tokens`` (causal LMs with a head only). ``pairs``: the (token target, kappa)
    pairs the step ran (revision 6 doubles kappa per target); None: every configured kappa of every token
    target."""
    cont = config["steering"]["continuations"]
    if not (head and causal and cont["prompts"]):
        return 0
    pairs = token_targets * len(config["steering"]["kappas"]) if pairs is None else pairs
    return pairs * 2 * len(cont["prompts"]) * int(cont["new_tokens"])


def step_flops(rule: str, config: dict, name: str, *, tokens: int, targets: int, head: bool = False,
               generated: int = 0, null_flops: float | None = None, passes: dict | None = None,
               settings: int | None = None) -> dict[str, float]:
    """The arithmetic of one heavy rule of one config entry, with the run's dynamics and steering settings
    (``null_flops``: the dynamics step's own count of its Monte Carlo projections, from its JSON; ``passes``:
    the steering step's count of its passes' tokens, from its JSON's ``work``; ``settings``: its (target,
    non-zero kappa) pairs, from its CSV)."""
    dyn, st = config["dynamics"], config["steering"]
    return arithmetic(rule, size_of_entry(name, config["models"][name], config["models"]), tokens=tokens,
                      steps=dyn["steps"], kappas=st["kappas"], targets=targets, shared_edit=st["shared_edit"],
                      null_draws=dyn["null_draws"], head=head, generated=generated, null_flops=null_flops,
                      passes=passes, settings=settings)


def steering_terms(s: pd.DataFrame, config: dict, *, causal: bool, record: dict | None = None) -> dict:
    """What a steering job processed, from its steering.csv: counted tokens, targets, whether the LM head ran
    and how many tokens it generated (:func:`generated_tokens`); from its steering.json (``record``) the tokens
    of every pass it ran (``passes``, None where the run predates the count) and its CPU time."""
    head = bool((s["lm_head"] == "yes").any())
    token_targets = int(s.loc[s["target_token_id"].notna(), "target"].nunique())
    r1 = s[s["method"].astype(str).str.startswith("rank-1") & (s["kappa"] >= 0)]  # (target, kappa) pairs run
    record = record or {}
    return {"tokens": int(s["n_tokens"].max()), "targets": int(s["target"].nunique()), "head": head,
            "generated": generated_tokens(config, head=head, causal=causal, token_targets=token_targets,
                                          pairs=int(r1["target_token_id"].notna().sum())),
            "settings": int((r1["kappa"] > 0).sum()),
            "passes": record.get("work"), "cpu": step_cpu(record)}


def step_cpu(record: dict) -> float | None:
    """The CPU seconds a step's process used (user + system, every thread), as the step recorded them in its
    JSON's provenance (None where it did not: a run that predates the record)."""
    v = (record.get("provenance") or {}).get("cpu_s")
    return None if v is None else float(v)


def speed_jobs(config: dict, meta: list[str], bench_spectra: list[str], dynamics: list[str],
               bench_dynamics: list[str], steering: list[str], bench_steering: list[str],
               steering_json: list[str] | None = None) -> list[dict]:
    """The heavy jobs of a run as :func:`speed_rows` takes them, from the run's files: each model's
    weights.json (``meta``), dynamics-<mode>.json and steering.csv (the tokens, targets, head and generated
    tokens each job processed, and the dynamics step's count of its null projections), steering.json
    (``steering_json``, same order as ``steering``: the steering step's count of its passes), the steps' own
    CPU time (their JSON's provenance) beside the rule's benchmark file of that job (same order)."""
    from powerlens.core.io import read_json

    metas = [read_json(p) for p in meta]
    dyn = [read_json(p) for p in dynamics]
    label = {m["model"]: m["weights_label"] for m in metas}
    causal = {m["model"]: bool(m["causal"]) for m in metas}
    jobs = [{"model": m["model"], "rule": "spectra", "benchmark": b, "tokens": 0, "targets": 0}
            for m, b in zip(metas, bench_spectra)]
    jobs += [{"model": d["model"], "rule": f"dynamics_{d['mode']}", "benchmark": b, "tokens": d["n_tokens"],
              "targets": 0, "null_flops": d.get("arithmetic", {}).get("null_projection_flops"),
              "draws": d.get("null", {}).get("draws_total"), "cpu": step_cpu(d)}
             for d, b in zip(dyn, bench_dynamics)]
    for p, b, rec in zip(steering, bench_steering, steering_json or [None] * len(steering)):
        s = pd.read_csv(p)
        if not len(s) or s["n_tokens"].isna().all():  # no steering setting ran: nothing to bound
            continue
        name = str(s["model"].iloc[0])
        jobs.append({"model": name, "rule": "steering", "benchmark": b,
                     **steering_terms(s, config, causal=causal[name], record=read_json(rec) if rec else None)})
    for j in jobs:
        j["weights_label"] = label[j["model"]]
    return jobs


def speed_rows(config: dict, jobs: list[dict], peak: dict[str, float], labels: dict[str, str],
               threads: int | None = None) -> pd.DataFrame:
    """One row per heavy job: ``jobs`` items have model, rule, benchmark (a Snakemake benchmark TSV), tokens
    (the counted tokens the step processed), targets (steering targets; 0 elsewhere), for steering head (an
    LM head computed), generated (:func:`generated_tokens`) and passes (the step's count, :func:`step_flops`),
    for dynamics null_flops (the step's count of its null projections; missing or None: the estimate, marked in
    column null projections), cpu (the step's own CPU seconds; missing or None: the benchmark file's sampled
    cpu_time). ``threads``: the steps' thread count, for column "CPU / (threads x bound)" (how far the job is
    from the bound whatever ran beside it: the bound is at the peak of ``threads`` threads)."""
    rows = []
    for j in jobs:
        b = pd.read_csv(j["benchmark"], sep="\t")
        wall = float(b["s"].iloc[0])
        cpu = float(b["cpu_time"].iloc[0]) if j.get("cpu") is None else float(j["cpu"])
        counted = j.get("null_flops")
        flops = step_flops(j["rule"], config, j["model"], tokens=int(j["tokens"]), targets=int(j["targets"]),
                           head=bool(j.get("head", False)), generated=int(j.get("generated", 0)),
                           null_flops=None if counted is None else float(counted), passes=j.get("passes"),
                           settings=j.get("settings"))
        null = None if not j["rule"].startswith("dynamics") else "estimate" if counted is None else "counted"
        lower = bound_s(flops, peak)
        rows.append({"model": labels.get(j["model"], j["model"]), "step": HEAVY[j["rule"]],
                     "wall (s)": round(wall, 1), "CPU (s)": round(cpu, 1), "tokens": int(j["tokens"]),
                     "arithmetic (GFLOP)": float(f"{sum(flops.values()) / 1e9:.3g}"),
                     "lower bound (s)": float(f"{lower:.3g}"),
                     "wall / bound": (float(f"{wall / lower:.3g}") if lower > 0 and math.isfinite(lower) else None),
                     "CPU / (threads x bound)": cpu_ratio(cpu, threads, lower),
                     "null projections": NULL_COUNT[null] if null else None,
                     "Monte Carlo draws (all tests)": j.get("draws"), "weights": j["weights_label"]})
    return pd.DataFrame(rows)




def cpu_ratio(cpu: float | None, threads: int | None, lower: float | None) -> float | None:
    """CPU seconds over the bound's CPU seconds (``threads`` threads for ``lower`` seconds), 3 digits; None where
    a term is missing."""
    if cpu is None or not threads or lower is None or not (lower > 0 and math.isfinite(lower)):
        return None
    return float(f"{cpu / (threads * lower):.3g}")


def total_row(df: pd.DataFrame, threads: int | None = None) -> dict:
    """The run's total over its heavy jobs (every benchmark file the speed step reads): summed wall and CPU
    time, arithmetic, bound and Monte Carlo draws, and the ratio of the sums. The number of jobs is the number
    of the other rows."""
    def total(c):
        v = pd.to_numeric(df[c], errors="coerce") if c in df else pd.Series(dtype=float)
        return float(v.sum()) if v.notna().any() else None

    wall, lower = total("wall (s)"), total("lower bound (s)")
    return {"model": TOTAL_MODEL, "step": TOTAL_STEP, "wall (s)": round(wall, 1) if wall is not None else None,
            "CPU (s)": None if total("CPU (s)") is None else round(total("CPU (s)"), 1), "tokens": None,
            "arithmetic (GFLOP)": None if total("arithmetic (GFLOP)") is None else
            float(f"{total('arithmetic (GFLOP)'):.3g}"),
            "lower bound (s)": None if lower is None else float(f"{lower:.3g}"),
            "wall / bound": (float(f"{wall / lower:.3g}") if wall is not None and lower and math.isfinite(lower)
                             else None),
            "CPU / (threads x bound)": cpu_ratio(total("CPU (s)"), threads, lower),
            "null projections": None, "Monte Carlo draws (all tests)": total("Monte Carlo draws (all tests)"),
            "weights": TOTAL_WEIGHTS}




def run_total_row(df: pd.DataFrame, bench_other: list[str]) -> dict:
    """The summed job time of the run: the heavy jobs' rows of ``df`` plus the other jobs' benchmark files
    (their wall and CPU times; no bound is counted for them). ``jobs`` is the number of benchmark files."""
    walls = [float(v) for v in pd.to_numeric(df["wall (s)"], errors="coerce").dropna()]
    cpus = [float(v) for v in pd.to_numeric(df["CPU (s)"], errors="coerce").dropna()]
    for path in bench_other:
        b = pd.read_csv(path, sep="\t")
        walls.append(float(b["s"].iloc[0]))
        cpus.append(float(b["cpu_time"].iloc[0]))
    return {"model": RUN_MODEL, "step": RUN_STEP, "wall (s)": round(sum(walls), 1), "CPU (s)": round(sum(cpus), 1),
            "jobs": len(df) + len(bench_other), "weights": TOTAL_WEIGHTS}


def with_total(df: pd.DataFrame, bench_other: list[str] | None = None, threads: int | None = None) -> pd.DataFrame:
    """table_speed with its total rows appended: the heavy jobs' total and, where ``bench_other`` is given, the
    run's (none for a run with no heavy job)."""
    if not len(df):
        return df
    rows = [total_row(df, threads)] + ([run_total_row(df, bench_other)] if bench_other else [])
    return pd.concat([df, pd.DataFrame(rows)], ignore_index=True)

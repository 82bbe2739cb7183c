#!/usr/bin/env python
"""Benchmark (not a test): every per-model step (fetch, extract, check, spectra, both dynamics modes,
steering) on architecture twins of the paper's largest models, over the prompt corpus, with the schema's
defaults; prints wall time, CPU time and peak RSS per step, and the same figures for a naive baseline run in
the same way on the same prompts, as a ratio. Each baseline computes the same outputs as our step, the
straightforward way:
    check     the float32 model checked, then the whole model loaded again in float64 and checked;
    spectra   the same spectra (F, the norm-folded F~, the heads), one layer after another on all the BLAS
              threads, and shared layers solved again at every depth;
    dynamics  the same statistics (Monte Carlo null included) by the dynamics step itself, one prompt per
              batch, and every prompt through every step of a long shared-weight run; the bench prints the
              largest difference between its per-layer statistics and ours over the model's depth;
    steering  a full forward pass per setting (target x kappa x method), the attention-only law through
              every layer per setting with O replaced by O' and the attention recomputed, a least-squares z
              and a full eig of F' per setting, and the same greedy continuations.

    python scripts/bench.py                       # albert-xxlarge-v2, gpt2-xl, gpt-neo-2.7B, full corpus
    python scripts/bench.py --twins gpt2 --prompts 40 --threads 2
    python scripts/bench.py --twins albert-xxlarge-v2 --steps steering --shared-edit last_depth
    python scripts/bench.py --ratios config/offline.yaml config/offline-decoders.yaml   # any finished run
Each step runs in its own process (os.wait4 gives its CPU time and peak RSS), with the command line made
from the step's declared options (powerlens.pipeline.steps.<step>.OPTIONS, as the rule's), so the benchmark
runs what the pipeline runs. Beside each heavy step it prints its arithmetic lower bound: the floating-point
operations it cannot avoid (powerlens.pipeline.resources.arithmetic) at the matrix-product peak measured at
the start of the same run, and the ratio of the wall time to it. Our steps' figures are also written where
each rule's benchmark: file would be, under --bench-dir (with a config.yaml describing the run), which
scripts/fit_resources.py turns into the rules' mem_mb and runtime. Only the naive baselines are the
benchmark's own code.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench_naive import machine_memory_gb, naive, naive_check_memory_gb, naive_dynamics, stats_difference

from powerlens.pipeline.config import schema_defaults
from powerlens.pipeline.speed import bound_s, matmul_peak

REPO = Path(__file__).resolve().parents[1]


def arch_of(twin):
    from powerlens.models.archs import twin_config

    return twin_config(twin).arch


def run(cmd, env=None, must_pass=True):
    """Run one step in a child process: wall time, CPU time and peak RSS. A failing baseline
    (``must_pass=False``) is reported with its exit status and the benchmark goes on."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    out = p.stdout.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.time() - t0
    if status != 0:
        print(out[-3000:])
        if must_pass:
            raise SystemExit(f"step failed: {' '.join(cmd)}")
        return {"failed": f"exit status {os.waitstatus_to_exitcode(status)} after {wall:.0f} s"}
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_gb": ru.ru_maxrss / 1e6}


#: The benchmark's steps: (name printed, step module, its resources rule name, wildcards, naive baseline)
STEPS = [("fetch (build twin)", "fetch_model", "fetch_model", {}, None),
         ("extract", "extract", "extract", {}, None),
         ("check", "check_extraction", "check_extraction", {}, "check"),
         ("spectra", "spectra", "spectra", {}, "spectra"),
         ("dynamics model", "dynamics", "dynamics_model", {"mode": "model"}, "model"),
         ("dynamics attention-only", "dynamics", "dynamics_attention-only", {"mode": "attention-only"}, "attention"),
         ("steering", "steering", "steering", {}, "steering")]


def step_command(step: str, values: dict, cfg: dict) -> list[str]:
    """A step's command line from its declared options (the rule's shell line is made from the same)."""
    from powerlens.pipeline.options import command
    from powerlens.pipeline.steps import step_module

    return command(step, step_module(step).OPTIONS, values, cfg, sys.executable)


def lower_bound_s(rule: str, twin: str, cfg: dict, tokens: dict, peak: dict, w: Path) -> float:
    """The step's arithmetic (:func:`powerlens.pipeline.resources.arithmetic`) at the measured peak, in seconds;
    steering's head, generated tokens and passes read from its steering.csv and steering.json, dynamics' count
    of its null projections from its JSON, as the speed step reads them."""
    import pandas as pd

    from powerlens.models.adapters import get_adapter
    from powerlens.models.archs import twin_config
    from powerlens.pipeline.resources import arithmetic, size_of
    from powerlens.pipeline.speed import steering_terms

    st, arch = cfg["steering"], twin_config(twin)
    extra = {}
    if rule == "steering" and (w / "steering.csv").is_file():
        rec = json.loads((w / "steering.json").read_text()) if (w / "steering.json").is_file() else None
        terms = steering_terms(pd.read_csv(w / "steering.csv"), cfg, causal=get_adapter(arch.arch).causal,
                               record=rec)
        extra = {"head": terms["head"], "generated": terms["generated"], "passes": terms["passes"]}
    record = w / f"d-{rule.removeprefix('dynamics_')}.json"  # the dynamics step's JSON (step_values)
    if rule.startswith("dynamics_") and record.is_file():
        extra = {"null_flops": json.loads(record.read_text()).get("arithmetic", {}).get("null_projection_flops")}
    flops = arithmetic(rule, size_of(arch), tokens=tokens["steering" if rule == "steering" else "all"],
                       steps=cfg["dynamics"]["steps"], kappas=st["kappas"], targets=len(st["targets"]),
                       shared_edit=st["shared_edit"], null_draws=cfg["dynamics"]["null_draws"], **extra)
    return bound_s(flops, peak)


def ratios(configfiles: list[str], directory: Path, threads: int) -> None:
    """Each heavy job's wall time against its arithmetic lower bound, from any finished run's files: the run's
    config (as given to snakemake), its results and its rules' benchmark files, read as the speed step reads
    them (:func:`powerlens.pipeline.speed.speed_jobs`), at the peak measured now on this machine."""
    import pandas as pd
    import yaml
    from snakemake.utils import update_config

    from powerlens.pipeline.config import validate_config
    from powerlens.pipeline.speed import speed_jobs, speed_rows
    from powerlens.pipeline.steps import job_path

    cfg: dict = {}
    for f in configfiles:  # later files override earlier ones, merged as Snakemake merges --configfile
        update_config(cfg, yaml.safe_load(Path(f).read_text()) or {})
    validate_config(cfg)
    run, models = cfg["run"], list(cfg["models"])
    res = lambda m, f: str(directory / "results" / run / m / f)  # noqa: E731
    bench = lambda step, **wc: str(directory / job_path(step, "benchmark", run, **wc))  # noqa: E731
    modes = ("model", "attention-only")
    jobs = speed_jobs(cfg, [res(m, "weights.json") for m in models], [bench("spectra", model=m) for m in models],
                      [res(m, f"dynamics-{mo}.json") for m in models for mo in modes],
                      [bench("dynamics", model=m, mode=mo) for m in models for mo in modes],
                      [res(m, "steering.csv") for m in models], [bench("steering", model=m) for m in models],
                      [res(m, "steering.json") for m in models])
    peak = matmul_peak(threads)
    df = speed_rows(cfg, jobs, peak, {m: e.get("label", m) for m, e in cfg["models"].items()}, threads)
    print(f"run {run}: matrix-product peak here at {threads} threads: float32 {peak['float32'] / 1e9:.1f} GFLOP/s, "
          f"float64 {peak['float64'] / 1e9:.1f} GFLOP/s")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.to_string(index=False))


def write_bench_config(bench_dir: Path, twins, corpus: Path, shared_edit: str) -> None:
    """A pipeline config describing this benchmark (models, corpus, steering.shared_edit; schema defaults
    for the rest)."""
    import yaml

    models = {t: {"arch": arch_of(t), "source": "random", "twin_of": t, "seed": 0} for t in twins}
    old = bench_dir / "config.yaml"
    if old.is_file():  # keep twins benchmarked by an earlier call
        models = {**yaml.safe_load(old.read_text())["models"], **models}
    bench_dir.mkdir(parents=True, exist_ok=True)
    old.write_text(yaml.safe_dump({"run": bench_dir.name, "prompts": str(Path(corpus).resolve()),
                                   "steering": {"shared_edit": shared_edit}, "models": models}))


def write_bench_file(bench_dir: Path, step: str, twin: str, wildcards: dict, r: dict) -> None:
    """One step's figures where the rule's ``benchmark:`` file would be (the step's declared path,
    :func:`powerlens.pipeline.steps.job_file`), in its columns (s, max_rss in MB, cpu_time), for
    scripts/fit_resources.py."""
    from powerlens.pipeline.steps import job_file

    f = bench_dir / job_file(step, "benchmark", model=twin, **wildcards)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(f"s\tmax_rss\tcpu_time\n{r['wall_s']:.2f}\t{r['peak_rss_gb'] * 1000:.2f}\t{r['cpu_s']:.2f}\n")


def corpus_token_counts(twin: str, prompts: list[str], cfg: dict, words: int) -> dict[str, int]:
    """Counted tokens of the corpus for this twin's tokenizer, truncated as the steps truncate them: all
    prompts at dynamics.max_tokens, and steering's first max_prompts at steering.max_tokens."""
    from powerlens.models.sources.twin import twin_tokenizer

    tok, label = twin_tokenizer(twin)
    lens = [len(x) for x in tok(prompts, add_special_tokens=True)["input_ids"]]
    print(f"  {twin}: {sum(lens)} tokens, {sum(lens) / words:.2f} tokens per word ({label})", flush=True)
    st = cfg["steering"]
    return {"all": sum(min(n, cfg["dynamics"]["max_tokens"]) for n in lens),
            "steering": sum(min(n, st["max_tokens"]) for n in lens[: st["max_prompts"]])}


def naive_row(naive_step: str, name: str, cmd: list[str], twin: str, w: Path, corpus: Path, a, shared_edit: str,
              n_prompts: int) -> dict:
    """The naive baseline of one step, run in a child process: its figures as naive_* columns."""
    row = {}
    need = naive_check_memory_gb(twin) if naive_step == "check" else 0.0
    if need > 0.9 * machine_memory_gb():  # it would be killed for memory, or swap the machine
        n = {"failed": f"not run: a float64 copy of the model needs about {need:.1f} GB, this "
                       f"machine has {machine_memory_gb():.1f} GB"}
    elif name.startswith("dynamics"):
        n = run(naive_dynamics(cmd, n_prompts), must_pass=False)
        if "failed" not in n:
            row["stats_diff"], row["stats_diff_column"] = stats_difference(cmd)
    else:
        n = run([sys.executable, __file__, "--threads", str(a.threads), "--shared-edit", shared_edit,
                 "--naive-step", naive_step, str(w), str(corpus)], must_pass=False)
    row.update({f"naive_{k}": v for k, v in n.items()})
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--twins", nargs="+", default=["albert-xxlarge-v2", "gpt2-xl", "gpt-neo-2.7B"])
    ap.add_argument("--prompts", type=int, default=0, help="use the first N prompts (0 = all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/powerlens-bench")
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--modes", nargs="+", default=["model", "attention-only"], choices=["model", "attention-only"],
                    help="dynamics modes to run")
    ap.add_argument("--bench-dir", default=str(REPO / "benchmarks/bench"),
                    help="where to write Snakemake-style benchmark files of our steps (its name is the run's)")
    ap.add_argument("--steps", nargs="+", default=["fetch", "extract", "check", "spectra", "dynamics", "steering"],
                    help="steps to run (fetch and extract are needed once per --work folder)")
    ap.add_argument("--shared-edit", choices=["every_depth", "last_depth"],
                    help="steering.shared_edit for shared-weight twins (default: the config schema's)")
    ap.add_argument("--ratios", nargs="+", metavar="CONFIG",
                    help="only print each heavy job's wall time / arithmetic bound of a finished run, from its "
                    "config file(s), results and benchmark files (e.g. --ratios config/offline.yaml "
                    "config/offline-decoders.yaml)")
    ap.add_argument("--directory", default=".", help="with --ratios: the run's working directory")
    ap.add_argument("--naive-step", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.ratios:
        return ratios(a.ratios, Path(a.directory), a.threads)
    cfg = schema_defaults()
    shared_edit = a.shared_edit or cfg["steering"]["shared_edit"]
    if a.naive_step:
        step, work, prompts = a.naive_step
        return naive(step, Path(work), prompts, a.threads, shared_edit)
    corpus = prepare_corpus(a)
    from powerlens.core.corpus import read_prompts

    ps = read_prompts(corpus)
    words = sum(len(p.split()) for p in ps)
    print(f"corpus: {len(ps)} prompts, {words} words", flush=True)
    cfg = {**cfg, "steering": {**cfg["steering"], "shared_edit": shared_edit}}
    tokens = {twin: corpus_token_counts(twin, ps, cfg, words) for twin in a.twins}
    peak = matmul_peak(a.threads)
    print(f"matrix-product peak at {a.threads} threads: float32 {peak['float32'] / 1e9:.1f} GFLOP/s, float64 "
          f"{peak['float64'] / 1e9:.1f} GFLOP/s (the lower bounds below are the steps' arithmetic at these rates)",
          flush=True)
    t_all = time.time()
    write_bench_config(Path(a.bench_dir), a.twins, corpus, shared_edit)
    rows = [row for twin in a.twins for row in bench_twin(twin, a, cfg, corpus, len(ps), tokens[twin], peak)]
    summary(rows, time.time() - t_all, a.twins)


def prepare_corpus(a) -> Path:
    """The prompt corpus: config/prompts.txt, or its first --prompts prompts in the work folder."""
    corpus = REPO / "config/prompts.txt"
    if a.prompts:
        lines = [ln for ln in corpus.read_text().splitlines() if ln.strip()][: a.prompts]
        corpus = Path(a.work) / "prompts.txt"
        corpus.parent.mkdir(parents=True, exist_ok=True)
        corpus.write_text("\n".join(lines) + "\n")
    return corpus


def step_values(twin: str, w: Path, corpus: Path, cfg: dict, threads: int) -> dict[str, dict]:
    """Per step module, the values of its options that are not the config's: files, wildcards, params."""
    from powerlens.core.io import params_json

    files = {"manifest": w / "manifest.json", "tensors": w / "weights.safetensors", "meta": w / "weights.json",
             "spectra": w / "spectra.npz", "prompts": corpus, "threads": threads}
    entry = {"arch": arch_of(twin), "source": "random", "twin_of": twin, "seed": 0}
    return {
        "fetch_model": {"name": twin, "entry": params_json(entry), "out": files["manifest"]},
        "extract": {**files, "out-tensors": files["tensors"], "out-meta": files["meta"]},
        "check_extraction": {**files, "out": w / "check.json"},
        "spectra": {**files, "out-npz": files["spectra"], "out-csv": w / "spectra.csv"},
        "steering": {**files, "out-csv": w / "steering.csv", "out-json": w / "steering.json",
                     "out-continuations": w / "steering_continuations.csv",
                     "targets": params_json(cfg["steering"]["targets"])},
        "dynamics": {**files, **{f"out-{x}": w / f"d-{{mode}}.{x}" for x in ("npz", "csv", "json")}},
    }


def bench_twin(twin: str, a, cfg: dict, corpus: Path, n_prompts: int, tokens: dict, peak: dict) -> list[dict]:
    """Every chosen step on one twin (and its naive baseline), each step's figures beside its lower bound."""
    w = Path(a.work) / twin
    w.mkdir(parents=True, exist_ok=True)
    values, rows = step_values(twin, w, corpus, cfg, a.threads), []
    for name, step, rule, wildcards, naive_step in STEPS:
        if not (name.split()[0] in a.steps or name in a.steps) or wildcards.get("mode", a.modes[0]) not in a.modes:
            continue
        v = {k: Path(str(x).format(**wildcards)) if isinstance(x, Path) else x for k, x in values[step].items()}
        cmd = step_command(step, {**v, **wildcards}, cfg)
        r = run(cmd)
        bound = lower_bound_s(rule, twin, cfg, tokens, peak, w)
        row = {"twin": twin, "step": name, **r, "lower_bound_s": bound, "wall / bound": r["wall_s"] / bound}
        if naive_step and not a.no_naive:
            row.update(naive_row(naive_step, name, cmd, twin, w, corpus, a, cfg["steering"]["shared_edit"], n_prompts))
        rows.append(row)
        write_bench_file(Path(a.bench_dir), step, twin, wildcards, r)
        print(json.dumps(row), flush=True)
    for f in w.glob("twin/*.safetensors"):
        f.unlink()
    return rows


def summary(rows: list[dict], total: float, twins: list[str]) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    if "naive_wall_s" in df:
        df["speed-up vs naive"] = df["naive_wall_s"] / df["wall_s"]
        df["RSS naive / ours"] = df["naive_peak_rss_gb"] / df["peak_rss_gb"]
    pd.set_option("display.width", 200)
    print(df.round(2).to_string(index=False))
    print(f"total wall time (ours + naive): {total:.0f} s; ours alone: {df['wall_s'].sum():.0f} s; "
          f"largest peak RSS (ours): {df['peak_rss_gb'].max():.2f} GB")
    targets(df, twins)


def targets(df, twins) -> None:
    """The targets on this machine, each with the measured figure: each heavy step's wall time against its
    arithmetic lower bound (the measure of speed; the earlier 20-minute line for the three largest twins is
    retired), peak memory against the weights, and the naive baselines."""
    from powerlens.models.archs import count_params, twin_config

    weights_gb = max(count_params(twin_config(t)) for t in twins) * 4 / 1e9
    peak = df["peak_rss_gb"].max()
    for _, r in df.dropna(subset=["lower_bound_s"]).iterrows():
        print(f"{r['twin']} {r['step']}: {r['wall_s']:.0f} s against an arithmetic lower bound of "
              f"{r['lower_bound_s']:.3g} s = {r['wall / bound']:.3g} x the bound")
    print(f"target peak RSS <= 1.3 x {weights_gb:.2f} GB: {peak:.2f} GB = {peak / weights_gb:.2f} x -> "
          f"{'met' if peak <= 1.3 * weights_gb else 'MISSED'}")
    if "naive_failed" in df:
        for _, r in df.dropna(subset=["naive_failed"]).iterrows():
            print(f"naive baseline without a time: {r['twin']} {r['step']}: {r['naive_failed']} "
                  f"(ours: {r['wall_s']:.0f} s, {r['peak_rss_gb']:.2f} GB)")
    if "naive_wall_s" in df:
        sub = df.dropna(subset=["naive_wall_s"])
        ratio = sub["naive_wall_s"].sum() / sub["wall_s"].sum()
        worst = sub.loc[(sub["naive_wall_s"] / sub["wall_s"]).idxmin()]
        print(f"target every step >= 1.0x naive:  slowest {worst['twin']} {worst['step']} "
              f"{worst['naive_wall_s'] / worst['wall_s']:.2f}x -> "
              f"{'met' if worst['naive_wall_s'] >= worst['wall_s'] else 'MISSED'}")
        print(f"target sum >= 3x naive:           {ratio:.2f}x over the steps with a baseline -> "
              f"{'met' if ratio >= 3 else 'MISSED'}")
    if "stats_diff" in df:
        for _, r in df.dropna(subset=["stats_diff"]).iterrows():
            print(f"same statistics as the naive run: {r['twin']} {r['step']}: largest difference "
                  f"{r['stats_diff']:.3g} ({r['stats_diff_column']}) over the model's depth")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Fit each rule's mem_mb and runtime from measured benchmark files (see powerlens.pipeline.resources).

    python scripts/fit_resources.py --run benchmarks/offline config/offline.yaml \\
                                    --run benchmarks/bench benchmarks/bench/config.yaml
Collects every `benchmark:` file of the named runs into workflow/resources_measured.tsv (rows of the same
run, rule and model are replaced; other rows are kept), then refits workflow/resources.yaml from all rows.
`--refit` only refits from the stored measurements. `--retime CONFIG RULE` recomputes the size terms of the
stored rows of that config's run and that rule (after a change of the rule's term in powerlens.pipeline.resources),
without benchmark files; the config must be the one the rows were measured with.
"""

import argparse
import datetime
import platform
from pathlib import Path

from powerlens.cli import run_guarded

REPO = Path(__file__).resolve().parents[1]

COLUMNS = ["run", "rule", "model", "model_of", "params", "mem_term", "time_term", "s", "max_rss_mb", "cpu_time"]


def load_run_config(config_path: Path) -> tuple[dict, list[str]]:
    """A run's config, validated as a run does (the schema's defaults filled in), and its prompts."""
    import yaml

    from powerlens.core.corpus import read_prompts
    from powerlens.pipeline.config import validate_config

    cfg = yaml.safe_load(config_path.read_text())
    validate_config(cfg)
    prompts = read_prompts(REPO / cfg["prompts"] if not Path(cfg["prompts"]).is_absolute() else cfg["prompts"])
    return cfg, prompts


def retime(df, config_path: Path, rule: str):
    """The stored rows of the config's run and ``rule`` with their size terms recomputed from the config."""
    from powerlens.core.errors import PowerlensError
    from powerlens.pipeline.resources import job_terms

    cfg, prompts = load_run_config(config_path)
    rows = (df["run"] == cfg["run"]) & (df["rule"] == rule)
    if not rows.any():
        raise PowerlensError(f"no stored rows of run {cfg['run']!r} ({config_path}) and rule {rule!r}",
                             "name the config of a stored run and one of its rules")
    for i in df.index[rows]:
        name = df.at[i, "model"]
        if name not in cfg["models"]:
            raise PowerlensError(f"stored row of model {name!r} (run {cfg['run']!r}) is not in {config_path}",
                                 "add the model's entry to that config")
        df.at[i, "mem_term"], df.at[i, "time_term"] = job_terms(cfg, name, prompts)[rule]
    return df


def collect(bench_dir: Path, config_path: Path) -> list[dict]:
    import pandas as pd

    from powerlens.models.sources import random_weights
    from powerlens.pipeline.resources import JOB_KINDS, job_terms, size_of_entry
    from powerlens.pipeline.steps import job_file

    cfg, prompts = load_run_config(config_path)
    rows = []
    for name, m in cfg["models"].items():
        if not random_weights(m):  # twins only: measured models whose exact architecture is a paper model's
            continue
        terms = job_terms(cfg, name, prompts)
        files = {rule: bench_dir / job_file(step, "benchmark", model=name, **wc)  # where the rule writes it
                 for rule, (step, wc) in JOB_KINDS.items()}
        for rule, f in files.items():
            if not f.is_file():
                continue
            b = pd.read_csv(f, sep="\t").iloc[-1]
            mem, term = terms[rule]
            rows.append({"run": cfg["run"], "rule": rule, "model": name,
                         "model_of": m["twin_of"], "params": size_of_entry(name, m).params,
                         "mem_term": mem, "time_term": term, "s": float(b["s"]),
                         "max_rss_mb": float(b["max_rss"]), "cpu_time": float(b.get("cpu_time", float("nan")))})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", nargs=2, action="append", default=[], metavar=("BENCH_DIR", "CONFIG"))
    ap.add_argument("--measured", default=str(REPO / "workflow/resources_measured.tsv"))
    ap.add_argument("--out", default=str(REPO / "workflow/resources.yaml"))
    ap.add_argument("--refit", action="store_true", help="refit from the stored measurements only")
    ap.add_argument("--retime", nargs=2, action="append", default=[], metavar=("CONFIG", "RULE"),
                    help="recompute the size terms of the stored rows of this config's run and rule")
    a = ap.parse_args()
    import pandas as pd
    import yaml

    from powerlens.pipeline.resource_fit import fit
    from powerlens.pipeline.resources import MARGIN

    measured = Path(a.measured)
    old = pd.read_csv(measured, sep="\t") if measured.is_file() else pd.DataFrame(columns=COLUMNS)
    new = pd.DataFrame([r for d, c in a.run for r in collect(Path(d), Path(c))], columns=COLUMNS)
    for c, rule in a.retime:
        old = retime(old, Path(c), rule)
    if not (a.refit or a.retime) and new.empty:
        raise SystemExit("no benchmark files found under the given --run folders")
    keep = old.merge(new[["run", "rule", "model"]], how="left", indicator=True)
    df = pd.concat([keep[keep["_merge"] == "left_only"][COLUMNS], new]).sort_values(["rule", "params", "run", "model"])
    df = df.astype({c: float for c in ("mem_term", "time_term", "s", "max_rss_mb", "cpu_time")})
    df.to_csv(measured, sep="\t", index=False, lineterminator="\n", float_format="%.6g")
    df = pd.read_csv(measured, sep="\t")  # fit what is stored (6 significant digits), so a --refit agrees
    coeffs = fit(df.to_dict("records"))
    doc = {
        "about": "Fitted by scripts/fit_resources.py from workflow/resources_measured.tsv (Snakemake benchmark "
                 "files of twin runs). mem_mb = m1 * (a + b * mem_term) + m0; "
                 "runtime_s = t1 * (a + b * time_term) + t0; "
                 "terms in powerlens.pipeline.resources. Do not edit by hand: rerun the script.",
        "fitted_on": {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, "
                      f"{__import__('os').cpu_count()} CPUs", "rows": int(len(df)), "runs": sorted(set(df["run"]))},
        "margin": {k: list(v) for k, v in MARGIN.items()},
        "rules": coeffs,
    }
    Path(a.out).write_text(yaml.safe_dump(doc, sort_keys=False, width=110))
    for rule, c in coeffs.items():
        print(f"{rule:26s} n={c['n']:2d}  mem_mb = {c['mem_mb']['a']:8.1f} + {c['mem_mb']['b']:.3e} * mem term"
              f"   s = {c['runtime_s']['a']:7.1f} + {c['runtime_s']['b']:.3e} * term")


if __name__ == "__main__":
    run_guarded(main)

"""One theory experiment on synthetic layers with a prescribed spectrum: real (consensus rate),
complex (closed orbit), or bipartite (fixed point and its stability with 1 vs several heads)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.core.io import write_json, write_npz
from powerlens.core.runtime import set_threads
from powerlens.outputs import provenance
from powerlens.pipeline.options import Option

OPTIONS = (
    Option("case", "wildcard:case", choices=("real", "complex", "bipartite")),
    Option("out-json", "output:json"),
    Option("out-npz", "output:npz"),
    Option("d", "config:theory.d", kind="int", help="dimension d of the synthetic layer"),
    Option("heads", "config:theory.heads", kind="int", help="attention heads"),
    Option("tokens", "config:theory.tokens", kind="int",
           help="tokens per run (even: the bipartite case splits them in two)"),
    Option("steps", "config:theory.steps", kind="int", help="attention-only steps per run"),
    Option("runs", "config:theory.runs", kind="int", help="random initial states per case"),
    Option("epsilon", "config:theory.epsilon", kind="float"),
    Option("seed", "config:seed", kind="int"),
    Option("residual", "config:theory.residual", kind="yesno",
           help="yes: iterate the residual map M = I + F; no: M = F"),
    Option("c4-sizes", "config:theory.c4_sizes", kind="int", many=True, help="C4 sweep: token dimensions"),
    Option("c4-heads", "config:theory.c4_heads", kind="int", many=True, help="C4 sweep: head counts (1 among them)"),
    Option("c4-sharpness", "config:theory.c4_sharpness", kind="float", many=True,
           help="C4 sweep: typical |score| of the bipartite start"),
    Option("c4-equilibrium-steps", "config:theory.c4_equilibrium_steps", kind="int",
           help="C4 sweep: steps of the plain iteration from the bipartite start (a check of Newton's equilibrium)"),
    Option("seeds", "config:theory.seeds", kind="int",
           help="weight seeds per cell of the sweeps (C2, C3: per sharpness; C4: per size, head count, sharpness)"),
    Option("c4-random-starts", "config:theory.c4_random_starts", kind="int",
           help="C4 sweep: random isotropic starts per cell and seed, to measure how rarely runs end bipartite"),
    Option("threads", "threads", kind="int"),
)


def theory(case: str, *, out_json: str | Path, out_npz: str | Path, d: int, heads: int, tokens: int, steps: int,
           seed: int, runs: int, epsilon: float, residual: bool, threads: int, c4_sizes: list[int],
           c4_heads: list[int], c4_sharpness: list[float], c4_equilibrium_steps: int, seeds: int,
           c4_random_starts: int) -> list[dict]:
    """One synthetic experiment (a: real, C2; b: complex, C3; c: bipartite, C4), each over the sweep of attention
    sharpness (``c4_sharpness``) and ``seeds`` weight draws, with its uniform-attention or known-unstable positive
    control (paper.md section 4d, revision 5)."""
    from powerlens.analysis import theory as th

    threads = set_threads(threads)
    rows, arrays = [], {}
    if case == "real":
        rows, arrays = th.experiment_real(d, heads, tokens, steps, seed, residual, list(c4_sharpness), seeds)
    elif case == "complex":
        rows, arrays = th.experiment_complex(d, heads, tokens, steps, seed, residual, list(c4_sharpness), seeds)
    elif case == "bipartite":
        if 1 not in c4_heads:
            raise PowerlensError(f"theory.c4_heads {list(c4_heads)} lacks 1", "add 1: every other head count is "
                                 "tested against one head")
        res, arrays = th.experiment_c4_sweep(list(c4_sizes), sorted(set(c4_heads)), list(c4_sharpness), tokens,
                                             steps, seed, runs, epsilon, residual, seeds, c4_random_starts,
                                             max_eq_steps=c4_equilibrium_steps)
        rows += res
    else:
        raise PowerlensError(f"unknown theory case {case!r}", "use real, complex or bipartite")
    out = []
    for r in rows:
        rec = dataclasses.asdict(r)
        rec["rel_error"] = r.rel_error
        rec["detail"] = {k: (str(v) if isinstance(v, complex) else v) for k, v in r.detail.items()}
        out.append(rec)
    write_npz(out_npz, arrays)
    write_json(out_json, {"case": case, "results": out,
                          "setup": {"d": d, "heads": heads, "tokens": tokens, "steps": steps, "seed": seed,
                                    "runs": runs, "epsilon": epsilon, "residual": residual, "seeds": seeds,
                                    "sharpness": list(c4_sharpness),
                                    **({"c4_sizes": list(c4_sizes), "c4_heads": list(c4_heads),
                                        "c4_equilibrium_steps": c4_equilibrium_steps,
                                        "c4_random_starts": c4_random_starts} if case == "bipartite" else {}),
                                    "weights_label": "synthetic (prescribed spectrum)"},
                          "provenance": provenance.record(threads=threads, seed=seed)})
    return out


def show(result, kw: dict) -> None:
    for r in result:
        print(f"{r['case']} [{r['attention']}] {r['quantity']}: predicted {r['predicted']:.6g}, "
              f"measured {r['measured']:.6g}, passed {r['passed']}")


STEP = theory

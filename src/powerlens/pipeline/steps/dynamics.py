"""Token dynamics of one model over the prompt corpus, in mode `model` (real forward pass) or
`attention-only` (the paper's law): per-token alignments with each layer's leading eigenvector, gamma_t,
rho_t and the tilt against the Monte Carlo null of random subspaces (Holm), the non-leading-eigenvector null,
secondary token- and prompt-level tests, and (attention-only) the L2-law diagnostics and a bias-free control."""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerlens.core.corpus import read_prompts
from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_generated_json, read_generated_npz, write_csv, write_json, write_npz
from powerlens.core.runtime import resolve_device, set_threads
from powerlens.models.adapters import get_adapter
from powerlens.models.sources import load_model, load_tokenizer
from powerlens.outputs import provenance
from powerlens.pipeline.options import ALPHA, CRITERIA, NULL_DRAWS_CAP, Option, model_files

if TYPE_CHECKING:
    import pandas as pd

OPTIONS = model_files("manifest", "tensors", "meta", "spectra", "prompts") + (
    Option("out-npz", "output:npz"),
    Option("out-csv", "output:csv"),
    Option("out-json", "output:json"),
    Option("mode", "wildcard:mode", choices=("model", "attention-only")),
    Option("norm", "config:dynamics.norm", choices=("l2", "layernorm")),
    Option("steps", "config:dynamics.steps", kind="int", help="attention-only steps for shared-weight models"),
    Option("long-run-prompts", "config:dynamics.long_run_prompts", kind="int",
           help="prompts that go on past the model's depth in long shared-weight runs (seeded sample)"),
    Option("batch-size", "config:dynamics.batch_size", kind="int"),
    Option("batch-tokens", "config:dynamics.batch_tokens", kind="int", help="tokens per batch once padded, at most"),
    Option("max-tokens", "config:dynamics.max_tokens", kind="int"),
    Option("seed", "config:seed", kind="int"),
    Option("device", "config:device"),
    Option("dtype", "config:dynamics.dtype", choices=("float32", "float64")),
    Option("threads", "threads", kind="int"),
    Option("null-draws", "config:dynamics.null_draws", kind="int", help="R random subspaces of the Monte Carlo null"),
    Option("control", "config:dynamics.bias_free_control", kind="yesno",
           help="attention-only: also run the bias-free control (attention biases removed)"),
    ALPHA,
    NULL_DRAWS_CAP,
    CRITERIA,
    Option("robustness", "config:dynamics.robustness", kind="yesno",
           help="trained models: also decide the verdict statistics under 3 other Monte Carlo seeds and on 3 "
                "disjoint thirds of the corpus (table_robustness)"),
    Option("out-robustness", "output:robustness",
           help="CSV file to write: the verdict statistics of each robustness variant, one row per variant and "
                "layer"),
)


def dynamics(manifest_path, weights_st, weights_json, *, spectra_npz, prompts_path, out_npz, out_csv, out_json,
             mode: str, norm: str, steps: int, batch_size: int, max_tokens: int, seed: int, device: str,
             dtype: str, threads: int, null_draws: int, null_draws_cap: int, control: bool, long_run_prompts: int,
             batch_tokens: int,
             alpha: float, criteria: dict, robustness: bool, out_robustness) -> "pd.DataFrame":
    """Token dynamics of one model in one mode (:func:`powerlens.analysis.dynamics.analyse`): per-token
    alignments (.npz), per-layer statistics (.csv), the robustness variants' tests (trained models; a header
    only for random weights, which are never evidence), what was run (.json)."""
    # first, before torch is imported: huge pages for the arrays made and freed per chunk of the null's draws
    threads = set_threads(threads, huge_pages=True)
    import torch

    from powerlens.analysis.dynamics import DynamicsOptions, analyse
    from powerlens.analysis.verdict_tests import decision_rule
    from powerlens.models.weights import ModelWeights

    if mode not in ("model", "attention-only"):
        raise PowerlensError(f"unknown dynamics mode {mode!r}", "use `model` or `attention-only`")
    device = resolve_device(device)
    torch.manual_seed(seed)
    prompts = read_prompts(prompts_path)
    man = read_generated_json(manifest_path, "fetch_model")
    # n_layers, shared_weights: model mode needs no extracted tensor
    meta = read_generated_json(weights_json, "extract")
    tok = load_tokenizer(man)
    opts = DynamicsOptions(mode=mode, norm=norm, steps=steps, long_run_prompts=long_run_prompts,
                           batch_size=batch_size, batch_tokens=batch_tokens, max_tokens=max_tokens, dtype=dtype,
                           null_draws=null_draws, bias_free_control=control, seed=seed, device=device,
                           criteria=decision_rule(criteria, alpha, null_draws_cap),
                           robustness=bool(robustness and not man["random_weights"]),
                           # a matched control decides no verdict: R0 draws, no extension (paper.md section 4e)
                           extend=not man["random_weights"])
    run = analyse(lambda: load_model(man, dtype=torch.float32).to(device), get_adapter(man["arch"]), tok, prompts,
                  read_generated_npz(spectra_npz, "spectra"), lambda: ModelWeights.load(weights_st, weights_json),
                  depth=int(meta["n_layers"]), d_model=int(meta["d_model"]), options=opts)
    df = run.table
    df.insert(0, "mode", mode)
    df.insert(0, "model", man["model"])
    df["weights"] = man["weights_label"]
    write_npz(out_npz, run.arrays)
    write_csv(out_csv, df)
    rob = run.robustness
    rob.insert(0, "mode", mode)
    rob.insert(0, "model", man["model"])
    write_csv(out_robustness, rob)
    write_json(out_json, _record(man, meta, run, opts, n_prompts=len(prompts), tokenizer=type(tok).__name__,
                                 threads=threads))
    return df


def _record(man: dict, meta: dict, run, o, *, n_prompts: int, tokenizer: str, threads: int) -> dict:
    """What one dynamics run did (its JSON): corpus accounting, settings, the null, provenance."""
    bs, ids, special, subset, n_steps = run.batches, run.ids, run.special, run.long_run_subset, run.n_steps
    mode, norm, dtype, device, seed = o.mode, o.norm, o.dtype, o.device, o.seed
    n_stat = int(sum(int(b.stat_mask.sum()) for b in bs))
    return {
        "model": man["model"], "mode": mode, "weights_label": man["weights_label"],
        "random_weights": man["random_weights"], "n_prompts": n_prompts, "n_tokens": n_stat,
        "n_positions": int(sum(len(x) for x in ids)), "n_special_excluded": int(sum(sum(s) for s in special)),
        "truncated_prompts": run.truncated, "max_tokens": run.max_len, "batch_size": o.batch_size, "steps": n_steps,
        "batch_tokens": o.batch_tokens, "n_batches": len(bs),
        "padding_share": round(1 - sum(int(b.mask.sum()) for b in bs) / sum(b.mask.numel() for b in bs), 4),
        "past_depth": ("none: the run stops at the model's depth" if subset is None else
                       {"prompts": len(subset), "prompt_indices": subset, "asked": int(o.long_run_prompts),
                        "choice": "seeded sample of the corpus (numpy default_rng([seed, 11])); the model's own "
                                  "depths use every prompt (our choice)"}),
        "norm": norm if mode == "attention-only" else "model's own LayerNorm",
        "dtype": dtype if mode == "attention-only" else "float32 forward, float64 metrics",
        "x0": "embedding output (ALBERT: after embedding_hidden_mapping_in)",
        "special_tokens": ("kept in the forward pass, excluded from the statistics: BOS/CLS/SEP are not prompt "
                           "text (paper.md section 4)"),
        "tokenizer": tokenizer, "device": device, "seed": seed,
        "null": {"draws": int(o.null_draws), "R0": int(run.arrays["null_R0"]), **draws(run), "kind": (
            "paper.md sections 4, 4b, 4c and 4d (revision 5). Monte Carlo null: random subspaces of the lead's "
            "dimension (Haar), one seeded stream per dimension shared by all layers; p = (#{null > lead} + U (1 + "
            "#{null == lead})) / (1 + R) with a seeded tie-break U, one-sided, with its 99% interval "
            "(Clopper-Pearson, covering every U); Holm across the model's depth for the per-layer marks "
            "(<test>_sig). A claim reads one p: the partial conjunction of the layers' p (powerlens.analysis."
            "across_layers). R0 is the smallest count at which every rule read in this mode can reach "
            "significance, at least `draws`; a test whose criterion can still move is extended where it decides "
            f"(R0, 10 R0, 100 R0, at most {o.criteria['null_draws_cap']}; R per test in the CSV, column <test>_R). "
            "The lead's "
            "rank among F's other eigen-directions of its kind (|lambda| > 1e-9 |lambda_1|; columns <test>_eig_*) is "
            "summed across the model by the claims (the specificity p), beside the same sums of its members "
            "followed from layer to layer (<test>_eig_chains, _chains_ge, _chains_ge_lo, _chains_ge_hi: chains "
            "reaching the lead's sum, the same on every row; _dep: the between-layer rank correlation they imply)"),
            "alpha": float(o.criteria["alpha"]), "variants": list(o.variants),
            "extension": (f"where a criterion read in this mode can still move: R0, 10 R0, 100 R0 (at most "
                          f"{o.criteria['null_draws_cap']})"
                          if o.extend else "off: random weights of a paper architecture are never evidence, so no "
                          "test is extended past R0 draws (an undecided layer stays undecided)"),
            "depths_tested": int(min(n_steps, int(meta["n_layers"])))},
        "statistics_dtype": "float64",
        "arithmetic": {"null_projection_flops": float(run.null_flops), "counts": (
            "floating-point operations of the Monte Carlo null's projections this run made (2 n d R r per product "
            "of n tokens with R random subspaces of dimension r in R^d): every draw up to each test's extension, "
            "every robustness stream, both dimensions, every state; the speed table's bound reads it")},
        "bias_free_control": bool(o.bias_free_control and mode != "model"),
        "provenance": provenance.record(threads=threads, seed=seed, device=device),
    }


def draws(run) -> dict:
    """The Monte Carlo draws the run's tests used (paper.md section 4d: every test records its draws): the sum
    over tests and depths of each test's R, for the main statistics and with the robustness variants."""
    from powerlens.analysis.verdict_tests import TESTS

    def total(df) -> int:
        cols = [t.col("R") for t in TESTS if t.col("R") in df]
        return int(df[cols].fillna(0).to_numpy().sum()) if cols and len(df) else 0

    main = total(run.table)
    return {"draws_main": main, "draws_total": main + total(run.robustness),
            "draws_per_test": {t.prefix: int(run.table[t.col("R")].fillna(0).sum()) for t in TESTS
                               if t.col("R") in run.table}}


def show(result, kw: dict) -> None:
    from powerlens.analysis.verdict_tests import GAMMA, RHO, TILT, Field, Sums

    cols = ["layer", Sums.LEADING_TYPE] + [c for s in (GAMMA, RHO) for c in (s.value, s.col(Field.NULL_Q95),
                                                                           s.col(Field.P))]
    cols += [TILT.value, TILT.col(Field.P), TILT.col(Field.EIG_PCT)]
    print(result[cols].head(60).to_string(index=False))


STEP = dynamics

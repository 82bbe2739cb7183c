"""table_speed (issue 40): each heavy job's wall time from its benchmark file beside the arithmetic lower bound
at a given peak; the spectra bound is the eigen-solves' count, the ratio wall / bound."""

import pandas as pd
import pytest

from powerlens.models.archs import twin_config
from powerlens.pipeline.config import schema_defaults
from powerlens.pipeline.resources import EIG_FLOPS_N3
from powerlens.pipeline.speed import bound_s, speed_rows


def bench(path, s):
    path.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{s}\t0:00:01\t100.0\t{s * 0.9}\n")
    return str(path)


def test_wall_time_beside_the_arithmetic_bound(tmp_path):
    cfg = schema_defaults()
    cfg["models"] = {"t": {"source": "random", "twin_of": "gpt2", "arch": "gpt2", "seed": 0}}
    peak = {"float32": 1e10, "float64": 5e9}
    jobs = [{"model": "t", "rule": "spectra", "benchmark": bench(tmp_path / "a.tsv", 2.0), "tokens": 0,
             "targets": 0, "weights_label": "random weights"},
            {"model": "t", "rule": "dynamics_model", "benchmark": bench(tmp_path / "b.tsv", 30.0), "tokens": 1000,
             "targets": 0, "weights_label": "random weights"},
            {"model": "t", "rule": "steering", "benchmark": bench(tmp_path / "c.tsv", 40.0), "tokens": 500,
             "targets": 3, "weights_label": "random weights"}]
    df = speed_rows(cfg, jobs, peak, {"t": "GPT-2 twin"})
    assert list(df["step"]) == ["spectra", "dynamics (model)", "steering"] and set(df["model"]) == {"GPT-2 twin"}
    k = twin_config("gpt2").kwargs
    spectra_s = EIG_FLOPS_N3 * k["n_layer"] * k["n_embd"] ** 3 / peak["float64"]
    assert df.loc[0, "lower bound (s)"] == pytest.approx(spectra_s, rel=5e-3)
    assert df.loc[0, "wall / bound"] == pytest.approx(2.0 / spectra_s, rel=5e-3)
    # the forward pass counts 2 flops per multiply-add per token: more tokens, a larger bound
    more = speed_rows(cfg, [{**jobs[1], "tokens": 2000}], peak, {})
    assert more.loc[0, "lower bound (s)"] > df.loc[1, "lower bound (s)"] and df.loc[1, "wall (s)"] == 30.0
    assert (df["wall / bound"] > 0).all() and (df["arithmetic (GFLOP)"] > 0).all()
    assert bound_s({}, peak) != bound_s({}, peak)  # nothing counted: NaN, never 0
    # a tiny job's arithmetic keeps three significant figures: never printed as 0 beside a nonzero bound
    cfg["models"]["s"] = {"source": "random", "twin_of": "tiny-albert", "arch": "albert", "seed": 0}
    tiny = speed_rows(cfg, [{**jobs[0], "model": "s"}], peak, {}).iloc[0]
    assert tiny["arithmetic (GFLOP)"] * 1e9 / peak["float64"] == pytest.approx(tiny["lower bound (s)"], rel=5e-3)


def test_the_bound_counts_the_lm_head_and_the_generated_tokens(tmp_path):
    """Steering with an LM head computes the logits over the vocabulary on every token of every pass, and each
    greedily generated token is a forward pass with the head: both raise the bound by exactly their flops."""
    from powerlens.pipeline.resources import size_of
    from powerlens.pipeline.speed import generated_tokens, step_flops

    cfg = schema_defaults()
    cfg["models"] = {"t": {"source": "random", "twin_of": "gpt2", "arch": "gpt2", "seed": 0}}
    size = size_of(twin_config("gpt2"))
    base = step_flops("steering", cfg, "t", tokens=500, targets=2)
    head = step_flops("steering", cfg, "t", tokens=500, targets=2, head=True)
    k_on = sum(1 for k in cfg["steering"]["kappas"] if k != 0)
    passes = 2 * (1 + 2 * k_on)
    assert head["float32"] - base["float32"] == pytest.approx(2.0 * 500 * size.d_model * size.vocab * passes)
    assert size.vocab == twin_config("gpt2").kwargs["vocab_size"] > 0
    cont = cfg["steering"]["continuations"]
    n = generated_tokens(cfg, head=True, causal=True, token_targets=1)
    assert n == len(cfg["steering"]["kappas"]) * 2 * len(cont["prompts"]) * cont["new_tokens"] > 0
    assert generated_tokens(cfg, head=False, causal=True, token_targets=1) == 0  # no head, nothing generated
    assert generated_tokens(cfg, head=True, causal=False, token_targets=1) == 0  # an encoder does not generate
    gen = step_flops("steering", cfg, "t", tokens=500, targets=2, head=True, generated=n)
    assert gen["float32"] - head["float32"] == pytest.approx(2.0 * n * (size.forward_params
                                                                       + size.d_model * size.vocab))


def test_the_projection_count_is_each_products_arithmetic_and_only_inside_its_block():
    import torch

    from powerlens.analysis.nulls import counting_projections, subspace_alignments

    x, U = torch.randn(7, 5, dtype=torch.float64), torch.randn(5, 12, dtype=torch.float64)  # [n, d], [d, R r]
    subspace_alignments(x, U, 2)  # nobody counts: nothing to add to
    with counting_projections() as c:
        subspace_alignments(x, U, 2)
        subspace_alignments(x[:3], U[:, :4], 1)
    subspace_alignments(x, U, 1)  # after the block: not counted
    assert c.calls == 2 and c.flops == 2.0 * 7 * 5 * 12 + 2.0 * 3 * 5 * 4


def test_the_dynamics_bound_holds_every_projection_the_step_counted(prepared_twin, tmp_path):
    """The bound's null term is the step's own count: at least x(0) and every layer's output against the first
    R draws (what the old estimate approximated), more with the robustness streams and with the extension of
    undecided tests; the speed table uses it exactly and says so, and marks a run without a count."""
    import powerlens
    from powerlens.analysis.dynamics import DynamicsOptions, analyse
    from powerlens.analysis.spectra import spectra_arrays
    from powerlens.analysis.verdict_tests import decision_rule
    from powerlens.pipeline.speed import NULL_COUNT, step_flops

    d, rec = prepared_twin("tiny-gpt2")
    lens = powerlens.Lens.from_pretrained(rec["path"], head=False)
    w, specs = lens.weights, lens.spectra(seed=0)
    prompts = ["The cat sat on the mat.", "Water boils at one hundred degrees.", "A b c d e f g h i j."]
    cfg = schema_defaults()
    dyn = {k: cfg["dynamics"][k] for k in ("norm", "steps", "long_run_prompts", "batch_size", "batch_tokens",
                                           "max_tokens", "dtype")}
    R = 200
    counts = {}
    for robust, extend in ((False, False), (True, False), (False, True)):
        o = DynamicsOptions(mode="model", null_draws=R, bias_free_control=False, seed=0, robustness=robust,
                            extend=extend, **dyn,
                            criteria=decision_rule(cfg["claims"], cfg["dynamics"]["alpha"],
                                                   cfg["dynamics"]["null_draws_cap"]))
        run = analyse(lambda: lens.model, lens.adapter, lens.tokenizer, prompts,
                      spectra_arrays(specs.layers, list(w.layer_map)), lambda: w, depth=w.n_layers,
                      d_model=w.d_model, options=o, progress=False)
        counts[robust, extend] = run.null_flops
    n = int(sum(int(b.stat_mask.sum()) for b in run.batches))
    main = counts[False, False]
    assert main >= 2.0 * n * w.d_model * R * (w.n_layers + 1)  # x(0) and each layer's output, first R draws
    assert counts[True, False] > main  # the robustness streams are projected too, and counted
    assert counts[False, True] > main  # so are the draws past R of the tests the extension decides
    cfg["models"] = {"t": {"source": "random", "twin_of": "tiny-gpt2", "arch": "gpt2", "seed": 3}}
    counted = step_flops("dynamics_model", cfg, "t", tokens=n, targets=0, null_flops=main)
    estimate = step_flops("dynamics_model", cfg, "t", tokens=n, targets=0)
    assert counted["float64"] == main and counted["float32"] == estimate["float32"]
    assert estimate["float64"] == 2.0 * 2 * cfg["dynamics"]["null_draws"] * w.d_model * n * w.n_layers
    job = {"model": "t", "rule": "dynamics_model", "benchmark": bench(tmp_path / "d.tsv", 3.0), "tokens": n,
           "targets": 0, "weights_label": "random weights"}
    spectra = {**job, "rule": "spectra", "tokens": 0, "benchmark": bench(tmp_path / "s.tsv", 1.0)}
    df = speed_rows(cfg, [{**job, "null_flops": main}, job, spectra], {"float32": 1e10, "float64": 5e9}, {})
    assert list(df["null projections"][:2]) == [NULL_COUNT["counted"], NULL_COUNT["estimate"]]
    assert pd.isna(df["null projections"].iloc[2])
    # a step that draws no null prints a dash, footnoted with why, never "none" or "nan"
    from powerlens.outputs.tables import DASH, write_table
    from powerlens.pipeline.speed import NO_NULL

    write_table(df, tmp_path / "table_speed", caption="Speed.", missing=NO_NULL)
    shown = pd.read_csv(tmp_path / "table_speed.csv", dtype=str, keep_default_na=False)
    assert list(shown["null projections"])[-1] == DASH
    assert NO_NULL["null projections"] in (tmp_path / "table_speed.md").read_text()


def test_the_run_total_adds_the_other_jobs_benchmark_files_to_the_heavy_ones(tmp_path):
    """table_speed's 'all timed jobs' row: the heavy rows' wall and CPU times plus every other benchmark file's,
    and the number of files; the heavy total row stays the heavy jobs' alone."""
    import pandas as pd

    from powerlens.outputs.tables import RUN_MODEL, TOTAL_MODEL
    from powerlens.pipeline.speed import with_total

    heavy = pd.DataFrame({"model": ["a", "b"], "step": ["spectra", "steering"], "wall (s)": [1.5, 2.5],
                          "CPU (s)": [2.0, 3.0], "lower bound (s)": [0.5, 0.5], "weights": ["trained weights"] * 2})
    other = []
    for i, (s, cpu) in enumerate(((10.0, 12.0), (0.25, 0.5))):
        p = tmp_path / f"b{i}.tsv"
        p.write_text("s\th:m:s\tmax_rss\tcpu_time\n" f"{s}\t0:00:10\t100\t{cpu}\n")
        other.append(str(p))
    df = with_total(heavy, other)
    run = df[df["model"] == RUN_MODEL].iloc[0]
    tot = df[df["model"] == TOTAL_MODEL].iloc[0]
    assert (run["wall (s)"], run["CPU (s)"], run["jobs"]) == (14.2, 17.5, 4)
    assert tot["wall (s)"] == 4.0 and list(df["model"][:2]) == ["a", "b"]
    assert RUN_MODEL not in set(with_total(heavy)["model"])  # no other files given: the heavy total only


def test_the_steering_bound_counts_the_passes_the_step_ran(tmp_path):
    """Steering's bound reads the step's own count of its passes (steering.json's work): the whole model on the
    tokens of whole passes, one layer on the replayed ones, the head on every counted token of every pass (the
    unrelated prompts' KL passes and the beta sweep included); without the count, the settings' passes over the
    steering prompts alone, which is less. The CPU column takes the step's own CPU time over the benchmark's
    sampled one, and CPU / (threads x bound) is that time over the bound's CPU time."""
    from powerlens.pipeline.resources import size_of
    from powerlens.pipeline.speed import step_cpu, step_flops

    cfg = schema_defaults()
    cfg["models"] = {"t": {"source": "random", "twin_of": "gpt2", "arch": "gpt2", "seed": 0}}
    size = size_of(twin_config("gpt2"))
    work = {"whole": 300, "last_depth": 5100, "head": 5400, "passes": 36}
    bare = step_flops("steering", cfg, "t", tokens=150, targets=2, passes=work)
    head = step_flops("steering", cfg, "t", tokens=150, targets=2, head=True, passes=work)
    assert head["float32"] - bare["float32"] == pytest.approx(2.0 * 5400 * size.d_model * size.vocab)
    layer = size.forward_params / size.n_layers
    assert bare["float32"] == pytest.approx(2.0 * (300 * size.forward_params + 5100 * layer))
    estimate = step_flops("steering", cfg, "t", tokens=150, targets=2, head=True)
    assert estimate["float32"] < head["float32"] and estimate["float64"] == head["float64"]  # law, eigen: the same
    peak = {"float32": 1e10, "float64": 5e9}
    job = {"model": "t", "rule": "steering", "benchmark": bench(tmp_path / "s.tsv", 40.0), "tokens": 150,
           "targets": 2, "head": True, "passes": work, "weights_label": "random weights"}
    sampled, own = speed_rows(cfg, [job, {**job, "cpu": 70.0}], peak, {}, threads=2).to_dict("records")
    assert sampled["CPU (s)"] == 36.0 and own["CPU (s)"] == 70.0  # the benchmark's 0.9 x wall, then the step's own
    assert own["CPU / (threads x bound)"] == pytest.approx(70.0 / (2 * own["lower bound (s)"]), rel=5e-3)
    assert speed_rows(cfg, [job], peak, {})["CPU / (threads x bound)"].isna().all()  # no thread count: no ratio
    assert step_cpu({"provenance": {"cpu_s": 12.5}}) == 12.5 and step_cpu({"provenance": {}}) is None

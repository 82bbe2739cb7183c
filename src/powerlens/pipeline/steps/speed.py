"""Write table_speed: each heavy job's wall time (its rule's benchmark file) beside its arithmetic lower bound
at the matrix-product peak measured here at the steps' thread count, and the ratio
(:mod:`powerlens.pipeline.speed`)."""

from __future__ import annotations

from powerlens.pipeline.options import Option, show_table

OPTIONS = (
    Option("config", "param:config", kind="json", help="the run's config as JSON (models, dynamics, steering)"),
    Option("labels", "param:labels", kind="json"),
    Option("meta", "input:meta", many=True, help="weights.json of every model (the spectra jobs' order)"),
    Option("bench-spectra", "input:bench_spectra", many=True, help="the spectra rule's benchmark files"),
    Option("dynamics", "input:dynamics", many=True, help="dynamics-<mode>.json (model, mode, counted tokens)"),
    Option("bench-dynamics", "input:bench_dynamics", many=True, help="the dynamics rule's benchmark files"),
    Option("steering", "input:steering", many=True, help="steering.csv of every model (targets, tokens)"),
    Option("bench-steering", "input:bench_steering", many=True, help="the steering rule's benchmark files"),
    Option("steering-json", "input:steering_json", many=True, help="steering.json of every model (the step's count "
           "of its passes; the order of --steering)"),
    Option("bench-other", "input:bench_other", many=True, help="the other timed jobs' benchmark files (fetch, "
           "extraction and its check, theory): counted in the run's total row only"),
    Option("stem", "param:stem", help="table_speed stem"),
    Option("threads", "param:threads", kind="int", help="the heavy steps' thread count: the peak is measured at it "
           "(the rule itself reserves more cores, so that no other job runs beside the measurement)"),
)


def speed(*, config: dict, labels: dict, meta: list[str], bench_spectra: list[str], dynamics: list[str],
          bench_dynamics: list[str], steering: list[str], bench_steering: list[str], stem: str, threads: int,
          bench_other: list[str] | None = None, steering_json: list[str] | None = None):
    """table_speed's four files, replaced together or not at all (an interrupt during the peak measurement
    leaves the previous table whole)."""
    from powerlens.outputs.staging import staged

    with staged({"stem": stem}) as s:
        return _speed(config, labels, meta, bench_spectra, dynamics, bench_dynamics, steering, bench_steering,
                      s["stem"], threads, bench_other or [], steering_json)


def _speed(config: dict, labels: dict, meta: list[str], bench_spectra: list[str], dynamics: list[str],
           bench_dynamics: list[str], steering: list[str], bench_steering: list[str], stem: str, threads: int,
           bench_other: list[str], steering_json: list[str] | None):
    from powerlens.outputs.tables import OTHER_JOBS, write_table
    from powerlens.pipeline.speed import COUNTED, NO_NULL, matmul_peak, speed_jobs, speed_rows, with_total

    jobs = speed_jobs(config, meta, bench_spectra, dynamics, bench_dynamics, steering, bench_steering, steering_json)
    peak = matmul_peak(threads)
    df = with_total(speed_rows(config, jobs, peak, labels, threads), bench_other, threads)
    write_table(df, stem, caption=(
        f"Speed: each heavy job's wall time (its rule's benchmark file) beside its arithmetic lower bound at this "
        f"machine's matrix-product peak at {threads} threads, measured in this step (float32 "
        f"{peak['float32'] / 1e9:.1f} GFLOP/s, float64 {peak['float64'] / 1e9:.1f} GFLOP/s). The bound is "
        f"{COUNTED}. CPU: the step's own CPU time (user and system, every thread) where it records it "
        "(dynamics, steering), else its benchmark file's (Snakemake samples it every 30 s after the first 15, so "
        "that reads low); CPU / (threads x bound): that time over the bound's CPU time at "
        f"{threads} threads, the distance from the bound whatever ran beside the job (jobs run side by side, as "
        "make offline runs two to a core, stretch each other's wall time). Tokens: the counted tokens (specials "
        "excluded) the step processed. Random-weight twins "
        "are timed like the trained models. The row 'all heavy jobs' is the total over every job above: the "
        "sums of their wall and CPU times, arithmetic, bounds and draws, and the ratio of the sums; the row 'all timed "
        f"jobs' adds the other jobs' benchmark files ({OTHER_JOBS}; no bound counted) to the heavy jobs' times: "
        "the run's summed job time (jobs run side by side, so the run's elapsed time is shorter with more cores; "
        "plots, tables and the article, seconds each, are not counted)."), missing=NO_NULL)
    return df


show = show_table
STEP = speed

# The claims audit and the run's provenance manifest (both shown first in `snakemake --report`).


rule claims:
    """table_claim_verdicts (one row per claim, one column per trained family), table_claims (each claim's
    criterion from config `claims:`, measurement, null and verdict) and table_claims_twins (random weights)."""
    input:
        meta=expand(rules.extract.output.meta, model=MODELS),
        spectra=expand(rules.spectra.output.csv, model=MODELS),
        dynamics=expand(rules.dynamics.output.csv, model=MODELS, mode=MODES),
        theory=expand(rules.theory.output.json, case=THEORY_CASES),
        steering=expand(rules.steering.output.csv, model=STEERED),
        robustness=expand(rules.dynamics.output.robustness, model=MODELS, mode=MODES),
        quantized=expand(rules.quantization.output.dynamics, model=config["quantization"]["models"]),
    output:
        **table_outputs("table_claim_verdicts", "1 Claims", key="verdicts"),
        **table_outputs("table_robustness", "1 Claims", key="robust"),
        **table_outputs("table_claims", "1 Claims", key="table"),
        **table_outputs("table_claims_twins", TWINS_CATEGORY, key="twins"),
        record=f"paper_tables/{RUN}/claims_record.json",  # sha256 of the tables above: the article checks them
    params:
        code=step_code("claims"),  # rerun when the step's code changes
        py=PY,
        flags=step_flags("claims"),
        labels=labels_json(),
        table=stem_of("table"),
        verdicts=stem_of("verdicts"),
        twins=stem_of("twins"),
        robust=stem_of("robust"),
    log:
        step_log("claims"),
    benchmark:
        step_benchmark("claims")
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        step_shell("claims")


rule provenance:
    """provenance.json: versions, BLAS, models with revisions and weight sha256, config hash, seeds, threads,
    device, start and end time."""
    input:
        manifests=expand(rules.fetch_model.output.manifest, model=MODELS),
        records=provenance_records(),
        prompts=PROMPTS,
    output:
        manifest=report(
            results("provenance.json"),
            caption="../report/provenance.rst",
            category="7 Provenance",
        ),
        choices=report(
            results("modelling_choices.html"),
            caption="../report/modelling_choices.rst",
            category="7 Provenance",
        ),
    params:
        code=step_code("provenance"),  # rerun when the step's code changes
        corpus=CORPUS_SHA256,  # rerun when the prompt corpus's content changes
        py=PY,
        config=params_json(config),
    log:
        step_log("provenance"),
    benchmark:
        step_benchmark("provenance")
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    localrule: True
    conda:
        ENV
    shell:
        step_shell("provenance")


rule speed:
    """table_speed: each heavy job's wall time (its benchmark file) beside its arithmetic lower bound at the
    matrix-product peak measured here, and the ratio. The benchmark files are ancient(): a job re-run with
    the same outputs (a forced rerun) leaves the table as it is; `--forcerun speed` times it again."""
    input:
        meta=expand(rules.extract.output.meta, model=MODELS),
        bench_spectra=ancient(expand(rules.spectra.benchmark, model=MODELS)),
        dynamics=expand(rules.dynamics.output.json, model=MODELS, mode=MODES),
        bench_dynamics=ancient(expand(rules.dynamics.benchmark, model=MODELS, mode=MODES)),
        steering=expand(rules.steering.output.csv, model=STEERED),
        bench_steering=ancient(expand(rules.steering.benchmark, model=STEERED)),
        steering_json=expand(rules.steering.output.json, model=STEERED),
        # the run's total row adds these jobs' times (powerlens.pipeline.speed.OTHER_JOBS)
        bench_other=ancient(expand([rules.fetch_model.benchmark, rules.extract.benchmark,
                                    rules.check_extraction.benchmark], model=MODELS)
                            + expand(rules.theory.benchmark, case=THEORY_CASES)),
    output:
        **table_outputs("table_speed", "7 Provenance", key="table"),
    params:
        code=step_code("speed"),  # rerun when the step's code changes
        py=PY,
        config=params_json({k: config[k] for k in ("models", "dynamics", "steering")}),
        labels=labels_json(),
        stem=stem_of("table"),
        threads=STEP_THREADS,  # the peak is measured at the heavy steps' thread count
    log:
        step_log("speed"),
    benchmark:
        step_benchmark("speed")
    # alone on the machine (make offline runs two jobs to a core): a peak measured beside another job is that
    # job's share, and would make every bound look lower
    threads: all_cores
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        ENV
    shell:
        step_shell("speed")


#: Every figure a claim section may show (the claims' FIG column): inputs, so none is older than its data.
ARTICLE_FIGURES = ("fig_gamma", "fig_rho", "fig_tilt", "fig_gap", "fig_gamma_gap", "fig_spectra", "fig_theory",
                   "fig_steering", "fig_albert_consensus", "fig_albert_rotation")


rule article:
    """replication.html and replication.pdf: the answer to "which claims hold, and how sure are we", every
    number drawn from the run's tables, figures and provenance (read back before writing)."""
    input:
        verdicts=f"paper_tables/{RUN}/table_claim_verdicts.csv",
        claims=f"paper_tables/{RUN}/table_claims.csv",
        robustness=f"paper_tables/{RUN}/table_robustness.csv",
        provenance=rules.provenance.output.manifest,
        speed=rules.speed.output.table_csv,
        figures=[f"figures/{RUN}/{f}.png" for f in ARTICLE_FIGURES if figure_written(f)],
        claims_record=rules.claims.output.record,
        models=rules.table_models.output.table_csv,
        models_record=rules.table_models.output.record,  # the stand-in table and the summary read table_models
        paper_config=PAPER_CONFIG,  # the paper's models and revisions: the article's stand-in table
    output:
        # update(): Snakemake neither deletes the previous article before the job nor leaves it deleted after a
        # failure (it keeps a copy and restores it); the step replaces both files together at its end.
        html=update(report(results("replication.html"), caption="../report/replication.rst",
                           category="0 Replication")),
        # the PDF is in the report too (the front page's "PDF" link opens it; over 2 MB its entry opens blank)
        pdf=update(report(results("replication.pdf"), caption="../report/replication_pdf.rst",
                          category="0 Replication")),
    params:
        code=step_code("article"),  # rerun when the step's code changes
        py=PY,
        flags=step_flags("article"),
        index=output_index,
        command=run_command(),
    log:
        step_log("article"),
    benchmark:
        step_benchmark("article")
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        step_shell("article")

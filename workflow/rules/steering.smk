# Steering: rank-1 change of the last layer's output matrix vs activation addition (claim C9).


rule steering:
    """Kappa sweep per target: principal-eigenvector check, alignment with u, target-token probability, KL."""
    input:
        manifest=rules.fetch_model.output.manifest,
        tensors=rules.extract.output.tensors,
        meta=rules.extract.output.meta,
        spectra=rules.spectra.output.npz,
        prompts=PROMPTS,
    output:
        csv=results("{model}/steering.csv"),
        json=results("{model}/steering.json"),
        continuations=results("{model}/steering_continuations.csv"),
    params:
        code=step_code("steering"),  # rerun when the step's code changes
        corpus=CORPUS_SHA256,  # rerun when the prompt corpus's content changes
        flags=step_flags("steering"),
        py=PY,
        targets=steering_targets_json,
    log:
        step_log("steering"),
    benchmark:
        step_benchmark("steering")
    threads: STEP_THREADS
    resources:
        mem_mb=fitted("steering", "mem_mb"),
        runtime=fitted("steering", "runtime"),
        gpu=gpu_request,
    conda:
        ENV
    shell:
        step_shell("steering")


rule plot_steering:
    """fig_steering and table_steering."""
    input:
        csv=expand(rules.steering.output.csv, model=STEERED),
        continuations=expand(rules.steering.output.continuations, model=STEERED),
        meta=expand(rules.extract.output.meta, model=STEERED),
    output:
        **figure_outputs("fig_steering", "6 Steering", key="fig"),
        **table_outputs("table_steering", "6 Steering", key="table"),
        **table_outputs("table_continuations", "6 Steering", key="continuations"),
    params:
        code=step_code("plot_steering"),  # rerun when the step's code changes
        flags=step_flags("plot_steering"),
        py=PY,
        labels=labels_json(),
        fig=stem_of("fig", "fig_steering"),
        parts=figure_parts_json("fig_steering"),
        table=stem_of("table"),
        continuations=stem_of("continuations"),
    log:
        step_log("plot_steering"),
    benchmark:
        step_benchmark("plot_steering")
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        step_shell("plot_steering")

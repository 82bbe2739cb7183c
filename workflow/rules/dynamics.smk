# Token dynamics over the prompt corpus: real forward pass and the paper's attention-only law.


rule dynamics:
    """Per-token alignments with each layer's leading eigenvector; gamma_t, rho_t, sign tests, nulls."""
    input:
        manifest=rules.fetch_model.output.manifest,
        tensors=rules.extract.output.tensors,
        meta=rules.extract.output.meta,
        spectra=rules.spectra.output.npz,
        prompts=PROMPTS,
    output:
        npz=results("{model}/dynamics-{mode}.npz"),
        csv=results("{model}/dynamics-{mode}.csv"),
        json=results("{model}/dynamics-{mode}.json"),
        robustness=results("{model}/dynamics-{mode}-robustness.csv"),
    params:
        code=step_code("dynamics"),  # rerun when the step's code changes
        corpus=CORPUS_SHA256,  # rerun when the prompt corpus's content changes
        flags=step_flags("dynamics"),
        py=PY,
    log:
        step_log("dynamics"),
    benchmark:
        step_benchmark("dynamics")
    threads: STEP_THREADS
    resources:
        mem_mb=fitted("dynamics", "mem_mb"),
        runtime=fitted("dynamics", "runtime"),
        gpu=gpu_request,
    conda:
        ENV
    shell:
        step_shell("dynamics")


rule plot_dynamics:
    """fig_gamma, fig_rho, fig_tilt, fig_albert_consensus, fig_albert_rotation, fig_gamma_gap (C8, with the
    spectra tables) and table_alignment; each figure's parts as FIGURE_PARTS says (no ALBERT figure without an
    ALBERT model of that kind, no _twins figure without a random-weight model)."""
    input:
        csv=expand(rules.dynamics.output.csv, model=MODELS, mode=MODES),
        npz=expand(rules.dynamics.output.npz, model=MODELS, mode=MODES),
        meta=expand(rules.extract.output.meta, model=MODELS),
        spectra=expand(rules.spectra.output.csv, model=MODELS),
    output:
        **figure_outputs("fig_gamma", "4 Dynamics", key="gamma"),
        **figure_outputs("fig_rho", "4 Dynamics", key="rho"),
        **figure_outputs("fig_tilt", "4 Dynamics", key="tilt"),
        **figure_outputs("fig_albert_consensus", "4 Dynamics", key="consensus"),
        **figure_outputs("fig_albert_rotation", "4 Dynamics", key="rotation"),
        **figure_outputs("fig_gamma_gap", "4 Dynamics", key="gamma_gap"),
        **table_outputs("table_alignment", "4 Dynamics", key="table"),
    params:
        code=step_code("plot_dynamics"),  # rerun when the step's code changes
        flags=step_flags("plot_dynamics"),
        py=PY,
        labels=labels_json(),
        gamma=stem_of("gamma", "fig_gamma"),
        rho=stem_of("rho", "fig_rho"),
        tilt=stem_of("tilt", "fig_tilt"),
        consensus=stem_of("consensus", "fig_albert_consensus"),
        rotation=stem_of("rotation", "fig_albert_rotation"),
        gamma_gap=stem_of("gamma_gap", "fig_gamma_gap"),
        parts=figure_parts_json("fig_gamma", "fig_rho", "fig_tilt", "fig_albert_consensus", "fig_albert_rotation",
                                "fig_gamma_gap"),
        table=stem_of("table"),
    log:
        step_log("plot_dynamics"),
    benchmark:
        step_benchmark("plot_dynamics")
    threads: 1
    resources:
        mem_mb=3000,
        runtime=10,
    conda:
        ENV
    shell:
        step_shell("plot_dynamics")

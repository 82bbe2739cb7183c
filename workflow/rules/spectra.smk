# Spectra: eigendecomposition of every layer matrix F_t = W_O W_V (float64, CPU), figures and table.


rule spectra:
    """All eigenvalues, top-k eigenvectors (canonical phase), leading plane, per-head and I + F views."""
    input:
        tensors=rules.extract.output.tensors,
        meta=rules.extract.output.meta,
    output:
        npz=results("{model}/spectra.npz"),
        csv=results("{model}/spectra.csv"),
    params:
        code=step_code("spectra"),  # rerun when the step's code changes
        flags=step_flags("spectra"),
        py=PY,
    log:
        step_log("spectra"),
    benchmark:
        step_benchmark("spectra")
    threads: STEP_THREADS
    resources:
        mem_mb=fitted("spectra", "mem_mb"),
        runtime=fitted("spectra", "runtime"),
    conda:
        ENV
    shell:
        step_shell("spectra")


rule plot_spectra:
    """fig_spectra (eigenvalues in the complex plane), fig_gap (gap and ratio vs layer), table_spectra."""
    input:
        npz=expand(rules.spectra.output.npz, model=MODELS),
        csv=expand(rules.spectra.output.csv, model=MODELS),
        meta=expand(rules.extract.output.meta, model=MODELS),
    output:
        **figure_outputs("fig_spectra", "3 Spectra", key="spectra"),
        **figure_outputs("fig_gap", "3 Spectra", key="gap"),
        **table_outputs("table_spectra", "3 Spectra", key="table"),
    params:
        code=step_code("plot_spectra"),  # rerun when the step's code changes
        flags=step_flags("plot_spectra"),
        py=PY,
        labels=labels_json(),
        fig_spectra=stem_of("spectra", "fig_spectra"),
        fig_gap=stem_of("gap", "fig_gap"),
        parts=figure_parts_json("fig_spectra", "fig_gap"),
        table=stem_of("table"),
    log:
        step_log("plot_spectra"),
    benchmark:
        step_benchmark("plot_spectra")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        step_shell("plot_spectra")

# Theory checks on synthetic layers with prescribed spectra (no checkpoint needed).


rule theory:
    """One experiment: real (consensus rate), complex (closed orbit) or bipartite (fixed point, stability)."""
    output:
        json=results("theory/{case}.json"),
        npz=results("theory/{case}.npz"),
    params:
        code=step_code("theory"),  # rerun when the step's code changes
        flags=step_flags("theory"),
        py=PY,
    log:
        step_log("theory"),
    benchmark:
        step_benchmark("theory")
    threads: 1
    resources:
        mem_mb=1500,
        runtime=20,
    conda:
        ENV
    shell:
        step_shell("theory")


rule plot_theory:
    """fig_theory (three panels) and table_theory (prediction, measurement, relative error, verdict)."""
    input:
        real_json=expand(rules.theory.output.json, case="real"),
        real_npz=expand(rules.theory.output.npz, case="real"),
        complex_json=expand(rules.theory.output.json, case="complex"),
        complex_npz=expand(rules.theory.output.npz, case="complex"),
        bipartite_json=expand(rules.theory.output.json, case="bipartite"),
        bipartite_npz=expand(rules.theory.output.npz, case="bipartite"),
    output:
        **figure_outputs("fig_theory", "5 Theory", key="fig"),
        **table_outputs("table_theory", "5 Theory", key="table"),
    params:
        code=step_code("plot_theory"),  # rerun when the step's code changes
        flags=step_flags("plot_theory"),
        py=PY,
        fig=stem_of("fig"),
        table=stem_of("table"),
    log:
        step_log("plot_theory"),
    benchmark:
        step_benchmark("plot_theory")
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        step_shell("plot_theory")

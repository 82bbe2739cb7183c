# Theory checks on synthetic layers with prescribed spectra (no checkpoint needed).


rule theory:
    """One experiment: real (consensus rate), complex (closed orbit) or bipartite (fixed point, stability)."""
    output:
        json=results("theory/{case}.json"),
        npz=results("theory/{case}.npz"),
    params:
        script=os.path.join(SCRIPTS, "theory.py"),
        py=PY,
        d=config["theory"]["d"],
        heads=config["theory"]["heads"],
        tokens=config["theory"]["tokens"],
        steps=config["theory"]["steps"],
        runs=config["theory"]["runs"],
        epsilon=config["theory"]["epsilon"],
        seed=config["seed"],
        residual="yes" if config["theory"]["residual"] else "no",
        c4_sizes=" ".join(str(x) for x in config["theory"]["c4_sizes"]),
        c4_heads=" ".join(str(x) for x in config["theory"]["c4_heads"]),
        c4_sharpness=" ".join(repr(float(x)) for x in config["theory"]["c4_sharpness"]),
        c4_eq_steps=config["theory"]["c4_equilibrium_steps"],
    log:
        f"logs/{RUN}/theory/{{case}}.log",
    benchmark:
        f"benchmarks/{RUN}/theory/{{case}}.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=20,
    conda:
        ENV
    shell:
        "{params.py:q} {params.script:q} --case {wildcards.case} --out-json {output.json:q} "
        "--out-npz {output.npz:q} --d {params.d} --heads {params.heads} --tokens {params.tokens} "
        "--steps {params.steps} --runs {params.runs} --epsilon {params.epsilon} --seed {params.seed} "
        "--residual {params.residual} --c4-sizes {params.c4_sizes} --c4-heads {params.c4_heads} "
        "--c4-sharpness {params.c4_sharpness} --c4-equilibrium-steps {params.c4_eq_steps} "
        "--threads {threads} > {log:q} 2>&1"


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
        **figure_outputs("fig_theory", "5 Theory", key="fig", twins=False),
        **table_outputs("table_theory", "5 Theory", key="table"),
    params:
        script=os.path.join(SCRIPTS, "plot_theory.py"),
        py=PY,
        dpi=config["plot"]["dpi"],
        fig=stem_of("fig"),
        table=stem_of("table"),
        alpha=config["dynamics"]["alpha"],
    log:
        f"logs/{RUN}/plot_theory.log",
    benchmark:
        f"benchmarks/{RUN}/plot_theory.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        "{params.py:q} {params.script:q} --real-json {input.real_json:q} --real-npz {input.real_npz:q} "
        "--complex-json {input.complex_json:q} --complex-npz {input.complex_npz:q} "
        "--bipartite-json {input.bipartite_json:q} --bipartite-npz {input.bipartite_npz:q} "
        "--fig {params.fig:q} --table {params.table:q} --alpha {params.alpha} "
        "--dpi {params.dpi} > {log:q} 2>&1"

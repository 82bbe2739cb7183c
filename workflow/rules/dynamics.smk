# Token dynamics over the prompt corpus: real forward pass and the paper's attention-only law.


rule dynamics:
    """Per-token alignments with each layer's leading eigenvector; gamma_t, rho_t, sign tests, nulls."""
    input:
        manifest=rules.fetch_model.output.manifest,
        tensors=rules.extract_weights.output.tensors,
        meta=rules.extract_weights.output.meta,
        spectra=rules.spectra.output.npz,
        prompts=PROMPTS,
    output:
        npz=results("{model}/dynamics-{mode}.npz"),
        csv=results("{model}/dynamics-{mode}.csv"),
        json=results("{model}/dynamics-{mode}.json"),
    params:
        script=os.path.join(SCRIPTS, "dynamics.py"),
        py=PY,
        norm=config["dynamics"]["norm"],
        steps=config["dynamics"]["steps"],
        long_run_prompts=config["dynamics"]["long_run_prompts"],
        batch_size=config["dynamics"]["batch_size"],
        batch_tokens=config["dynamics"]["batch_tokens"],
        max_tokens=config["dynamics"]["max_tokens"],
        dtype=config["dynamics"]["dtype"],
        seed=config["seed"],
        device=config["device"],
        null_draws=config["dynamics"]["null_draws"],
        control="yes" if config["dynamics"]["bias_free_control"] else "no",
    log:
        f"logs/{RUN}/dynamics/{{model}}-{{mode}}.log",
    benchmark:
        f"benchmarks/{RUN}/dynamics/{{model}}-{{mode}}.tsv"
    threads: 2
    resources:
        mem_mb=fitted("dynamics", "mem_mb"),
        runtime=fitted("dynamics", "runtime"),
        gpu=gpu_request,
    conda:
        ENV
    shell:
        "{params.py:q} {params.script:q} --manifest {input.manifest:q} --tensors {input.tensors:q} "
        "--meta {input.meta:q} --spectra {input.spectra:q} --prompts {input.prompts:q} "
        "--out-npz {output.npz:q} --out-csv {output.csv:q} --out-json {output.json:q} "
        "--mode {wildcards.mode} --norm {params.norm} --steps {params.steps} "
        "--long-run-prompts {params.long_run_prompts} --batch-size {params.batch_size} "
        "--batch-tokens {params.batch_tokens} --max-tokens {params.max_tokens} --dtype {params.dtype} "
        "--seed {params.seed} --device {params.device} --threads {threads} "
        "--null-draws {params.null_draws} --control {params.control} > {log:q} 2>&1"


rule plot_dynamics:
    """fig_gamma, fig_rho, fig_albert_consensus, fig_albert_rotation and table_alignment."""
    input:
        csv=expand(rules.dynamics.output.csv, model=MODELS, mode=MODES),
        npz=expand(rules.dynamics.output.npz, model=MODELS, mode=MODES),
        meta=expand(rules.extract_weights.output.meta, model=MODELS),
    output:
        **figure_outputs("fig_gamma", "4 Dynamics", key="gamma"),
        **figure_outputs("fig_rho", "4 Dynamics", key="rho"),
        **figure_outputs("fig_albert_consensus", "4 Dynamics", key="consensus"),
        **figure_outputs("fig_albert_rotation", "4 Dynamics", key="rotation"),
        **table_outputs("table_alignment", "4 Dynamics", key="table"),
    params:
        script=os.path.join(SCRIPTS, "plot_dynamics.py"),
        py=PY,
        labels=labels_json(),
        dpi=config["plot"]["dpi"],
        alpha=config["dynamics"]["alpha"],
        gamma=stem_of("gamma"),
        rho=stem_of("rho"),
        consensus=stem_of("consensus"),
        rotation=stem_of("rotation"),
        table=stem_of("table"),
    log:
        f"logs/{RUN}/plot_dynamics.log",
    benchmark:
        f"benchmarks/{RUN}/plot_dynamics.tsv"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=10,
    conda:
        ENV
    shell:
        "{params.py:q} {params.script:q} --csv {input.csv:q} --npz {input.npz:q} --meta {input.meta:q} "
        "--labels {params.labels:q} --fig-gamma {params.gamma:q} --fig-rho {params.rho:q} "
        "--fig-albert-consensus {params.consensus:q} --fig-albert-rotation {params.rotation:q} "
        "--table-alignment {params.table:q} --alpha {params.alpha} --dpi {params.dpi} > {log:q} 2>&1"

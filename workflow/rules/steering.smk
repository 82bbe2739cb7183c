# Steering: rank-1 change of the last layer's output matrix vs activation addition (claim C9).


rule steering:
    """Kappa sweep per target: principal-eigenvector check, alignment with u, target-token probability, KL."""
    input:
        manifest=rules.fetch_model.output.manifest,
        tensors=rules.extract_weights.output.tensors,
        meta=rules.extract_weights.output.meta,
        spectra=rules.spectra.output.npz,
        prompts=PROMPTS,
    output:
        csv=results("{model}/steering.csv"),
        json=results("{model}/steering.json"),
        continuations=results("{model}/steering_continuations.csv"),
    params:
        script=os.path.join(SCRIPTS, "steering.py"),
        py=PY,
        targets=steering_targets_json,
        kappas=params_json(config["steering"]["kappas"]),
        max_prompts=config["steering"]["max_prompts"],
        batch_size=config["steering"]["batch_size"],
        max_tokens=config["steering"]["max_tokens"],
        shared_edit=config["steering"]["shared_edit"],
        seed=config["seed"],
        device=config["device"],
        cont_prompts=params_json(config["steering"]["continuations"]["prompts"]),
        cont_tokens=config["steering"]["continuations"]["new_tokens"],
    log:
        f"logs/{RUN}/steering/{{model}}.log",
    benchmark:
        f"benchmarks/{RUN}/steering/{{model}}.tsv"
    threads: 2
    resources:
        mem_mb=fitted("steering", "mem_mb"),
        runtime=fitted("steering", "runtime"),
        gpu=gpu_request,
    conda:
        ENV
    shell:
        "{params.py:q} {params.script:q} --manifest {input.manifest:q} --tensors {input.tensors:q} "
        "--meta {input.meta:q} --spectra {input.spectra:q} --prompts {input.prompts:q} "
        "--out-csv {output.csv:q} --out-json {output.json:q} --targets {params.targets:q} "
        "--kappas {params.kappas:q} --max-prompts {params.max_prompts} --batch-size {params.batch_size} "
        "--max-tokens {params.max_tokens} --shared-edit {params.shared_edit} "
        "--seed {params.seed} --device {params.device} --threads {threads} "
        "--out-continuations {output.continuations:q} --continuation-prompts {params.cont_prompts:q} "
        "--continuation-tokens {params.cont_tokens} > {log:q} 2>&1"


rule plot_steering:
    """fig_steering and table_steering."""
    input:
        csv=expand(rules.steering.output.csv, model=MODELS),
        continuations=expand(rules.steering.output.continuations, model=MODELS),
    output:
        **figure_outputs("fig_steering", "6 Steering", key="fig"),
        **table_outputs("table_steering", "6 Steering", key="table"),
        **table_outputs("table_continuations", "6 Steering", key="continuations"),
    params:
        script=os.path.join(SCRIPTS, "plot_steering.py"),
        py=PY,
        labels=labels_json(),
        dpi=config["plot"]["dpi"],
        fig=stem_of("fig"),
        table=stem_of("table"),
        continuations=stem_of("continuations"),
    log:
        f"logs/{RUN}/plot_steering.log",
    benchmark:
        f"benchmarks/{RUN}/plot_steering.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        "{params.py:q} {params.script:q} --csv {input.csv:q} --labels {params.labels:q} --fig {params.fig:q} "
        "--table {params.table:q} --continuations {input.continuations:q} "
        "--continuations-table {params.continuations:q} --dpi {params.dpi} > {log:q} 2>&1"

# Quantization sensitivity: how far do 4-bit weights move spectra and dynamics (the trained decoders are 4-bit)?
from types import SimpleNamespace


rule quantization:
    """Quantize a full-precision model's weight matrices (gguf quantizers), recompute spectra and model-mode
    dynamics, compare per layer with full precision."""
    input:
        manifest=rules.fetch_model.output.manifest,
        spectra=rules.spectra.output.npz,
        dynamics=results("{model}/dynamics-model.csv"),
        prompts=PROMPTS,
    output:
        csv=results("{model}/quantization.csv"),
        json=results("{model}/quantization.json"),
    params:
        script=os.path.join(SCRIPTS, "quantization.py"),
        py=PY,
        types=config["quantization"]["types"],
        batch_size=config["dynamics"]["batch_size"],
        max_tokens=config["dynamics"]["max_tokens"],
        top_k=config["spectra"]["top_k"],
        null_draws=config["dynamics"]["null_draws"],
        seed=config["seed"],
    log:
        f"logs/{RUN}/quantization/{{model}}.log",
    benchmark:
        f"benchmarks/{RUN}/quantization/{{model}}.tsv"
    threads: 2
    resources:
        mem_mb=lambda wc: fitted("dynamics", "mem_mb")(SimpleNamespace(model=wc.model, mode="model")),
        # one spectra + one model-mode dynamics per type
        runtime=lambda wc: 2 * len(config["quantization"]["types"])
        * fitted("dynamics", "runtime")(SimpleNamespace(model=wc.model, mode="model")),
    conda:
        ENV
    shell:
        "{params.py:q} {params.script:q} --manifest {input.manifest:q} --spectra {input.spectra:q} "
        "--dynamics {input.dynamics:q} --prompts {input.prompts:q} --out-csv {output.csv:q} "
        "--out-json {output.json:q} --types {params.types} --batch-size {params.batch_size} "
        "--max-tokens {params.max_tokens} --seed {params.seed} --top-k {params.top_k} "
        "--null-draws {params.null_draws} --threads {threads} > {log:q} 2>&1"


rule table_quantization:
    """table_quantization: per model, type and layer (empty when no model is listed)."""
    input:
        csv=expand(rules.quantization.output.csv, model=config["quantization"]["models"]),
    output:
        **table_outputs("table_quantization", "3 Spectra", key="table"),
    params:
        script=os.path.join(SCRIPTS, "table_quantization.py"),
        py=PY,
        labels=labels_json(),
        table=stem_of("table"),
    log:
        f"logs/{RUN}/table_quantization.log",
    benchmark:
        f"benchmarks/{RUN}/table_quantization.tsv"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        ENV
    shell:
        "{params.py:q} {params.script:q} --csv {input.csv:q} --labels {params.labels:q} "
        "--table {params.table:q} > {log:q} 2>&1"

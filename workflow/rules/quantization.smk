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
        dynamics=results("{model}/quantization-dynamics.csv"),
    params:
        code=step_code("quantization"),  # rerun when the step's code changes
        corpus=CORPUS_SHA256,  # rerun when the prompt corpus's content changes
        flags=step_flags("quantization"),
        py=PY,
    log:
        step_log("quantization"),
    benchmark:
        step_benchmark("quantization")
    threads: STEP_THREADS
    resources:
        mem_mb=lambda wc: fitted("dynamics", "mem_mb")(SimpleNamespace(model=wc.model, mode="model")),
        # one spectra + one model-mode dynamics per type
        runtime=lambda wc: 2 * len(config["quantization"]["types"])
        * fitted("dynamics", "runtime")(SimpleNamespace(model=wc.model, mode="model")),
    conda:
        ENV
    shell:
        step_shell("quantization")


rule table_quantization:
    """table_quantization: per model, type and layer (empty when no model is listed)."""
    input:
        csv=expand(rules.quantization.output.csv, model=config["quantization"]["models"]),
    output:
        **table_outputs("table_quantization", "3 Spectra", key="table"),
    params:
        code=step_code("table_quantization"),  # rerun when the step's code changes
        py=PY,
        labels=labels_json(),
        table=stem_of("table"),
    log:
        step_log("table_quantization"),
    benchmark:
        step_benchmark("table_quantization")
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        ENV
    shell:
        step_shell("table_quantization")

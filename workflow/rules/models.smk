# Models: fetch (hub / local / package / twin), extract attention weights, prove the extraction.


rule fetch_model:
    """Resolve one model entry to weights on disk and write its manifest (revision, sha256 of files)."""
    input:
        # a local folder's / package's / GGUF's own files: a model re-saved in place re-runs its chain
        user_files=user_model_files,
        # a matched control: its trained model's weights (fetched first)
        controlled=controlled_manifest,
    output:
        manifest=results("{model}/manifest.json"),
    params:
        code=step_code("fetch_model"),  # rerun when the step's code changes
        flags=step_flags("fetch_model"),
        entry=model_entry_json,
        content=user_files_content,  # the user's own files by content, not date: a re-save reruns the chain
        py=PY,
    log:
        step_log("fetch_model"),
    benchmark:
        step_benchmark("fetch_model")
    threads: 1
    resources:
        mem_mb=fitted("fetch_model", "mem_mb"),
        runtime=fitted("fetch_model", "runtime"),
    localrule: True
    conda:
        ENV
    shell:
        step_shell("fetch_model")


rule extract:
    """W_Q, W_K, W_V, W_O, biases, LayerNorm, scale, masks and F = W_O W_V of every layer."""
    input:
        manifest=rules.fetch_model.output.manifest,
        targets_checked=targets_checked,
    output:
        tensors=results("{model}/weights.safetensors"),
        meta=results("{model}/weights.json"),
    params:
        code=step_code("extract"),  # rerun when the step's code changes
        py=PY,
    log:
        step_log("extract"),
    benchmark:
        step_benchmark("extract")
    threads: STEP_THREADS
    resources:
        mem_mb=fitted("extract", "mem_mb"),
        runtime=fitted("extract", "runtime"),
    conda:
        ENV
    shell:
        step_shell("extract")


rule check_extraction:
    """Rebuild each attention sublayer from the extracted matrices; compare with the real module."""
    input:
        manifest=rules.fetch_model.output.manifest,
        tensors=rules.extract.output.tensors,
        meta=rules.extract.output.meta,
    output:
        check=results("{model}/extraction_check.json"),
    params:
        code=step_code("check_extraction"),  # rerun when the step's code changes
        flags=step_flags("check_extraction"),
        py=PY,
    log:
        step_log("check_extraction"),
    benchmark:
        step_benchmark("check_extraction")
    threads: STEP_THREADS
    resources:
        mem_mb=fitted("check_extraction", "mem_mb"),
        runtime=fitted("check_extraction", "runtime"),
    conda:
        ENV
    shell:
        step_shell("check_extraction")


rule write_lock:
    """models.lock.yaml: resolved revisions and file sha256s of this run (pin a later run with lock_file)."""
    input:
        manifests=expand(rules.fetch_model.output.manifest, model=MODELS),
    output:
        lock=results("models.lock.yaml"),
    params:
        code=step_code("write_lock"),  # rerun when the step's code changes
        py=PY,
    log:
        step_log("write_lock"),
    benchmark:
        step_benchmark("write_lock")
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    localrule: True
    conda:
        ENV
    shell:
        step_shell("write_lock")


rule steering_targets:
    """Steering targets of a model whose tokenizer arrives with its fetch (hub, GGUF), checked before
    extraction: single vocabulary entry, LM head for unembedding targets; token ids written."""
    input:
        manifest=rules.fetch_model.output.manifest,
    output:
        json=results("{model}/steering_targets.json"),
    params:
        code=step_code("steering_targets"),  # rerun when the step's code changes
        targets=steering_targets_json,
        py=PY,
    log:
        step_log("steering_targets"),
    benchmark:
        step_benchmark("steering_targets")
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    localrule: True
    conda:
        ENV
    shell:
        step_shell("steering_targets")

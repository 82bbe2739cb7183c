# Tables of the paper (paper_tables/<run>/): CSV, Markdown and LaTeX.


rule table_models:
    """table_models: id, revision, parameters, d, layers, heads, shared weights, source, weights label."""
    input:
        metas=expand(rules.extract_weights.output.meta, model=MODELS),
        manifests=expand(rules.fetch_model.output.manifest, model=MODELS),
    output:
        **table_outputs("table_models", "2 Models", key="table"),
    params:
        script=os.path.join(SCRIPTS, "table_models.py"),
        py=PY,
        stem=stem_of("table"),
        labels=labels_json(),
    log:
        f"logs/{RUN}/table_models.log",
    benchmark:
        f"benchmarks/{RUN}/table_models.tsv"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        ENV
    shell:
        step_shell("table_models")

# Tables of the paper (paper_tables/<run>/): CSV, Markdown and LaTeX.


rule table_models:
    """table_models: id, revision, parameters, d, layers, heads, shared weights, source, weights label."""
    input:
        metas=expand(rules.extract.output.meta, model=MODELS),
        manifests=expand(rules.fetch_model.output.manifest, model=MODELS),
    output:
        **table_outputs("table_models", "2 Models", key="table"),
        record=f"paper_tables/{RUN}/table_models_record.json",  # sha256 of the table: the article checks it
    params:
        code=step_code("table_models"),  # rerun when the step's code changes
        py=PY,
        stem=stem_of("table"),
        labels=labels_json(),
    log:
        step_log("table_models"),
    benchmark:
        step_benchmark("table_models")
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        ENV
    shell:
        step_shell("table_models")

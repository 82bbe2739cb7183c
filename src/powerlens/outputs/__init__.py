"""outputs: what a reader sees, drawn from the analysis' files.

    tables      paper tables in CSV, Markdown, HTML and LaTeX (one writer, one number format)
    figures     the paper's figures (trained models; twins in their own files)
    plotting    shared drawing: the twins' banner, splits of trained and random-weight models, saving
    provenance  versions, BLAS, seeds, thread settings, config hash
    staging     a step's outputs written aside and renamed together (an interrupt replaces none or all)

Imports from analysis, models and core; nothing imports it but the pipeline and the entry points.
"""

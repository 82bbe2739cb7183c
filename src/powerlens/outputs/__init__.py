"""outputs: what a reader sees, drawn from the analysis' files.

    tables      paper tables in CSV, Markdown, HTML and LaTeX (one writer, one number format)
    figures     the paper's figures (trained models; twins in their own files)
    plotting    shared drawing: the twins' banner, splits of trained and random-weight models, saving
    provenance  versions, BLAS, seeds, thread settings, config hash
    staging     a step's outputs written aside and renamed together (an interrupt replaces none or all)
    records     the sha256 record of the tables a step wrote (a later step refuses an edited table)
    theory_table  table_theory from the theory step's results
    article     the replication article's blocks; article_front its first screen (summary, verdict table)
    evidence    the pattern of a run's verdicts in one sentence, by rules tested on constructed tables
    article_evidence  the article's reading of its evidence: the models, the counts by where judged, the
                pattern, "What the evidence says", the corpus, the discussion and the limitations
    trace       every value a reader sees traced to its file, row and column (the article's sources)
    render      the article's blocks as HTML and as Typst (the PDF), text escaped for each
    glossary    the article's glossary and its links

Imports from analysis, models and core; nothing imports it but the pipeline and the entry points.
"""

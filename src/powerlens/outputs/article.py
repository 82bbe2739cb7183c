"""The replication article: one document that answers "which claims hold, and how sure are we", drawn from a
run's output files alone, as a list of blocks (:mod:`powerlens.outputs.render` writes them as HTML and Typst;
the block kinds are listed there). The first screen and the stand-ins are :mod:`powerlens.outputs.article_front`,
the glossary :mod:`powerlens.outputs.glossary`.

Every number and verdict a reader sees is a traced value (:mod:`powerlens.outputs.trace`), read back from the
written HTML before the files are kept; text typed in the template holds no number of the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from powerlens.core.errors import PowerlensError
from powerlens.outputs.trace import Traced, csv_cell, json_value, read_table, row_count, verdict_columns


@dataclass
class Run:
    """Where a run's outputs are, relative to the working directory ``root``."""

    name: str
    root: Path = field(default_factory=Path)
    #: The paper config (its models), relative to ``root`` or absolute; None: config/config.yaml under root.
    paper_config: str | None = None

    @property
    def paper(self) -> str | None:
        if self.paper_config:
            return self.paper_config
        return "config/config.yaml" if (self.root / "config/config.yaml").is_file() else None

    @property
    def tables(self) -> str:
        return f"paper_tables/{self.name}"

    @property
    def figures(self) -> str:
        return f"figures/{self.name}"

    @property
    def provenance(self) -> str:
        return f"results/{self.name}/provenance.json"


#: The steps whose tables the article reads, each checked against its record (:mod:`powerlens.outputs.records`),
#: with the table whose presence says the step ran (a run without table_models has no record of it to check).
RECORDED_STEPS = {"claims": "table_claim_verdicts.csv", "table_models": "table_models.csv"}


def check_table_records(run: Run) -> None:
    """Refuse tables that are not the ones their steps wrote (the claims step's, table_models'): every file a
    record names must exist with the recorded sha256. The article's read-back
    (:func:`powerlens.outputs.trace.untraced`) compares the article with these same files, so it cannot see an
    edit made to them by hand; this check can."""
    from powerlens.outputs.records import SUFFIX, check_record

    for step, table in RECORDED_STEPS.items():
        rec = f"{run.tables}/{step}{SUFFIX}"
        if step == "claims" or (run.root / rec).exists() or (run.root / run.tables / table).exists():
            check_record(run.root / rec, step, rec)


def families(run: Run) -> list[str]:
    """The trained families of table_claim_verdicts, in its column order."""
    df = read_table(run.root / run.tables / "table_claim_verdicts.csv")
    return [c for c in verdict_columns(df) if c != "synthetic layers"]


def code_line(run: Run) -> list:
    """The code revision as provenance.json records it (commit, and whether it had uncommitted changes)."""
    prov = json.loads((run.root / run.provenance).read_text(encoding="utf-8"))
    code = prov.get("code") or {}
    if not code.get("commit"):
        return ["powerlens ", json_value(run.provenance, run.root, ["versions", "powerlens"]), " (no git checkout)"]
    out = ["commit ", json_value(run.provenance, run.root, ["code", "commit"]),
           " (uncommitted changes: ", json_value(run.provenance, run.root, ["code", "uncommitted_changes"]), ")"]
    if code.get("requirements_lock_sha256"):
        lock = json_value(run.provenance, run.root, ["code", "requirements_lock_sha256"])
        out += ["; requirements.lock sha256 ", lock]
    return out


CLAIM_FIELDS = ("criterion", "measured", "null", "claim p", "attainable p", "specificity p", "verdict", "failed part",
                "would flip if", "matched control")


class Figures:
    """The run's trained-model figures (PNG) by name, numbered in the order the article shows them."""

    def __init__(self, run: Run):
        self.run = run
        self.paths = {p.stem: p for p in sorted((run.root / run.figures).glob("fig_*.png"))
                      if not p.stem.endswith("_twins")}
        self.number: dict[str, int] = {}

    def block(self, name: str) -> list:
        """The figure's block the first time, a pointer to it after."""
        from powerlens.outputs.figures.captions import CAPTIONS

        if name in self.number:
            return [("p", [f"Figure {self.number[name]} (above) shows it."])]
        self.number[name] = len(self.number) + 1
        return [("figure", name, self.paths[name], CAPTIONS.get(name, name), self.number[name])]


def figure_names(cell: str) -> list[str]:
    """The figure names of a table_claims "figure" cell ("fig_tilt (sublayers), table_alignment")."""
    return list(dict.fromkeys(n.strip().split(" ")[0] for n in cell.split(",") if n.strip().startswith("fig_")))


def verdict_class(df: pd.DataFrame, claim: str, fam: str) -> str:
    """The CSS class of a table_claims row's verdict: its outcome (one word) with dashes for spaces."""
    v = df.loc[(df["claim"] == claim) & (df["family"] == fam), "outcome"]
    return v.iloc[0].replace(" ", "-") if len(v) else ""


def _across_families(run: Run, df: pd.DataFrame, claim: str, src: str) -> list:
    """One line: the claim's p with Holm's adjustment across the trained families that judged it (paper.md
    section 4e), each traced; nothing where fewer than two did."""
    from powerlens.analysis.claims import HOLM_ACROSS

    if HOLM_ACROSS not in df:
        return []
    mine = df[(df["claim"] == claim) & ~df[HOLM_ACROSS].isin(["", "-"])]
    if len(mine) < 2:
        return []
    cells = [x for i, f in enumerate(mine["family"]) for x in [", "] * (i > 0) + [
        csv_cell(src, run.root, {"claim": claim, "family": f}, "family"), " ",
        csv_cell(src, run.root, {"claim": claim, "family": f}, HOLM_ACROSS)]]
    return [("p", ["Across the trained families, with Holm's adjustment (the verdicts above stay unadjusted): ",
                   *cells, "."], "small")]


def claim_blocks(run: Run, claim: str, statement: Traced, figs: Figures) -> list:
    """One claim: its statement, then per trained family the criterion, the measurement, the null, the
    verdict and what failed (table_claims), the robustness count (table_robustness), and its figures."""
    from powerlens.analysis.claims.registry import gist

    src, rob = f"{run.tables}/table_claims.csv", f"{run.tables}/table_robustness.csv"
    df = read_table(run.root / src)
    robust = read_table(run.root / rob) if (run.root / rob).is_file() else None
    out = [("h", 3, [claim, ": " + gist(claim)], f"claim-{claim}"), ("p", [statement])]
    fams = list(df.loc[df["claim"] == claim, "family"])
    if fams:  # one column per trained family (or the synthetic layers), one row per field of table_claims
        head = [""] + [[csv_cell(src, run.root, {"claim": claim, "family": f}, "family"), ("s", "line", [
            csv_cell(src, run.root, {"claim": claim, "family": f}, "models")])] for f in fams]
        rows = [[([f], "")] + [([csv_cell(src, run.root, {"claim": claim, "family": fam}, f)],
                                verdict_class(df, claim, fam) if f == "verdict" else "") for fam in fams]
                for f in CLAIM_FIELDS if f in df]
        if robust is not None:
            agree = [robust[(robust["claim"] == claim) & (robust["family"] == f)] for f in fams]
            if any(len(a) == 1 for a in agree):
                rows.append([(["robustness"], "")] + [
                    ([csv_cell(rob, run.root, {"claim": claim, "family": f}, "agree")] if len(a) == 1 else ["-"], "")
                    for f, a in zip(fams, agree)])
        out.append(("table", head, rows, "compact"))
        out += _across_families(run, df, claim, src)
    judged = df[(df["claim"] == claim) & (df["outcome"] != "not judged")]
    for name in dict.fromkeys(n for f in judged["figure"] for n in figure_names(f)):
        if name not in figs.paths:  # a judged claim's figure: never left out silently
            raise PowerlensError(f"{run.figures}/{name}.png, the figure of claim {claim}, does not exist",
                                 "rebuild the figures: run the same snakemake command with `--forcerun "
                                 "plot_dynamics plot_spectra plot_steering plot_theory` added")
        out += figs.block(name)
    return out


def document(run: Run, index: list[dict] | None = None, command: str = "") -> list:
    """The article's blocks, in the order a referee reads: the answer first."""
    from powerlens.outputs.article_evidence import DISCUSSION, data_section, evidence_section, limitations
    from powerlens.outputs.article_front import stand_ins, summary, verdict_table
    from powerlens.outputs.glossary import glossary_block

    prov, vsrc = run.provenance, f"{run.tables}/table_claim_verdicts.csv"
    verdicts = read_table(run.root / vsrc)
    figs = Figures(run)
    blocks = [("h", 1, ["Replication: Li & Altafini, \u201cAnalogies between Transformer Layers and Power "
                        "Method\u201d (arXiv 2605.25619)"]),
              *summary(run), *verdict_table(run), *evidence_section(run),
              ("p", ["Run ", json_value(prov, run.root, ["run"]), ", finished ",
                     json_value(prov, run.root, ["end_time"]), "; config sha256 ",
                     json_value(prov, run.root, ["config_sha256"], r"^(.{0,16})"), "\u2026; code ", *code_line(run),
                     ". The paper's full text is not available: each claim is compared with its statement in the "
                     "spec, never with the paper's numbers."], "small"),
              *stand_ins(run, run.paper), *data_section(run)]
    claims = read_table(run.root / run.tables / "table_claims.csv")
    trained = claims[(claims["family"] != "synthetic") & ~claims["verdict"].str.startswith("not judged")]
    if "fig_spectra" in figs.paths and len(trained):  # without a trained model the figure holds only a note
        blocks += [("h", 2, ["Spectra of the layer matrices"], "spectra"),
                   ("p", ["The eigenvalues of each layer's F_t, the matrices whose leading eigenvector v_1 the "
                          "claims are about."]), *figs.block("fig_spectra")]
    blocks.append(("h", 2, ["The claims, one by one"], "claims"))
    for c in verdicts["claim"]:
        blocks += claim_blocks(run, c, csv_cell(vsrc, run.root, {"claim": c}, "statement"), figs)
        if c == "C8" and "fig_gamma_gap" in figs.paths and "fig_gamma_gap" not in figs.number and (
                trained["claim"] == "C8").any():
            blocks += figs.block("fig_gamma_gap")
    return (blocks + METHODS + DISCUSSION + limitations(run) + BEYOND + reproducibility(run, command) + speed(run)
            + output_index(index or [])
            + [("h", 2, ["Glossary"], "glossary"), glossary_block(),
               ("h", 2, ["Sources of every value"], "sources"),
               ("p", ["Every value shown above, with the file and the field it was read from (each value links "
                      "here; the article is refused if any of them differs from its file)."], "small"),
               ("appendix",)])


#: Methods, limitations and what goes beyond the paper, in brief: template text, no number of the run.
METHODS = [
    ("h", 2, ["Methods in brief"], "methods"),
    ("p", ["Each layer's F_t = W_O W_V is extracted from the checkpoint and proven by rebuilding the real attention "
           "module's output from the extracted matrices (float32 and float64). Eigenvalues come from float64 "
           "eigen-solves on the CPU, sorted by modulus, eigenvectors with a canonical phase. Token dynamics are "
           "measured in the real forward pass (model mode) and in the attention-only law (the FFN removed, as the "
           "paper's reading does). Three statistics per layer, each against the lead v_{1,t}: the tilt (the "
           "growth of a token's |cos| with v_1 across the layer, C1 and C10), gamma_t (the output's mean |cos| "
           "with v_1, C6 and C8) and rho_t (the share of tokens whose |cos| grows, C7)."]),
    ("p", ["Every per-layer statistic is tested against one per-layer null: random subspaces of the lead's "
           "dimension on the same tokens (a seeded Monte Carlo stream, extended only where a verdict can still "
           "move). The tilt and rho (C1, C7, C10) must also pass a second test across the whole model, the "
           "specificity p (the lead's ranks among F's other eigen-directions, summed across the layers and read "
           "both against independent layers and among its members followed from layer to layer, the larger p: our "
           "modelling choice); gamma (C6) and C10's FFN clause use the random-direction null "
           "only, and C8 correlates gamma's margin over that null with the relative gap 1 - |lambda_next| / "
           "|lambda_1| (Spearman). A claim over 'at least k of L layers' reads one claim p, the partial conjunction "
           "of the layers' p, beside the attainable p, the smallest p its rule could reach (not below alpha: "
           "underpowered); the figures mark each layer by Holm's correction, which only C10's FFN clause "
           "reads. Each trained "
           "model's matched controls (its attention weights drawn at random, rescaled to the trained |lambda_1| "
           "and score scale, everything else trained; several seeds) are judged the same way beside it, and the "
           "training p compares the trained lead with theirs, layer by layer, beside the verdict. Steering "
           "edits the last layer's output matrix by a rank-1 term (strength kappa) and compares it with activation "
           "addition; where a norm "
           "follows the edit the change points along p * u. The synthetic layers prescribe the spectrum of "
           "M = I + F (eigenvalues mu_1, mu_2) and sweep the attention sharpness."]),
    ("p", ["Each Monte Carlo p is carried as its 99% interval (Clopper-Pearson, covering every tie-break): R draws "
           "start at R0, the fewest that let the rule reach significance, and are extended up to the cap only "
           "where the interval still straddles alpha; a test whose interval straddles alpha at the cap is "
           "undecided, and a verdict resting on one is inconclusive. The specificity p compares the lead with F_t's "
           "other eigen-directions of its kind (real eigenvectors for a real lead, planes of complex pairs for a "
           "complex one). A family is an architecture with its weights' kind (BERT, Llama, Gemma 3; trained, "
           "4-bit): a family's verdict needs every trained model of it to pass. The synthetic layers (C2-C4) iterate "
           "one shared layer from clustered starts (tokens in a cap around one direction) and isotropic ones "
           "(spread over the sphere), at several attention sharpness levels (the typical |score| of the start): C2 "
           "and C3 read the share of seeds that reach consensus (every token on one direction) or a limit cycle "
           "(a closed orbit in the plane of a complex pair); C4 asks whether bipartite consensus (two antipodal "
           "groups) is unstable more often with several heads than with one, by the exact conditional test over "
           "strata (the configured sharpness by size-and-seed block; cell-seeds of one block share a weight draw), "
           "with a positive control, a known unstable equilibrium, that must come out unstable. C9's targets are "
           "named by kind (embedding: a token's input embedding; unembedding: its row of the LM head; random: a "
           "seeded direction); activation addition adds beta u at the same site, its beta sweep bracketing the "
           "edit's matched KL on unrelated prompts, and a norm after the edit can cap the change (saturation). "
           "Layers where half or more of the draws tie with the lead are saturated and count as no evidence. "
           "Models read from GGUF files (4-bit formats such as Q4_1 and Q4_K_M) are dequantized once and labelled "
           "as quantized everywhere; Gemma 3 alternates sliding-window and full attention layers, which the "
           "statistics treat alike. The offline configs judge the models that install from PyPI; the speed table "
           "compares each heavy job with its arithmetic lower bound. The full list of modelling choices, with the "
           "method of every claim, is the page ", ("a", "modelling_choices.html", ["modelling_choices.html"]),
           " beside this article (in the report: the entry Modelling choices)."]),
]

BEYOND = [
    ("h", 2, ["Beyond the paper"], "beyond"),
    ("p", ["One p per claim with its attainable p, specificity across the model, matched controls (several seeds), "
           "Monte Carlo error carried through every decision, C4 decided by linearisation at "
           "Newton-refined equilibria, C10 on the real forward pass split at the sublayers, and the verdicts "
           "rerun under other seeds, corpus thirds and quantizations (the robustness table)."]),
]


def reproducibility(run: Run, command: str = "") -> list:
    """Software versions and the BLAS of the run, each traced to provenance.json."""
    prov = json.loads((run.root / run.provenance).read_text(encoding="utf-8"))
    rows = [[([k], ""), ([json_value(run.provenance, run.root, ["versions", k])], "")]
            for k in sorted(prov.get("versions", {}))]
    def pool(i: int, keys: dict) -> list:  # one pool's recorded fields, each traced (an unknown one left out)
        v = lambda k: json_value(run.provenance, run.root, ["blas", i, k])  # noqa: E731
        got = [v("internal_api")]
        got += [" ", v("version")] if keys.get("version") is not None else []
        got += [" (", v("library"), ")"] if keys.get("library") else []
        return got + ([" on ", v("architecture")] if keys.get("architecture") is not None else [])

    blas = [[([f"BLAS {i}"], ""), (pool(i, b), "")] for i, b in enumerate(prov.get("blas", []))]
    mach = []
    if prov.get("machine"):
        mach = [[([k], ""), ([json_value(run.provenance, run.root, ["machine", k])], "")]
                for k in ("cpu", "logical_cpus", "platform") if k in prov["machine"]]
    return [("h", 2, ["Reproducibility"], "reproducibility"),
            ("p", ["Every output of this run is rebuilt by the workflow from the config whose sha256 is given "
                   "above; the run's provenance.json records each model's revision and weight sha256, the seeds and "
                   "the thread counts. The command (from the repository root; any --cores gives the same outputs): "]),
            ("code", command or "snakemake --cores N"),
            ("table", ["machine and software", "version"], mach + rows + blas, "compact")]


def speed(run: Run) -> list:
    """The run's total time (table_speed's total row) and each heavy job's wall time beside its arithmetic lower
    bound, every cell traced."""
    from powerlens.outputs.tables import OTHER_JOBS, RUN_MODEL, RUN_STEP, TOTAL_MODEL, TOTAL_STEP

    src = f"{run.tables}/table_speed.csv"
    if not (run.root / src).is_file():
        return []
    df = read_table(run.root / src)
    cols = ["model", "step", "wall (s)", "lower bound (s)", "wall / bound",
            *[c for c in ("CPU / (threads x bound)",) if c in df], "weights"]  # a table before the CPU ratio: without
    jobs = df[~(((df["model"] == TOTAL_MODEL) & (df["step"] == TOTAL_STEP))
                | ((df["model"] == RUN_MODEL) & (df["step"] == RUN_STEP)))]
    rows = [[([csv_cell(src, run.root, {"model": m, "step": st}, c)], "") for c in cols]
            for m, st in zip(jobs["model"], jobs["step"])]
    tk = {"model": TOTAL_MODEL, "step": TOTAL_STEP}
    n = row_count(src, run.root, [["step", f"^(?!({TOTAL_STEP}|{RUN_STEP})$)"]])
    rk = {"model": RUN_MODEL, "step": RUN_STEP}
    whole = []
    if ((df["model"] == RUN_MODEL) & (df["step"] == RUN_STEP)).sum() == 1:
        whole = ["The run's timed jobs (", csv_cell(src, run.root, rk, "jobs"), f" benchmark files: {OTHER_JOBS}, "
                 "spectra, dynamics and steering) took ", csv_cell(src, run.root, rk, "wall (s)"), " s of summed job "
                 "time (", csv_cell(src, run.root, rk, "CPU (s)"), " s of CPU); Snakemake runs independent jobs side "
                 "by side, so the run's elapsed time is shorter on more cores. "]
    if len(jobs) < len(df):
        total = [*whole, "The run's heavy jobs (", n, " benchmark files: spectra, dynamics and steering) took ",
                 csv_cell(src, run.root, tk, "wall (s)"), " s of wall time in all (", csv_cell(src, run.root, tk,
                                                                                               "CPU (s)"),
                 " s of CPU), against an arithmetic lower bound of ", csv_cell(src, run.root, tk, "lower bound (s)"),
                 " s. Plots, tables and the article (seconds each) are not timed here."]
    else:
        total = ["This run's table_speed predates its total row (rebuild it with `--forcerun speed`); it lists ", n,
                 " heavy jobs."]
    cpu = ([", and the job's CPU time over the bound's at the steps' thread count (CPU / (threads x bound): the "
            "distance from the bound whatever ran beside the job; jobs run side by side, as make offline runs two to "
            "a core, stretch each other's wall time)"] if "CPU / (threads x bound)" in df else [])
    return [("h", 2, ["Speed"], "speed"), ("p", total),
            ("p", ["Wall time of each heavy job (its rule's benchmark file) beside the arithmetic it cannot avoid at "
                   "this machine's measured matrix-product peak (the speed table, whose caption says what the bound "
                   "counts and leaves out)", *cpu, "."]),
            ("table", cols, rows, "compact")]


def output_index(index: list[dict]) -> list:
    """Each figure and table with the rule and log file behind it (from the workflow's rules)."""
    if not index:
        return []
    rows = [[([x["output"]], ""), ([x["rule"]], ""), ([x["log"]], "")] for x in index]
    return [("h", 2, ["Files of the run"], "files"),
            ("p", ["Each figure and table of the run, the rule that wrote it (snakemake --forcerun <rule> rebuilds "
                   "it) and the log of that job."], "small"),
            ("table", ["file", "rule", "log"], rows, "compact")]

"""The replication article: one document that answers "which claims hold, and how sure are we", drawn from a
run's output files alone, as a list of blocks (:mod:`powerlens.outputs.render` writes them as HTML and Typst).

Every number and verdict a reader sees is a traced value (:mod:`powerlens.outputs.trace`), read back from the
written HTML before the files are kept; text typed in the template holds no number of the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from powerlens.core.errors import PowerlensError
from powerlens.outputs.trace import (
    CONTROL_SUFFIX,
    WORDS,
    Traced,
    count_word,
    csv_cell,
    json_value,
    verdict_columns,
    verdict_word,
)


@dataclass
class Run:
    """Where a run's outputs are, relative to the working directory ``root``."""

    name: str
    root: Path = field(default_factory=Path)

    @property
    def tables(self) -> str:
        return f"paper_tables/{self.name}"

    @property
    def figures(self) -> str:
        return f"figures/{self.name}"

    @property
    def provenance(self) -> str:
        return f"results/{self.name}/provenance.json"

    @property
    def claims_record(self) -> str:
        """The claims step's record of the sha256 of every table it wrote (its rule's output ``record``)."""
        return f"{self.tables}/claims_record.json"


#: The rebuild of the claims step's tables, as a fix says it.
RERUN_CLAIMS = ("rebuild them: run the same snakemake command with `--forcerun claims` added (change a verdict "
                "through the config's `claims:` block, never by editing a table)")


def check_claims_record(run: Run) -> None:
    """Refuse tables that are not the ones the claims step wrote: every file its record names must exist with
    the recorded sha256. The article's read-back (:func:`powerlens.outputs.trace.untraced`) compares the
    article with these same files, so it cannot see an edit made to them by hand; this check can."""
    from powerlens.core.io import read_generated_json, sha256_file

    path = run.root / run.claims_record
    if not path.is_file():
        raise PowerlensError(f"{run.claims_record} does not exist: nothing says the claims tables of run "
                             f"{run.name!r} are the ones the claims step wrote", RERUN_CLAIMS)
    doc = read_generated_json(path, "claims")
    sums = doc.get("sha256") if isinstance(doc, dict) else None
    if not isinstance(sums, dict) or not sums:
        raise PowerlensError(f"{run.claims_record} names no table (it is not the claims step's record)", RERUN_CLAIMS)
    for name, want in sorted(sums.items()):
        f = run.root / run.tables / Path(name).name
        if not f.is_file():
            raise PowerlensError(f"{run.tables}/{Path(name).name}, written by the claims step, is missing",
                                 RERUN_CLAIMS)
        if sha256_file(f) != want:
            raise PowerlensError(f"{run.tables}/{Path(name).name} is not the file the claims step wrote (its sha256 "
                                 f"differs from {run.claims_record}): it was changed after the step, by hand or "
                                 "by another program", RERUN_CLAIMS)


def families(run: Run) -> list[str]:
    """The trained families of table_claim_verdicts, in its column order."""
    df = pd.read_csv(run.root / run.tables / "table_claim_verdicts.csv", dtype=str, keep_default_na=False)
    return [c for c in verdict_columns(df) if c != "synthetic layers"]


# The article is one list of blocks, rendered twice (HTML and Typst): ("h", level, pieces), ("p", pieces),
# ("table", header, rows of (pieces, css class)), ("dl", [(term, pieces)]), ("figure", name, png path),
# ("code", text).
# A piece is plain template text (str, no number of the run) or a Traced value.


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


def abstract(run: Run) -> list:
    """One paragraph from the verdict table: how many verdict cells carry each word, over which families."""
    src = f"{run.tables}/table_claim_verdicts.csv"
    n = {w: count_word(src, run.root, w) for w in WORDS}
    fams = families(run)
    judged = (f"the trained families of this run ({'; '.join(fams)})" if fams else
              "no trained model (this run has random-weight twins only, which are never evidence)")
    return [("p", ["Run ", json_value(run.provenance, run.root, ["run"]), ": over the paper's claims judged on "
                   f"{judged} and on synthetic layers, ",
                   n["reproduced"], " verdict cells read reproduced, ", n["not reproduced"], " not reproduced and ",
                   n["inconclusive"], " inconclusive (a verdict inside the Monte Carlo error or the rounding is "
                   "inconclusive) and ", n["underpowered"], " underpowered (the test could not have passed at this "
                   "resolution, or its pass rests on a clause that could not have failed: no evidence either way). ",
                   *_which(run, src), "The paper's full text is not "
                   "available: each claim is "
                   "compared with its statement in the spec, never with the paper's numbers. Random weights are "
                   "never evidence for a claim: each trained model's matched control stands beside it."])]


def _which(run: Run, src: str) -> list:
    """Which claims read reproduced, inconclusive and underpowered, and where ("Reproduced: C2 (synthetic
    layers)."), then which of the reproduced ones the matched random-layer control passes as well."""
    df = pd.read_csv(run.root / src, dtype=str, keep_default_na=False)
    cols = verdict_columns(df)
    out = []
    for word in ("reproduced", "inconclusive", "underpowered"):
        cells = [(r["claim"], c) for _, r in df.iterrows() for c in cols if verdict_word(r[c]) == word]
        out.append(f"{word.capitalize()}: " + (", ".join(f"{k} ({c})" for k, c in cells) or "none") + ". ")
    also = [(r["claim"], c) for _, r in df.iterrows() for c in cols if verdict_word(r[c]) == "reproduced"
            and verdict_word(r.get(c + CONTROL_SUFFIX, "")) == "reproduced"]
    out.append("Of these, the matched control (the same configuration with random layer weights at the trained "
               "|lambda_1|) passes as well, so the test does not need training, in: "
               + (", ".join(f"{k} ({c})" for k, c in also) or "none") + ". ")
    return out


def verdict_table(run: Run) -> list:
    """table_claim_verdicts, every cell traced and classed by its verdict word."""
    src = f"{run.tables}/table_claim_verdicts.csv"
    df = pd.read_csv(run.root / src, dtype=str, keep_default_na=False)
    cols = [c for c in df.columns if c != "statement"]
    rows = []
    for claim in df["claim"]:
        row = []
        for c in cols:
            t = csv_cell(src, run.root, {"claim": claim}, c)
            control = c.endswith("matched control (random layer weights)")  # a control is not a verdict: uncoloured
            row.append(([t], verdict_word(t.text).replace(" ", "-") if c != "claim" and not control else ""))
        rows.append(row)
    return [("table", cols, rows)]


CLAIM_FIELDS = ("criterion", "measured", "null", "claim p", "attainable p", "specificity p", "verdict", "failed part",
                "would flip if", "matched control")


def claim_blocks(run: Run, claim: str, statement: Traced, figures: dict[str, Path], shown: set) -> list:
    """One claim: its statement, then per trained family the criterion, the measurement, the null, the
    verdict and what failed (table_claims), the robustness count (table_robustness), and its figures."""
    src, rob = f"{run.tables}/table_claims.csv", f"{run.tables}/table_robustness.csv"
    df = pd.read_csv(run.root / src, dtype=str, keep_default_na=False)
    robust = pd.read_csv(run.root / rob, dtype=str, keep_default_na=False) if (run.root / rob).is_file() else None
    out = [("h", 2, [claim]), ("p", [statement])]
    for fam in df.loc[df["claim"] == claim, "family"]:
        key = {"claim": claim, "family": fam}
        items = [(f, [csv_cell(src, run.root, key, f)]) for f in CLAIM_FIELDS if f in df]
        if robust is not None and ((robust["claim"] == claim) & (robust["family"] == fam)).sum() == 1:
            items.append(("robustness", [csv_cell(rob, run.root, key, "agree")]))
        out += [("h", 3, [fam]), ("dl", items)]
    judged = df[(df["claim"] == claim) & ~df["verdict"].str.startswith("not judged")]
    for name in dict.fromkeys(n.strip().split(" ")[0] for f in judged["figure"] for n in f.split(",")):
        if name.startswith("fig_") and name not in figures:  # a judged claim's figure: never left out silently
            raise PowerlensError(f"{run.figures}/{name}.png, the figure of claim {claim}, does not exist",
                                 "rebuild the figures: run the same snakemake command with `--forcerun "
                                 "plot_dynamics plot_spectra plot_steering plot_theory` added")
        if name in figures and name in shown:
            out.append(("p", [f"Figure: {name}, above."]))
        elif name in figures:  # figures of a claim no trained model was judged on hold only a note: not shown
            out.append(("figure", name, figures[name]))
            shown.add(name)
    return out


def trained_figures(run: Run) -> dict[str, Path]:
    """The run's trained-model figures (PNG), by name (the twins' copies left out)."""
    return {p.stem: p for p in sorted((run.root / run.figures).glob("fig_*.png")) if not p.stem.endswith("_twins")}


def document(run: Run, index: list[dict] | None = None, command: str = "") -> list:
    """The article's blocks, in the order a referee reads."""
    prov, vsrc = run.provenance, f"{run.tables}/table_claim_verdicts.csv"
    verdicts = pd.read_csv(run.root / vsrc, dtype=str, keep_default_na=False)
    figs, shown = trained_figures(run), set()
    blocks = [("h", 1, ["Replication of \u201cAnalogies between Transformer Layers and Power Method\u201d "
                        "(Li & Altafini, arXiv 2605.25619)"]),
              ("p", ["Run ", json_value(prov, run.root, ["run"]), ", finished ",
                     json_value(prov, run.root, ["end_time"]), "; config sha256 ",
                     json_value(prov, run.root, ["config_sha256"]), "; code ", *code_line(run), "."]),
              ("h", 2, ["Abstract"]), *abstract(run), ("h", 2, ["Verdicts"]), *verdict_table(run)]
    for c in verdicts["claim"]:
        blocks += claim_blocks(run, c, csv_cell(vsrc, run.root, {"claim": c}, "statement"), figs, shown)
    return blocks + METHODS + reproducibility(run, command) + speed(run) + output_index(index or [])


#: Methods, limitations and what goes beyond the paper, in brief: template text, no number of the run.
METHODS = [
    ("h", 2, ["Methods in brief"]),
    ("p", ["Each layer's F_t = W_O W_V is extracted from the checkpoint and proven by rebuilding the real attention "
           "module's output from the extracted matrices (float32 and float64). Eigenvalues come from float64 "
           "eigen-solves on the CPU, sorted by modulus, eigenvectors with a canonical phase. Token dynamics are "
           "measured in the real forward pass and in the attention-only law (the FFN removed, as the paper's "
           "reading does). Each layer's statistic is tested against random subspaces of the lead's dimension (a "
           "seeded Monte Carlo stream, extended only where a verdict can still move); a claim over 'at least u of "
           "L layers' reads one p, the partial conjunction of the layers' p, beside the smallest p its rule could "
           "reach (below alpha, or the verdict is underpowered); the lead's ranks among F's other "
           "eigen-directions, summed across the layers, give the specificity p (the layers taken as independent: "
           "our modelling choice). Each trained model's matched control (its configuration and embeddings, random "
           "layer weights rescaled to the trained |lambda_1|) is judged the same way beside it. Steering edits the "
           "last layer's output matrix by a rank-1 term and compares it with activation addition at a matched "
           "norm of change."]),
    ("h", 2, ["Limitations"]),
    ("p", ["The paper's full text is not available: the claims are those of the spec (docs/paper.md), and where it "
           "says our choice, the choice is ours. The decoders of the offline run are 4-bit quantized checkpoints "
           "(their sensitivity to quantization is measured on MiniLM). Families with no trained checkpoint in a "
           "run (ALBERT, GPT-2, GPT-Neo offline) are stood in for by random-weight twins, which test the code, "
           "never a claim."]),
    ("h", 2, ["Beyond the paper"]),
    ("p", ["One p per claim with its attainable p, specificity across the model, matched random-layer controls, "
           "Monte Carlo error carried through every decision, C4 decided by linearisation at "
           "Newton-refined equilibria, C10 on the real forward pass split at the sublayers, and the verdicts "
           "rerun under other seeds, corpus thirds and quantizations (table_robustness)."]),
]


def reproducibility(run: Run, command: str = "") -> list:
    """Software versions and the BLAS of the run, each traced to provenance.json."""
    prov = json.loads((run.root / run.provenance).read_text(encoding="utf-8"))
    rows = [[([k], ""), ([json_value(run.provenance, run.root, ["versions", k])], "")]
            for k in sorted(prov.get("versions", {}))]
    blas = [[([f"BLAS {i}"], ""), ([json_value(run.provenance, run.root, ["blas", i, "internal_api"]), " ",
                                    json_value(run.provenance, run.root, ["blas", i, "version"]), " on ",
                                    json_value(run.provenance, run.root, ["blas", i, "architecture"])], "")]
            for i in range(len(prov.get("blas", [])))]
    mach = []
    if prov.get("machine"):
        mach = [[([k], ""), ([json_value(run.provenance, run.root, ["machine", k])], "")]
                for k in ("cpu", "logical_cpus", "platform")]
    return [("h", 2, ["Reproducibility"]),
            ("p", ["Every output of this run is rebuilt by the workflow from the config whose sha256 is given "
                   "above; the run's provenance.json records each model's revision and weight sha256, the seeds and "
                   "the thread counts. The command (from the repository root; any --cores gives the same outputs): "]),
            ("code", command or "snakemake --cores N"),
            ("table", ["machine and software", "version"], mach + rows + blas)]




def speed(run: Run) -> list:
    """Each heavy job's wall time beside its arithmetic lower bound (table_speed), every cell traced."""
    src = f"{run.tables}/table_speed.csv"
    if not (run.root / src).is_file():
        return []
    df = pd.read_csv(run.root / src, dtype=str, keep_default_na=False)
    cols = ["model", "step", "wall (s)", "lower bound (s)", "wall / bound", "weights"]
    rows = [[([csv_cell(src, run.root, {"model": m, "step": st}, c)], "") for c in cols]
            for m, st in zip(df["model"], df["step"])]
    return [("h", 3, ["Speed"]),
            ("p", ["Wall time of each heavy job (its rule's benchmark file) beside the arithmetic it cannot avoid at "
                   "this machine's measured matrix-product peak (table_speed, whose caption says what the bound "
                   "counts and leaves out; the peak and thread count are in it)."]),
            ("table", cols, rows)]


def output_index(index: list[dict]) -> list:
    """Each figure and table with the rule and log file behind it (from the workflow's rules)."""
    if not index:
        return []
    rows = [[([x["output"]], ""), ([x["rule"]], ""), ([x["log"]], "")] for x in index]
    return [("h", 3, ["Figures and tables"]),
            ("p", ["Each figure and table of the run, the rule that wrote it (snakemake --forcerun <rule> rebuilds "
                   "it) and the log of that job."]),
            ("table", ["file", "rule", "log"], rows)]

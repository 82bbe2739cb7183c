"""The article's first screen and its stand-ins: the plain-language summary, the compact verdict table (one row
per claim, one column per trained model and the synthetic layers, the matched control in the same cell) and the
table of the paper's models with what this run used in their place. Every value is traced
(:mod:`powerlens.outputs.trace`); template text holds no number of the run."""

from __future__ import annotations

import json

import pandas as pd

from powerlens.analysis.claims.registry import gist
from powerlens.analysis.claims.robustness import NOT_VARIED
from powerlens.outputs.article_evidence import paper_models
from powerlens.outputs.trace import (
    CONTROLLED,
    EVERY_SEED,
    WORDS,
    Traced,
    count_word,
    csv_cell,
    has_controls,
    json_value,
    read_table,
    row_count,
    verdict_columns,
)


def _family(arch: str) -> str:
    """An architecture's family name (its adapter's), the architecture itself where no adapter has it."""
    from powerlens.models.adapters import ADAPTERS

    adapter = ADAPTERS.get(arch)
    return adapter.family if adapter is not None else arch


def _read(run, name: str) -> pd.DataFrame | None:
    p = run.root / run.tables / name
    return read_table(p) if p.is_file() else None


def _prov(run) -> dict:
    return json.loads((run.root / run.provenance).read_text(encoding="utf-8"))


def model_row(run, models: pd.DataFrame | None, shown_models: str) -> str | None:
    """The table_models row (its model label) of a table_claims "models" cell ("all-MiniLM-L6-v2 (trained
    weights)")."""
    if models is None:
        return None
    hits = [m for m in models["model"] if shown_models == m or shown_models.startswith(m + " (")]
    return max(hits, key=len) if hits else None


def family_header(run, fam: str) -> list:
    """"all-MiniLM-L6-v2 (BERT family, 6 layers, trained weights)", each part traced."""
    claims, models = _read(run, "table_claims.csv"), _read(run, "table_models.csv")
    src_c, src_m = f"{run.tables}/table_claims.csv", f"{run.tables}/table_models.csv"
    rows = claims[claims["family"] == fam]
    first = rows.iloc[0]
    key = {"claim": first["claim"], "family": fam}
    label = model_row(run, models, first["models"])
    name = csv_cell(src_c, run.root, key, "family", r"^(.*?)(?: \(|$)")
    if label is None:
        return [csv_cell(src_c, run.root, key, "models"), " (", name, " family)"]
    mk = {"model": label}
    return [csv_cell(src_m, run.root, mk, "model"), " (", name, " family, ", csv_cell(src_m, run.root, mk, "layers"),
            " layers, ", csv_cell(src_m, run.root, mk, "weights"), ")"]


def _robust(run, claim: str, fam: str) -> list:
    rob = _read(run, "table_robustness.csv")
    if rob is None or "agree" not in rob:
        return []
    hit = rob[(rob["claim"] == claim) & (rob["family"] == fam)]
    if len(hit) != 1 or hit.iloc[0]["agree"] in ("-", NOT_VARIED):
        return []  # not varied: the variants could not have differed
    return [" [", csv_cell(f"{run.tables}/table_robustness.csv", run.root, {"claim": claim, "family": fam},
                           "agree"), "]"]


def verdict_cell(run, claim: str, fam: str, vcol: str | None) -> tuple:
    """One cell: the verdict word (coloured), claim p and attainable p (or the first failed part where the claim
    has no p), the robustness count where the variants could have differed, the matched controls' "passes in k of
    n seeds" and the training p beside them;
    each read from table_claims' columns of one number or word (:data:`powerlens.analysis.claims.NUMBERS`)."""
    src = f"{run.tables}/table_claims.csv"
    df = _read(run, "table_claims.csv")
    hit = df[(df["claim"] == claim) & (df["family"] == fam)]
    if len(hit) != 1:
        vsrc = f"{run.tables}/table_claim_verdicts.csv"
        return ([csv_cell(vsrc, run.root, {"claim": claim}, vcol)] if vcol else ["-"], "")
    r, key = hit.iloc[0], {"claim": claim, "family": fam}
    cell = lambda col: csv_cell(src, run.root, key, col)  # noqa: E731
    given = lambda col: r.get(col, "-") not in ("", "-")  # noqa: E731
    word = r["outcome"]
    out: list = [("s", f"w-{word.replace(' ', '-')}", [cell("outcome")])]
    if word == "underpowered":
        out += [" \u00b7 no power"] + ([": attainable p ", cell("attainable p value")] if given("attainable p value")
                                        else [])
    elif given("p value"):
        out += [" \u00b7 p ", cell("p value")]
        if given("attainable p value"):
            out += [", attainable ", cell("attainable p value")]
        if word == "not reproduced" and given("first failed part"):
            out += [" \u00b7 fails ", cell("first failed part")]
    elif given("first failed part"):
        out += [" \u00b7 ", cell("first failed part")]
    elif word == "reproduced":
        out += [" \u00b7 no p: a threshold or a residual decides"]
    out += _robust(run, claim, fam)
    if given("control outcome") and r["control outcome"] != "not judged":
        line = ["matched controls: ", cell("control outcome")]
        if given("control p value"):
            line += [" (largest p over seeds ", cell("control p value"), ")"]
        if given("training p value"):  # beside the verdict, never part of it (paper.md section 4e)
            line += ["; training p (trained vs controls) ", cell("training p value")]
        out.append(("s", "line", line))
    return (out, word.replace(" ", "-"))


def verdict_table(run) -> list:
    """The compact verdict table of the first screen."""
    vsrc = f"{run.tables}/table_claim_verdicts.csv"
    vdf = _read(run, "table_claim_verdicts.csv")
    claims = _read(run, "table_claims.csv")
    vcols = verdict_columns(vdf)
    fams = [c for c in vcols if c != "synthetic layers"]
    header = ["claim"] + [family_header(run, f) if (claims["family"] == f).any() else f for f in fams]
    has_synth = "synthetic layers" in vcols
    if has_synth:
        header.append("synthetic layers")
    rows = []
    for claim in vdf["claim"]:
        first = ([csv_cell(vsrc, run.root, {"claim": claim}, "claim"), ("s", "line", [gist(claim)])], "")
        if (claims.loc[claims["claim"] == claim, "outcome"] == "not judged").all():
            why = ["not judged in this run"]
            if "not judged in this run" in vdf and vdf.loc[vdf["claim"] == claim, "not judged in this run"].iloc[0] \
                    not in ("", "-"):
                why += [": ", csv_cell(vsrc, run.root, {"claim": claim}, "not judged in this run")]
            rows.append([first, (why + ["; see the stand-ins below"], "not-judged", len(header) - 1)])
            continue
        row = [first]
        for f in fams:
            row.append(verdict_cell(run, claim, f, f))
        if has_synth:
            synth = claims[(claims["claim"] == claim) & (claims["family"] == "synthetic")]
            row.append(verdict_cell(run, claim, "synthetic", "synthetic layers") if len(synth) == 1 else
                       ([csv_cell(vsrc, run.root, {"claim": claim}, "synthetic layers")], ""))
        rows.append(row)
    return [("table", header, rows, "verdicts"),
            ("p", ["Each cell: the verdict, the claim p and the attainable p (the smallest p the claim's tests could "
                   "reach, its specificity test included, so it can exceed the claim p beside it), "
                   "[how many robustness reruns agree: other Monte Carlo seeds and disjoint corpus thirds counted "
                   "apart, 'fragile' where a reproduced verdict fails on a third] where reruns could differ; second "
                   "line: the matched random control, never evidence. Click a value for its source entry (its "
                   "file and field); in the HTML, hovering shows them too."],
             "small")]


SOME = "^[1-9]"  # a count of one or more (row_count's regular expression on a column of counts)


def summary(run) -> list:
    """The first screen's sentences, every count traced: the trained models and what they stand in for
    (:func:`~powerlens.outputs.article_evidence.models_paragraph`), the verdicts counted by where each claim is
    judged, the pattern sentence chosen by rules (:mod:`powerlens.outputs.evidence`), and how sure."""
    from powerlens.outputs.article_evidence import counts_paragraph, models_paragraph, pattern_paragraph

    vsrc, csrc = f"{run.tables}/table_claim_verdicts.csv", f"{run.tables}/table_claims.csv"
    root = run.root
    n = {w: count_word(csrc, root, w) for w in WORDS}
    first = models_paragraph(run)
    models = _read(run, "table_models.csv")
    trained = models is not None and bool(models["weights"].str.startswith("trained").any())
    if not first and trained:  # a table_models without its keys: the models are named in the table's headers
        first = [("p", ["This run judged the paper's claims on ", row_count(f"{run.tables}/table_models.csv", root,
                                                                          [["weights", "^trained"]]),
                        " trained language model(s), named in the verdict table's headers, and on synthetic "
                        "layers. "], "summary")]
    elif not first:
        first = [("p", ["This run has no trained model: it tested only the claims about synthetic layers, and its "
                        "random-weight twins exercise the code without being evidence for or against any claim. "],
                  "summary")]
    s2 = []
    cols = set(read_table(root / csrc, nrows=0).columns)
    undecided = "control seeds undecided" in cols  # tables written before the column have none
    if trained and has_controls(vsrc, root):
        rep = [["outcome", ["reproduced"]]]
        s2 = ["Of the ", count_word(csrc, root, "reproduced", CONTROLLED), " reproduced cells with matched controls "
              "(random attention weights, judged the same way), the controls pass on every seed in ",
              count_word(csrc, root, "reproduced", EVERY_SEED), " (a pass there says nothing about trained "
              "attention)", *([", on at least one seed in ", row_count(csrc, root, rep + [["control seeds passing",
                                                                                      SOME]])]
                               if "control seeds passing" in cols else []),
              *([", and are undecided on some seed in ", row_count(csrc, root, rep + [["control seeds undecided",
                                                                                     SOME]])] if undecided else []),
              ". "]
    alpha = _alpha(run)
    judged = [["outcome", list(WORDS)]]
    either = row_count(csrc, root, judged, ["attainable p value", float(alpha.text)]) if alpha else None
    nop = (row_count(csrc, root, [["outcome", ["reproduced", "not reproduced"]], ["attainable p value", ["-", ""]]])
           if "attainable p value" in cols else "-")
    s3 = ["Of all judged cells, ", n["reproduced"], " reproduce the claim and ", n["not reproduced"], " do not. How "
          "sure, counting judged cells: ", either or "-", " had a test that could have gone either way (attainable p "
          "below alpha ", *([alpha] if alpha else []), "); underpowered (could not have passed): ",
          n["underpowered"], "; inconclusive: ", n["inconclusive"], "; decided without a p (a residual or a "
          "threshold): ", nop, "."]
    return [*first, *counts_paragraph(run), *pattern_paragraph(run), ("p", s2 + s3, "summary")]


def _alpha(run) -> Traced | None:
    prov = _prov(run)
    keys = ["config", "dynamics", "alpha"]  # the one place alpha is set (the schema has no claims.alpha)
    try:
        _ = prov["config"]["dynamics"]["alpha"]
    except (KeyError, TypeError):
        return None
    return json_value(run.provenance, run.root, keys)


def stand_ins(run, paper_config: str | None) -> list:
    """Each of the paper's models (the paper config's, read from the file) with what this run used in its place
    and why; then C5's line."""
    out = [("h", 2, ["The paper's models and their stand-ins"], "stand-ins")]
    if not paper_config or not (run.root / paper_config).is_file():
        return out + [("p", ["The paper config (config/config.yaml) is not beside this run, so the paper's models "
                             "cannot be listed here."])]
    paper = paper_models(run.root / paper_config)
    prov = _prov(run).get("models", {})
    models = _read(run, "table_models.csv")
    msrc = f"{run.tables}/table_models.csv"
    by_key = {r["key"]: r["model"] for _, r in models.iterrows()} if models is not None and "key" in models else {}
    from powerlens.models.sources import built_twin, random_weights

    trained = {k: v for k, v in prov.items() if not random_weights(v) and k in by_key}
    twins = {k: v for k, v in prov.items() if built_twin(v) and k in by_key}
    rows = [_stand_in_row(run, paper_config, key, spec, trained, twins, by_key) for key, spec in paper.items()]
    out += [("p", ["The paper's checkpoints as the paper config pins them, and the stand-in this run used in their "
                   "place, if any. "
                   "A family's verdict uses trained models only; random-weight twins are never evidence."]),
            ("table", ["paper's model (config/config.yaml)", "used in this run", "why"], rows, "compact")]
    extra = [k for k, v in trained.items() if v.get("arch") not in {s.get("arch") for s in paper.values()}]
    if extra:
        names = [x for i, k in enumerate(extra) for x in [", "] * (i > 0) + [
            csv_cell(msrc, run.root, {"model": by_key[k]}, "model"), " (",
            _family(prov[k].get("arch", "")), ", ",
            csv_cell(msrc, run.root, {"model": by_key[k]}, "weights"), ")"]]
        out.append(("p", ["Trained models of families the paper did not use, judged as their own families (the "
                          "paper's decoders GPT-2 and GPT-Neo have no trained stand-in here): ", *names, "."]))
    if not any(_shares_layers(v.get("arch")) for v in trained.values()):
        out.append(("p", ["C5 (ALBERT) is not judged: it is a claim about the trained ALBERT checkpoints, and no "
                          "trained ALBERT ran here (a random twin is never evidence). The paper config "
                          "(config/config.yaml), which loads the albert-*-v2 checkpoints from the hub, would "
                          "judge it."]))
    return out


def _shares_layers(arch: str | None) -> bool:
    """One layer shared by every depth (ALBERT's): the family C5 is about."""
    from powerlens.models.adapters import ADAPTERS

    return bool(getattr(ADAPTERS.get(arch or ""), "shares_layers", False))


def _stand_in_row(run, paper_config: str, key: str, spec: dict, trained: dict, twins: dict, by_key: dict) -> list:
    """One paper model's row of the stand-in table: its repo id and revision, what this run used, and why."""
    msrc = f"{run.tables}/table_models.csv"
    arch = spec.get("arch", "")
    name = [json_value(paper_config, run.root, ["models", key, "repo_id"]), " @ ",
            json_value(paper_config, run.root, ["models", key, "revision"], r"^(.{0,12})")]
    if key in trained:
        used = [csv_cell(msrc, run.root, {"model": by_key[key]}, "model"), " (",
                csv_cell(msrc, run.root, {"model": by_key[key]}, "weights"), ")"]
        why = ["the checkpoint itself ran"]
    elif same := [k for k, v in trained.items() if v.get("arch") == arch]:
        used = [x for i, k in enumerate(same) for x in ["; "] * (i > 0) + [
            csv_cell(msrc, run.root, {"model": by_key[k]}, "model"), " (",
            csv_cell(msrc, run.root, {"model": by_key[k]}, "weights"), ")"]]
        why = [f"trained stand-in of the same architecture ({_family(arch)}): evidence about the "
               "family at another size, not about this checkpoint, which this run's config does not load"]
    elif twin := [k for k, v in twins.items() if v.get("twin_of") == key]:
        used = [csv_cell(msrc, run.root, {"model": by_key[twin[0]]}, "model"), " (random weights)"]
        why = ["no trained model of this family in this run: the twin runs the code path, never evidence"]
    elif twin := [k for k, v in twins.items() if v.get("arch") == arch]:
        used = ["nothing; ", csv_cell(msrc, run.root, {"model": by_key[twin[0]]}, "model"),
                " covers the architecture (random weights)"]
        why = ["not in this run's config; no trained model of this family ran"]
    else:
        used, why = ["nothing"], ["not in this run's config (the paper config loads it from the hub)"]
    return [(name, ""), (used, ""), (why, "")]

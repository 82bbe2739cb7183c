"""Write the run's provenance manifest: versions, BLAS, models (revisions, weight sha256), config hash,
seeds, threads, device, and the start and end time of the run's outputs."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from powerlens.core.io import read_json, write_json, write_text
from powerlens.outputs import provenance
from powerlens.outputs.provenance import modelling_choices_html
from powerlens.pipeline.options import Option

OPTIONS = (
    Option("config", "param:config", help="the run's config as JSON", dest="config_json"),
    Option("manifests", "input:manifests", many=True),
    Option("records", "input:records", many="*", help="JSON outputs whose provenance blocks are gathered"),
    Option("prompts", "input:prompts", dest="prompts_path", help="the run's prompt corpus (its sha256 is recorded)"),
    Option("out", "output:manifest", dest="out_path", help="provenance.json to write"),
    Option("choices", "output:choices", help="the report's modelling-choices page (HTML)"),
)


def provenance_manifest(config_json: str, manifests: list[str], records: list[str], *, out_path,
                        choices: str | Path | None = None, prompts_path: str | Path | None = None) -> dict:
    """The run's provenance: what produced every output (one file per run), the prompt corpus's sha256
    included (a corpus replaced under an old mtime is told apart by its content)."""
    cfg = json.loads(config_json)
    models = {}
    for p in manifests:
        m = read_json(p)
        models[m["model"]] = {
            "source": m["source"], "arch": m["arch"], "repo_id": m.get("repo_id"), "twin_of": m.get("twin_of"),
            "requested_revision": m.get("requested_revision"), "resolved_revision": m.get("resolved_revision"),
            "weights_label": m["weights_label"],
            "weight_files_sha256": {k: v["sha256"] for k, v in m["files"].items() if k.endswith(".safetensors")},
        }
    times, threads, devices, seeds = [], {}, set(), set()
    pools = {}  # the BLAS and OpenMP pools the steps ran on (this step loads none: it would record nothing)
    for p in list(manifests) + list(records):
        rec = read_json(p).get("provenance", {})
        for pool in rec.get("blas") or []:
            pool = {k: v for k, v in pool.items() if k != "num_threads"}  # the threads are recorded per output
            pools[json.dumps(pool, sort_keys=True)] = pool
        if rec.get("created_at"):
            times.append(rec["created_at"])
        if rec.get("threads"):
            threads[str(p)] = rec["threads"]
        if rec.get("device"):
            devices.add(rec["device"])
        if rec.get("seed") is not None:
            seeds.add(rec["seed"])
    doc = {
        "run": cfg["run"], "config": cfg, "config_sha256": provenance.config_hash(cfg),
        "versions": provenance.versions(), "code": provenance.code_revision(), "machine": provenance.machine(),
        "blas": [pools[k] for k in sorted(pools)] or provenance.blas(),
        "corpus": provenance.corpus_record(prompts_path) if prompts_path is not None else None,
        "models": models,
        "seed": cfg.get("seed"), "seeds_recorded": sorted(seeds), "threads_per_output": threads,
        "devices": sorted(devices), "start_time": min(times) if times else None,
        "end_time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "modelling_choices": modelling_choices(cfg),
    }
    write_json(out_path, doc)
    if choices is not None:  # the report's modelling-choices page

        write_text(choices, modelling_choices_html(cfg, modelling_choices(cfg)))
    return doc


def modelling_choices(cfg: dict) -> list[str]:
    """:data:`MODELLING_CHOICES` with the run's own values (the draw cap; the schema's default where the config
    holds none) in place."""
    from powerlens.pipeline.config import schema_defaults

    cap = str(cfg.get("dynamics", {}).get("null_draws_cap", schema_defaults()["dynamics"]["null_draws_cap"]))
    return [c.replace("{null_draws_cap}", cap) for c in MODELLING_CHOICES]


MODELLING_CHOICES = [
    "F_t = W_O W_V (grouped-query attention: sum_h W_O^h W_V^g(h)) with biases dropped from F and kept in the "
    "dynamics (paper.md section 4; the summaries are silent, so this is the spec's choice). Pre-norm models: the "
    "norm-folded F~ = O V diag(g) beside F; where a norm also follows the attention output (Gemma 3's "
    "post-attention norm, gain p) F~ = diag(p) O V diag(g) (paper.md section 4, revision 3: the spec's "
    "definition). The attention-only law leaves the post-attention norm out, as the paper's law has none (our "
    "choice).",
    "Eigenvalues ordered by modulus, ties by argument; eigenvectors of unit norm with the largest-magnitude "
    "component real and positive; a conjugate pair counts as a complex leading eigenvalue.",
    "Complex leading pair: the direction is the plane span(Re v_1, Im v_1); alignment is the projection norm.",
    "Residual view: one step iterates M = I + F; F's leading eigenpair is the main result, M's is reported "
    "beside it where the two differ.",
    "gamma_t, rho_t and the tilt a(t+1) - a(t) measured against v_{1,t} before and after layer t, in float64. "
    "Per layer (paper.md sections 4, 4c and 4d, revision 5): a Monte Carlo null of R random subspaces of the "
    "lead's dimension (seeded stream; p = (#{null > lead} + U (1 + #{null == lead})) / (1 + R) with a seeded "
    "tie-break U, one-sided) whose p is an interval (the 99% Clopper-Pearson interval covering every tie-break); "
    "Holm across the depth gives the per-layer marks the figures draw. A claim 'in at least k of the L layers' "
    "(C1, C7, C10's attention clause; C6 (a) with k = 1) reads one p, the partial conjunction (Benjamini and "
    "Heller, Bonferroni form) min(1, (L - k + 1) p_(k)) over the layers' p (1 where the side condition tilt > 0 "
    "or rho > 0.5 fails, or where the layer is 'saturated': half or more of the draws tie with the lead), with "
    "its simultaneous 99% interval from the layers' intervals at level 1 - 0.01/L (revision 6). Specificity "
    "across the model: the lead's rank among F_t's other "
    "eigen-directions of its kind (|lambda| > 1e-9 |lambda_1|; real eigenvectors for a real lead, planes of "
    "complex pairs for a complex one), summed over the layers and compared with its exact distribution under "
    "independent uniform ranks, and, since the layers share their tokens and may share their directions, "
    "among the same rank sums of its members followed from layer to layer (chains: each member to its most "
    "similar member of the next layer, one to one where the sizes allow); the specificity p is the larger of "
    "the two (our modelling choice; revision 6, section 4e). It holds its level at 5% under independent layers, "
    "an eigenbasis shared by all layers, partly shared ones, F_t = S + noise with a persistent lead and a shared "
    "latent (tests/unit/test_dependence.py); it cannot see a lead that persists while its members change too "
    "much between layers to be followed. Each specificity row states the dependence estimate (the between-layer "
    "rank correlation the chains imply), the exchangeable correlation at which the independent p would reach "
    "alpha (the tipping correlation, normal approximation) and the lead's lag-1 autocorrelation across layers. "
    "R0 is the smallest number of draws at which every rule read in that mode can reach significance, at least "
    "null_draws; only tests a criterion reads are extended (R0, 10 R0, 100 R0, at most {null_draws_cap}), only "
    "where they can still move its verdict. Tokens and prompts are not independent units (a corpus-wide drift "
    "between layers), so token- and prompt-level sign tests are secondary columns only.",
    "Every statistic is also computed against the leading direction of M = I + F and, for pre-norm models, of "
    "the norm-folded F~ = O V diag(g) (g the pre-attention norm's gain); F's stays the main result.",
    "Attention-only diagnostics: attention entropy relative to log(visible keys), ||W_O b_V + b_O|| / "
    "||F x_mean|| (x_mean a prompt's mean token), and a bias-free control run (attention biases removed).",
    "Claim criteria are those of paper.md sections 4b and 4d, revision 5 (pre-registered): C1 is judged in the "
    "attention-only law, with the real forward pass and the matched controls (several seeds) shown beside it; C5(c) "
    "is 'not judged' unless the configuration is one of the four albert-*-v2 sizes; C7 is judged for every "
    "trained model, shared-weight ones included; C10 is judged in the real forward pass split at the sublayers "
    "(after attention, its residual add and any norm that belongs to it; after the FFN block), its FFN clause a "
    "per-layer Holm count checked for whether it could fail. For every criterion the smallest p its rule could "
    "produce with perfect data at this resolution is computed (the attainable p); a criterion that could not "
    "pass, or whose pass rests on a clause that could not fail, is 'underpowered'. A criterion whose outcome "
    "rests on tests still undecided at the cap, or that changes with the Monte Carlo seed (table_robustness), "
    "is 'inconclusive'; a value within 1e-6 (relative) of its threshold is undecided.",
    "Matched controls (paper.md section 4e, revision 6): every trained model gets control_seeds controls, each "
    "the trained model with every layer's W_Q, W_K, W_V, W_O drawn by transformers' own initialisation under "
    "its seed (everything else, biases included, stays trained, bit for bit), W_V rescaled per layer so that "
    "|lambda_1(F_t)| equals the trained layer's and each query head's W_Q so that ||W_Q^h^T W_K^g(h)||_F does "
    "(our choice: the value and query biases are not rescaled). Each is judged by the same criteria at R0 "
    "without extension and shown beside the trained model as 'passes in j of n seeds'; it is never evidence. "
    "Beside each claim judged by random directions, the training p: per layer the lead's z-score against its own "
    "random-direction null (lead minus the null's mean, over its SD), trained minus the seeds' mean, and a "
    "one-sided sign-flip test over the layers (exact up to 20 layers, else 100,000 seeded flips); it never "
    "enters the verdict.",
    "The method of each claim not read by the partial conjunction: C2 and C3 (synthetic layers) read the share of "
    "seeds (at every attention sharpness of the sweep, at least 95% of the weight seeds reach consensus on v_1, "
    "or the leading plane, from clustered starts), beside a uniform-attention positive control that must meet the "
    "power method's analytic rate (C2) or angle (C3) to 1e-9; C5 reads thresholds on the final consensus and the "
    "alignment above the random-subspace null's quantile; C8 the one-sided Spearman rank correlation across the "
    "layers between the relative gap 1 - |lambda_next| / |lambda_1| and gamma's margin over its null median; C9 "
    "a threshold on the mean |cos(x, u)| after the edit (no null).",
    "C4 (paper.md section 4b, revision 4): over a sweep of sizes, head counts and attention sharpness (the "
    "typical |score| of the bipartite start, set through the q.k scale), the bipartite iterate is refined to a "
    "fixed point of the law step (up to a swap of the two groups) by damped Gauss-Newton in float64, on to the "
    "rounding floor; residual < 1e-9, else 'no equilibrium' with its residual. Stability from the spectral "
    "radius of the Jacobian of one law step there, on the tangent space of the token spheres (the swap symmetry "
    "folded in: our choice): unstable above 1 + 1e-6, stable below 1 - 1e-6, else neutral. "
    "Cells whose attention at the equilibrium is "
    "uniform (max |score| < 1e-8) are degenerate. Perturbation runs are a check whose agreement is reported. "
    "Revision 6 (paper.md section 4e): unstable more often with several heads than one, by the one-sided exact "
    "conditional test over strata of the configured sharpness x (size, seed) block (never the sharpness measured "
    "at the equilibrium, which the heads move; cells of one block share a weight draw), a sign test over blocks "
    "beside it; a positive control (self-only attention on +-v_2 of M, a known unstable equilibrium) must be "
    "unstable; and 'rare': with several heads, the block-bootstrap 95% upper bound (20000 seeded resamples, the "
    "bound's own 99% Monte Carlo interval deciding) of the share of random starts ending bipartite is below "
    "claims.C4_rare_share.",
    "The statistics exclude the tokenizer's special tokens, which the forward pass keeps: BOS/CLS/SEP are not "
    "prompt text (paper.md section 4). Prompts are truncated to max_tokens (our choice).",
    "Attention-only law: x(0) is the embedding output; N is L2 normalisation (default) or, with norm: "
    "layernorm, the layer's own norm (LayerNorm or RMSNorm, as the model has it; paper.md section 4); "
    "shared-weight models iterate their layer for `steps` steps.",
    "Steering: the edit O' = O + s u z^T with s = kappa |lambda_1(F)|; z from least squares V^T z = u; for ALBERT "
    "the edited output matrix is the shared layer's: with steering.shared_edit = every_depth (default) every "
    "depth sees it, and the baseline then acts at every depth too, in both modes; with last_depth both act at the "
    "last depth only (each model's steering.json says which); the unembedding target of causal LMs is the final "
    "norm's gain times W_U[token] (Gemma: 1 + w); "
    "causal LMs with a token target also get greedy continuations of fixed prompts per kappa, both methods; "
    "the baseline adds beta u where the residual stream receives the attention output (W_O's output; after "
    "the post-attention norm where one follows, Gemma 3), beta = the edit's mean norm of change there, so the "
    "methods are compared at matched norm of change, kappa by kappa (a curve over the norm). With a "
    "post-attention norm the change is capped (the cap is in steering.json) and points along p * u: the "
    "alignment with p * u is reported beside u's. With grouped-query attention V^T z = u has no exact "
    "solution: ||V^T z - u|| is reported per target and no bound is stated there (paper.md section 6). "
    "C9 (revision 6, paper.md section 4e): past the configured kappas each target's kappa doubles until the "
    "real pass's mean |cos| reaches claims.C9_alignment, moves less than 0.01 over two doublings, a norm after "
    "the edit caps it below the criterion, or kappa would pass claims.C9_kappa_cap; each target is judged at the "
    "largest kappa it reached. Activation addition's beta sweep is halved or doubled until it brackets the edit's "
    "KL; beside the verdict, the edit minus activation addition at the edit's KL, in mean |cos| and in "
    "P(target), with 95% percentile intervals from 2000 seeded bootstrap resamples of the prompts (our choice: "
    "prompts are the resampled unit).",
    "GGUF models (source: gguf) are trained but quantized (e.g. 4-bit Q4_1): dequantized to float32 once and "
    "labelled with their quantization; quantization sensitivity is measured on a full-precision model.",
    "Twins (source: random) share a paper model's exact architecture with seeded random weights and their "
    "family's tokenizer or a stand-in (BERT/ALBERT: bert-base-uncased WordPiece; GPT-2/GPT-Neo: SmolLM2's "
    "byte-level BPE; tiny test twins: bytes); their results say nothing about trained models and are labelled.",
    "Claims criteria are fixed in the config (claims:) before any run and never tuned afterwards.",
]


def show(result, kw: dict) -> None:
    print(f"run {result['run']}: {len(result['models'])} models, config sha256 {result['config_sha256'][:12]}")


STEP = provenance_manifest

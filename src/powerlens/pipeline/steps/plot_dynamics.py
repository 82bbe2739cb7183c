"""Draw fig_gamma, fig_rho, fig_tilt, fig_albert_consensus, fig_albert_rotation, fig_gamma_gap (C8: gamma's
margin against the spectral gap, with the spectra step's CSVs) and write table_alignment."""

from __future__ import annotations

from powerlens.pipeline.options import ALPHA, CRITERIA, NULL_DRAWS_CAP, Option, show_table

OPTIONS = (
    Option("csv", "input:csv", many=True, help="per-model, per-mode dynamics CSVs"),
    Option("npz", "input:npz", many=True, help="matching dynamics arrays"),
    Option("meta", "input:meta", many=True, help="weights.json of every model"),
    Option("spectra", "input:spectra", many=True, help="spectra CSVs of every model (fig_gamma_gap)"),
    Option("labels", "param:labels", kind="json", help="JSON {model: display label}"),
    Option("fig-gamma", "param:gamma", help="path of fig_gamma without suffix"),
    Option("fig-rho", "param:rho", help="path of fig_rho without suffix"),
    Option("fig-tilt", "param:tilt", help="path of fig_tilt without suffix"),
    Option("fig-albert-consensus", "param:consensus", help="path of fig_albert_consensus without suffix"),
    Option("fig-albert-rotation", "param:rotation", help="path of fig_albert_rotation without suffix"),
    Option("fig-gamma-gap", "param:gamma_gap", help="path of fig_gamma_gap without suffix"),
    Option("table-alignment", "param:table", help="path of table_alignment without suffix"),
    Option("parts", "param:parts", kind="json",
           help="JSON {figure: [trained, random weights]}: which parts of each figure the run writes"),
    ALPHA,
    NULL_DRAWS_CAP,
    CRITERIA,
    Option("dpi", "config:plot.dpi", kind="int", help="resolution of the PNG figures"),
)


def plot_dynamics(*, csv: list[str], npz: list[str], meta: list[str], labels: dict, fig_gamma: str, fig_rho: str,
                  fig_tilt: str, fig_albert_consensus: str, fig_albert_rotation: str, table_alignment: str,
                  alpha: float, null_draws_cap: int, criteria: dict, dpi: int, spectra: list[str] = (),
                  fig_gamma_gap: str = "", parts: dict | None = None):
    from powerlens.analysis.verdict_tests import decision_rule
    from powerlens.outputs.figures import dynamics_figures
    from powerlens.outputs.staging import staged

    stems = {"fig_gamma": fig_gamma, "fig_rho": fig_rho, "fig_tilt": fig_tilt,
             "fig_albert_consensus": fig_albert_consensus, "fig_albert_rotation": fig_albert_rotation,
             "table_alignment": table_alignment}
    if fig_gamma_gap:
        stems["fig_gamma_gap"] = fig_gamma_gap
    with staged(stems) as tmp:  # all files replaced together, or none (an interrupt half-way)
        return dynamics_figures(csv, npz, meta, labels, crit=decision_rule(criteria, alpha, null_draws_cap), dpi=dpi,
                                stems=tmp, spectra=list(spectra), parts=parts)


show = show_table
STEP = plot_dynamics

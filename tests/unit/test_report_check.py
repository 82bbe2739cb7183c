"""The report's freshness check: which outputs Snakemake's --summary plans to update, and the command line the
check and its message use (issue 39, item 1; the workflow-level test is in tests/integration)."""

from powerlens.pipeline.report_check import REPORT_ONLY, is_report_request, run_arguments, stale_outputs

SUMMARY = """output_file\tdate\trule\tlog-file(s)\tstatus\tplan
results/r/m/steering.csv\tThu\tsteering\tlogs/x.log\tparams changed\tupdate pending
figures/r/fig.png\tThu\tplot\t-\tok\tupdate pending
results/r/m/spectra.npz\tThu\tspectra\t-\tok\tno update
"""


def test_stale_outputs_are_the_ones_snakemake_would_update():
    assert stale_outputs(SUMMARY) == [("results/r/m/steering.csv", "steering", "params changed"),
                                      ("figures/r/fig.png", "plot", "ok")]
    assert stale_outputs(SUMMARY.replace("update pending", "no update")) == []
    assert stale_outputs("Building DAG of jobs...") == []


def test_the_check_reruns_the_command_line_less_the_report_and_the_places():
    argv = ["--cores", "2", "--configfile", "/a.yaml", "/b.yaml", "--directory", "/x", "--report", "/r.html",
            "-s", "S", "--config", "k=1"]
    assert is_report_request(argv) and not is_report_request(argv + ["--report-after-run"])
    assert not is_report_request(["--cores", "2"])
    assert run_arguments(argv) == ["--cores", "2", "--config", "k=1"]
    assert run_arguments(argv, REPORT_ONLY) == ["--cores", "2", "--configfile", "/a.yaml", "/b.yaml",
                                                "--directory", "/x", "-s", "S", "--config", "k=1"]
    assert run_arguments(["--report", "--cores", "2"]) == ["--cores", "2"]  # --report's file is optional
    assert run_arguments(["--report=x.html", "-n"]) == ["-n"]

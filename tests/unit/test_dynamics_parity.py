"""One analysis, one path: the API's dynamics (powerlens.Lens.dynamics, options at the schema's defaults) and
the pipeline's dynamics step (options as the rule passes them from a default config) give the same table, column
for column and value for value, in both modes, the bias-free control and a shared-weight model's long run
included."""

import pandas as pd
import pytest

PROMPTS = ["The cat sat on the mat.", "Water boils at one hundred degrees.", "A b c d e f g.", "Rain, then sun."]


@pytest.fixture(scope="module", params=["tiny-gpt2", "tiny-albert"])
def twin(request, prepared_twin):
    return prepared_twin(request.param)


@pytest.mark.parametrize("mode", ["model", "attention-only"])
def test_api_and_step_give_one_table(twin, mode, tmp_path):
    import powerlens
    from powerlens.cli import build_parser
    from powerlens.pipeline.config import schema_defaults
    from powerlens.pipeline.options import command, step_kwargs
    from powerlens.pipeline.steps import dynamics as step

    d, rec = twin
    (tmp_path / "p.txt").write_text("\n".join(PROMPTS) + "\n")
    cfg = schema_defaults()  # a default config, but for a long run past a tiny ALBERT's depth on a sample
    cfg["dynamics"].update(steps=12, long_run_prompts=2)
    cfg["device"] = "cpu"
    files = {"manifest": d / "m.json", "tensors": d / "w.safetensors", "meta": d / "w.json", "spectra": d / "s.npz",
             "prompts": tmp_path / "p.txt", "out-npz": tmp_path / "d.npz", "out-csv": tmp_path / "d.csv",
             "out-json": tmp_path / "d.json", "out-robustness": tmp_path / "r.csv", "mode": mode, "threads": 1}
    # the step's keywords as its declared options make them from the config (the rule's own path: the command
    # line rendered from OPTIONS, parsed back by the CLI)
    words = command("dynamics", step.OPTIONS, files, cfg)[4:]
    kw = step_kwargs(build_parser("dynamics").parse_args(["dynamics", *words]), step.OPTIONS)
    assert {o.keyword for o in step.OPTIONS} == set(kw)
    ref = step.STEP(**kw)
    lens = powerlens.Lens.from_pretrained(rec["path"], head=False)
    got = lens.dynamics(PROMPTS, mode=mode, steps=12, long_run_prompts=2)  # every other option at its default
    step = ref.drop(columns=["model", "mode", "weights"])
    assert list(got.columns) == list(step.columns)
    pd.testing.assert_frame_equal(got, step, check_exact=True)
    if mode == "attention-only":
        assert any(c.endswith("_nobias") for c in got.columns)  # the control ran in both
        # at the model's own depths (a twin's biases start at zero: its control equals the law)
        assert got["gamma_nobias"].notna().any()
    written = pd.read_csv(tmp_path / "d.csv")
    assert len(written) == len(got) and set(step.columns) <= set(written.columns)

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
    from powerlens.pipeline.config import schema_defaults
    from powerlens.pipeline.steps.dynamics import dynamics

    d, rec = twin
    (tmp_path / "p.txt").write_text("\n".join(PROMPTS) + "\n")
    defaults = schema_defaults()
    dyn = {**defaults["dynamics"], "steps": 12, "long_run_prompts": 2}  # past a tiny ALBERT's depth, on a sample
    ref = dynamics(d / "m.json", d / "w.safetensors", d / "w.json", spectra_npz=d / "s.npz",
                   prompts_path=tmp_path / "p.txt", out_npz=tmp_path / "d.npz", out_csv=tmp_path / "d.csv",
                   out_json=tmp_path / "d.json", mode=mode, null_draws=dyn["null_draws"], max_tokens=dyn["max_tokens"],
                   batch_size=dyn["batch_size"], long_run_prompts=dyn["long_run_prompts"],
                   batch_tokens=dyn["batch_tokens"], norm=dyn["norm"], steps=dyn["steps"], seed=defaults["seed"],
                   device="cpu", dtype=dyn["dtype"], threads=1, control=dyn["bias_free_control"],
                   alpha=dyn["alpha"], robustness=dyn["robustness"], out_robustness=tmp_path / "r.csv")
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

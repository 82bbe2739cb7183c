"""table_speed (issue 40): each heavy job's wall time from its benchmark file beside the arithmetic lower bound
at a given peak; the spectra bound is the eigen-solves' count, the ratio wall / bound."""

import pytest

from powerlens.models.archs import twin_config
from powerlens.pipeline.config import schema_defaults
from powerlens.pipeline.resources import EIG_FLOPS_N3
from powerlens.pipeline.speed import bound_s, speed_rows


def bench(path, s):
    path.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{s}\t0:00:01\t100.0\t{s * 0.9}\n")
    return str(path)


def test_wall_time_beside_the_arithmetic_bound(tmp_path):
    cfg = schema_defaults()
    cfg["models"] = {"t": {"source": "random", "twin_of": "gpt2", "arch": "gpt2", "seed": 0}}
    peak = {"float32": 1e10, "float64": 5e9}
    jobs = [{"model": "t", "rule": "spectra", "benchmark": bench(tmp_path / "a.tsv", 2.0), "tokens": 0,
             "targets": 0, "weights_label": "random weights"},
            {"model": "t", "rule": "dynamics_model", "benchmark": bench(tmp_path / "b.tsv", 30.0), "tokens": 1000,
             "targets": 0, "weights_label": "random weights"},
            {"model": "t", "rule": "steering", "benchmark": bench(tmp_path / "c.tsv", 40.0), "tokens": 500,
             "targets": 3, "weights_label": "random weights"}]
    df = speed_rows(cfg, jobs, peak, {"t": "GPT-2 twin"})
    assert list(df["step"]) == ["spectra", "dynamics (model)", "steering"] and set(df["model"]) == {"GPT-2 twin"}
    k = twin_config("gpt2").kwargs
    spectra_s = EIG_FLOPS_N3 * k["n_layer"] * k["n_embd"] ** 3 / peak["float64"]
    assert df.loc[0, "lower bound (s)"] == pytest.approx(spectra_s, rel=5e-3)
    assert df.loc[0, "wall / bound"] == pytest.approx(2.0 / spectra_s, rel=5e-3)
    # the forward pass counts 2 flops per multiply-add per token: more tokens, a larger bound
    more = speed_rows(cfg, [{**jobs[1], "tokens": 2000}], peak, {})
    assert more.loc[0, "lower bound (s)"] > df.loc[1, "lower bound (s)"] and df.loc[1, "wall (s)"] == 30.0
    assert (df["wall / bound"] > 0).all() and (df["arithmetic (GFLOP)"] > 0).all()
    assert bound_s({}, peak) != bound_s({}, peak)  # nothing counted: NaN, never 0

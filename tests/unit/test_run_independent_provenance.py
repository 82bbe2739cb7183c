"""Run-independent provenance: the BLAS pools of provenance.json come in one order whatever order the libraries
were loaded in (threadpoolctl lists them in load order: numpy's and scipy's OpenBLAS swapped places between two
runs of the same step), and table_models names a matched control's origin instead of its folder's absolute path."""

import threadpoolctl

from powerlens.outputs import provenance


def test_the_blas_pools_are_recorded_in_a_fixed_order_with_their_library(monkeypatch):
    pools = [{"internal_api": "openblas", "prefix": "libscipy_openblas", "version": "0.3.31", "num_threads": 2,
              "architecture": "SkylakeX", "filepath": "/x/a/libscipy_openblas.so"},
             {"internal_api": "openmp", "prefix": "libgomp", "version": None, "num_threads": 2,
              "architecture": None, "filepath": "/x/b/libgomp.so"},
             {"internal_api": "openblas", "prefix": "libnumpy_openblas", "version": "0.3.30", "num_threads": 2,
              "architecture": "SkylakeX", "filepath": "/x/c/libnumpy_openblas.so"}]
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: list(pools))
    first = provenance.blas()
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: list(reversed(pools)))
    assert provenance.blas() == first
    assert [p["library"] for p in first] == ["a/libscipy_openblas.so", "c/libnumpy_openblas.so", "b/libgomp.so"]
    assert all("filepath" not in p and "/x/" not in p["library"] for p in first)  # not this machine's path


def test_a_matched_controls_origin_is_named_not_its_folders_path():
    from powerlens.outputs.tables import models_table

    meta = {"model": "m-control", "control_of": "m", "source": "control", "n_params": 2e6, "d_model": 8,
            "n_layers": 2, "n_heads": 2, "shared_weights": False, "weights_label": "random attention weights"}
    row = models_table([meta], manifests={"m-control": {"path": "/some/run/folder/m-control/control"}}).iloc[0]
    assert row["hub id / origin"] == "matched control of m"  # the same table whichever folder ran it
    del meta["control_of"]  # the check can fail: without the field the path is what is left
    assert models_table([meta], manifests={"m-control": {"path": "/x"}}).iloc[0]["hub id / origin"] == "/x"


def test_the_runs_provenance_records_the_pools_its_steps_ran_on(tmp_path):
    import json

    from powerlens.pipeline.steps.provenance import provenance_manifest

    a = {"internal_api": "openblas", "prefix": "libscipy_openblas", "version": "0.3.31", "architecture": "X"}
    b = {"internal_api": "openmp", "prefix": "libgomp", "version": None, "architecture": None}
    recs = []
    for i, (pools, threads) in enumerate([([a, b], 2), ([b, a], 1), ([], 1)]):
        p = tmp_path / f"r{i}.json"
        p.write_text(json.dumps({"provenance": {"blas": [{**x, "num_threads": threads} for x in pools],
                                                "threads": threads}}))
        recs.append(str(p))
    doc = provenance_manifest(json.dumps({"run": "r", "seed": 0}), [], recs, out_path=tmp_path / "prov.json")
    assert doc["blas"] == [a, b]  # each pool once, whatever the order or thread count a step had
    assert json.loads((tmp_path / "prov.json").read_text())["blas"] == [a, b]

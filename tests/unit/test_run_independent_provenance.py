"""Run-independent provenance: the BLAS pools of provenance.json come in one order whatever order the libraries
were loaded in (threadpoolctl lists them in load order: numpy's and scipy's OpenBLAS swapped places between two
runs of the same step), and table_models names a matched control's origin instead of its folder's absolute path."""

import threadpoolctl

from powerlens.outputs import provenance


def test_the_blas_pools_are_recorded_in_a_fixed_order_with_their_library(monkeypatch):
    pools = [{"internal_api": "openblas", "prefix": "libscipy_openblas", "version": "0.3.31", "num_threads": 2,
              "architecture": "SkylakeX", "filepath": "/a"},
             {"internal_api": "openmp", "prefix": "libgomp", "version": None, "num_threads": 2,
              "architecture": None, "filepath": "/b"},
             {"internal_api": "openblas", "prefix": "libnumpy_openblas", "version": "0.3.30", "num_threads": 2,
              "architecture": "SkylakeX", "filepath": "/c"}]
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: list(pools))
    first = provenance.blas()
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: list(reversed(pools)))
    assert provenance.blas() == first
    assert [p["prefix"] for p in first] == ["libnumpy_openblas", "libscipy_openblas", "libgomp"]
    assert all("filepath" not in p for p in first)  # a path of this machine is not recorded


def test_a_matched_controls_origin_is_named_not_its_folders_path():
    from powerlens.outputs.tables import models_table

    meta = {"model": "m-control", "control_of": "m", "source": "control", "n_params": 2e6, "d_model": 8,
            "n_layers": 2, "n_heads": 2, "shared_weights": False, "weights_label": "random layer weights"}
    row = models_table([meta], manifests={"m-control": {"path": "/some/run/folder/m-control/control"}}).iloc[0]
    assert row["hub id / origin"] == "matched control of m"  # the same table whichever folder ran it
    del meta["control_of"]  # the check can fail: without the field the path is what is left
    assert models_table([meta], manifests={"m-control": {"path": "/x"}}).iloc[0]["hub id / origin"] == "/x"

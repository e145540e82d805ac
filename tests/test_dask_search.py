"""GridSearchCV over k and L on a Dask cluster through joblib's "dask" backend: the estimators
pickle to the worker processes, each worker resolves the fused CPU kernels once (or falls back
to the eager path), and the scores equal those of the same search run locally."""

import joblib
import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV, KFold

from gmnet_sklearn import GMNetRegressor

from ._smiles import SMILES, regression_target

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow  # two worker processes start and import torch: about a minute on 2 cores

TINY = dict(d_model=16, n_layers=1, n_heads=2, batch_size=16, max_epochs=2, lr=1e-3, random_state=0,
            valid_split=None)
GRID = {"k": [4, 6], "L": [2, 3]}


def _worker_state() -> dict:
    """What one worker process has: its torch threads, where it imported the library from, and
    whether it resolved the CPU kernels (built or loaded once per process, or failed cleanly)."""
    import sys

    import gmnet_sklearn
    from gmnet_sklearn.gm import cpu

    return {"threads": torch.get_num_threads(), "library": gmnet_sklearn.__file__,
            "kernels": cpu._module is not None, "kernel_failure": cpu._failed,
            "fitted_here": "gmnet_sklearn.estimators._base" in sys.modules}


def _search(n_jobs):
    return GridSearchCV(GMNetRegressor(**TINY), GRID, cv=KFold(2), n_jobs=n_jobs, error_score="raise")


@pytest.fixture
def one_torch_thread():
    """The workers' count (and the refit's, which runs here): seeded fits repeat bit for bit for
    a given number of threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.timeout(600)
def test_grid_search_on_a_local_dask_cluster_equals_the_local_run(one_torch_thread):
    import gmnet_sklearn
    from gmnet_sklearn.gm.cpu import cpu_kernels_available

    X, y = SMILES, regression_target(SMILES)
    local = _search(n_jobs=1).fit(X, y)

    # Each worker holds one "GPU" resource and each fit asks for one: the pinning README.md
    # documents for GPU workers (here only a scheduling constraint; the fits run on CPU).
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={"GPU": 1},
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        client.run(torch.set_num_threads, 1)
        # build (or load) the CPU kernels once in each worker before the fits; False = eager path
        warm = client.run(cpu_kernels_available)
        with joblib.parallel_backend("dask", resources={"GPU": 1}):
            remote = _search(n_jobs=-1).fit(X, y)
        states = client.run(_worker_state)

    assert len(warm) == len(states) == 2
    for address, state in states.items():
        assert state["threads"] == 1 and state["library"] == gmnet_sklearn.__file__
        assert state["kernels"] is warm[address]  # resolved once, before the search, and kept
        assert state["kernels"] or state["kernel_failure"]  # else a recorded, clean fallback
    assert any(state["fitted_here"] for state in states.values())  # the fits ran in the workers
    assert remote.cv_results_["params"] == local.cv_results_["params"]
    for key in ("split0_test_score", "split1_test_score", "mean_test_score", "rank_test_score"):
        np.testing.assert_array_equal(remote.cv_results_[key], local.cv_results_[key], err_msg=key)
    assert np.isfinite(remote.cv_results_["mean_test_score"]).all()
    assert remote.best_params_ == local.best_params_
    np.testing.assert_array_equal(remote.best_estimator_.predict(X[:5]), local.best_estimator_.predict(X[:5]))

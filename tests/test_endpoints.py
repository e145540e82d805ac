"""One endpoint table in the package, read by the CLI and by benchmarks/."""

import numpy as np
import pytest

import benchmarks.protocols
from gmnet_sklearn import cli
from gmnet_sklearn.datasets import ENDPOINTS, fetch_moleculenet
from gmnet_sklearn.datasets import endpoints as table


def test_benchmarks_re_export_the_package_table():
    for name in ("ENDPOINTS", "TABLE1_ENDPOINTS", "EXTRA_ENDPOINTS", "PAPER_KL", "PAPER_KL_PARAMS", "Endpoint",
                 "by_size", "resolve_endpoints"):
        assert getattr(benchmarks.protocols, name) is getattr(table, name), name
    assert ENDPOINTS is table.ENDPOINTS


def test_cli_reads_the_table():
    # The job handles single-task endpoints with no target transform; its metric and the paper's
    # figures it prints come from the table.
    for name in cli.DATASETS:
        e = ENDPOINTS[name]
        assert e.table1 and len(e.tasks) == 1 and e.target_transform is None
        assert e.paper_value("gmnet") is not None and e.paper_value("chemberta") is not None
    assert ENDPOINTS["freesolv"].paper_value("gmnet") == (0.702, 0.026)
    assert ENDPOINTS["bbbp"].paper_value("chemberta") == (0.632, 0.009)


def test_columns_task_type_and_transform_come_from_the_dataset_table():
    e = ENDPOINTS["tox21_sr_p53"]
    assert (e.task_type, e.smiles_column, e.tasks, e.n_rows) == ("classification", "smiles", ("SR-p53",), 7831)
    e = ENDPOINTS["bace_regression"]
    assert (e.task_type, e.smiles_column, e.tasks, e.target_transform) == ("regression", "mol", ("pIC50",), None)
    assert ENDPOINTS["clearance"].target_transform == "log1p"
    assert len(ENDPOINTS["sider"].tasks) == 27 and len(ENDPOINTS["tox21"].tasks) == 12
    assert [e.name for e in ENDPOINTS.values() if e.task_type == "regression"] == [
        "esol", "freesolv", "lipophilicity", "bace_regression", "clearance"]


@pytest.mark.parametrize("name", ["freesolv", "bace_classification", "clintox", "tox21_sr_p53"])
def test_endpoint_columns_match_the_files(name, moleculenet_path):
    e = ENDPOINTS[name]
    try:  # (a data folder without this file: skipped, never downloaded)
        bunch = fetch_moleculenet(e.dataset, data_home=moleculenet_path, download=False)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    assert tuple(bunch.target_names) == e.tasks and bunch.smiles_column == e.smiles_column
    assert len(bunch.smiles) == e.n_rows
    assert bunch.target.shape[1:] == (() if len(e.tasks) == 1 else (len(e.tasks),))
    if e.task_type == "classification":
        observed = bunch.target[~np.isnan(bunch.target)]
        assert set(np.unique(observed)) <= {0.0, 1.0}


def test_endpoints_and_presets_pickle_and_stay_read_only():
    """Their read-only mappings (MappingProxyType) could not be pickled or deep-copied: no Endpoint
    to a joblib worker, no dataclasses.asdict (a review)."""
    import copy
    import dataclasses
    import pickle

    from gmnet_sklearn import PAPER_PROTOCOL
    from gmnet_sklearn.datasets.endpoints import ENDPOINTS

    esol = ENDPOINTS["esol"]
    assert pickle.loads(pickle.dumps(esol)) == esol and copy.deepcopy(esol) == esol
    assert dataclasses.asdict(esol)["paper"] == esol.paper
    assert pickle.loads(pickle.dumps(PAPER_PROTOCOL)) == PAPER_PROTOCOL == copy.deepcopy(PAPER_PROTOCOL)
    with pytest.raises(TypeError):
        PAPER_PROTOCOL["lr"] = 1.0
    # as MappingProxyType's: plain dicts out of copy() and |
    assert (PAPER_PROTOCOL | {"max_epochs": 5})["max_epochs"] == 5 and type(PAPER_PROTOCOL.copy()) is dict
    assert ({"max_epochs": 5} | PAPER_PROTOCOL)["max_epochs"] == PAPER_PROTOCOL["max_epochs"]
    with pytest.raises(TypeError):
        esol.paper["gmnet"] = (0.0, 0.0)

"""warn_missing_targets: one warning for a 1-D y with NaN, naming how many rows and which."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gmnet_sklearn.estimators._base as base_module
from gmnet_sklearn.utils.targets import MissingTargetWarning, warn_missing_targets


def _caught(y, **kwargs):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        n = warn_missing_targets(y, **kwargs)
    return n, record


def test_one_warning_with_count_and_rows():
    y = np.arange(40, dtype=float)
    y[[3, 17, 21]] = np.nan
    n, record = _caught(y)
    assert n == 3 and len(record) == 1
    w = record[0]
    assert issubclass(w.category, MissingTargetWarning) and issubclass(w.category, UserWarning)
    from gmnet_sklearn.exceptions import MissingTargetWarning as public  # the documented import

    assert public is MissingTargetWarning
    msg = str(w.message)
    assert "y has missing values (NaN) in 3 of 40 rows (rows 3, 17, 21)" in msg
    assert "masked" in msg and "multi-task" in msg and "..." not in msg
    assert w.filename == __file__  # attributed to the caller


def test_many_rows_are_cut_short_and_the_name_is_used():
    y = np.zeros(1000)
    y[::10] = np.nan  # 100 rows
    with pytest.warns(MissingTargetWarning) as record:
        assert warn_missing_targets(y, name="y_train") == 100
    assert len(record) == 1
    msg = str(record[0].message)
    assert msg.startswith("y_train has missing values (NaN) in 100 of 1000 rows (rows 0, 10, 20, 30, 40, ... (95 more))")


def test_single_row():
    n, record = _caught([1.0, float("nan"), 2.0])
    assert n == 1 and len(record) == 1
    assert "in 1 of 3 rows (row 1)" in str(record[0].message) and "drop the row " in str(record[0].message)


@pytest.mark.parametrize("y", [
    np.arange(5, dtype=float),                              # nothing missing
    np.array([[1.0, np.nan], [np.nan, 2.0]]),               # 2-D: NaN marks missing labels on purpose
    np.array(["a", "b"], dtype=object),                     # not numeric: left to the target checks
    np.array([], dtype=float),
])
def test_silent_where_nothing_to_say(y):
    n, record = _caught(y)
    assert n == 0 and record == []


def test_array_likes():
    for y in ([0.5, None, 1.5], pd.Series([0.5, np.nan, 1.5]), np.array([0.5, np.nan, 1.5], dtype=np.float32)):
        n, record = _caught(np.asarray(y, dtype=float) if isinstance(y, list) else y)
        assert n == 1 and len(record) == 1 and "(row 1)" in str(record[0].message)


def test_attributed_past_the_package_frames():
    # Called from inside gmnet_sklearn (here: a function compiled as if it were in _base.py), the
    # warning names the first frame outside the package: this test, the "user" calling fit.
    namespace = {"warn_missing_targets": warn_missing_targets}
    src = "def _fit_y(y):\n    return warn_missing_targets(y)\n"
    exec(compile(src, str(Path(base_module.__file__)), "exec"), namespace)
    with pytest.warns(MissingTargetWarning) as record:
        namespace["_fit_y"](np.array([np.nan, 1.0]))
    assert record[0].filename == __file__


def test_fit_warns_once_for_a_one_dimensional_y_with_nan():
    """The estimators call it: one warning for y (rows as the caller numbers them), one for
    y_valid, attributed to the caller; a 2-D y with NaN (missing labels) is not warned about."""
    from gmnet_sklearn import GMNetClassifier, GMNetRegressor

    from ._smiles import SMILES, class_target, regression_target

    tiny = dict(d_model=16, n_layers=1, n_heads=2, k=4, L=2, max_epochs=1, random_state=0, descriptors=False, fingerprint=False)
    y = regression_target(SMILES)
    y[[2, 30]] = np.nan
    with pytest.warns(MissingTargetWarning) as record:
        GMNetRegressor(**tiny).fit(SMILES, y)
    assert len(record) == 1 and "2 of 50 rows (rows 2, 30)" in str(record[0].message)
    assert record[0].filename == __file__
    with pytest.warns(MissingTargetWarning) as record:
        GMNetRegressor(**tiny).fit(SMILES[:40], y[:40], X_valid=SMILES[40:], y_valid=y[28:38])
    assert len(record) == 2 and "y has missing values (NaN) in 2 of 40 rows" in str(record[0].message)
    assert str(record[1].message).startswith("y_valid has missing values (NaN) in 1 of 10 rows (row 2)")
    y2 = np.c_[class_target(SMILES), 1 - class_target(SMILES)].astype(float)
    y2[::5, 0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingTargetWarning)
        GMNetClassifier(**tiny).fit(SMILES, y2)

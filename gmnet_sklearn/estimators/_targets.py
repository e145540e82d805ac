"""Checks on training targets that warn rather than fail.

A single-task regression ``y`` (1-D) with NaN is trained on with those rows masked out of the
loss and of the target statistics (``y_mean_``, ``y_scale_``), as missing labels are in a 2-D
multi-task ``y``. In 2-D that is the documented way to mark missing labels; in 1-D it is more
often a data problem (a failed merge, an empty cell), so :func:`warn_missing_targets` says so.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np

from ..exceptions import MissingTargetWarning

__all__ = ["MissingTargetWarning", "as_float_target", "check_target", "missing_labels", "warn_missing_targets"]

_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])  # .../gmnet_sklearn
_SET_OUTPUT_WRAPPER = str(Path("sklearn", "utils", "_set_output.py"))
_SHOWN_ROWS = 5


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning raised by our caller to the first frame
    outside the ``gmnet_sklearn`` package (the user's ``fit`` call, or the scikit-learn tool
    that made it)."""
    frame = sys._getframe(2)  # the function that called warn_missing_targets
    level = 2
    # (scikit-learn's set_output wrapper around transform and fit_transform is no caller either,
    # nor skorch, which calls the callbacks of the estimators' own nets)
    skorch = sys.modules.get("skorch")
    library = (_PACKAGE_DIR + os.sep,) + ((str(Path(skorch.__file__).resolve().parent) + os.sep,) if skorch else ())
    while frame is not None and (str(Path(frame.f_code.co_filename).resolve()).startswith(library)
                                 or frame.f_code.co_filename.endswith(_SET_OUTPUT_WRAPPER)):
        frame = frame.f_back
        level += 1
    return level


def warn_missing_targets(y, name: str = "y") -> int:
    """Warn, once, when a 1-D target ``y`` has missing values (NaN); return how many rows.

    The warning (:class:`MissingTargetWarning`, a ``UserWarning``) names the number of rows
    with NaN, of how many, and the first few row indices. A 2-D ``y`` is left alone: NaN there
    marks missing labels of a multi-task target on purpose. ``y`` that is not numeric is left
    to the target checks (returns 0).
    """
    y = np.asarray(y)
    if y.ndim != 1 or len(y) == 0:
        return 0
    try:
        missing = np.isnan(y.astype(np.float64))
    except (TypeError, ValueError):
        return 0
    rows = np.flatnonzero(missing)
    if rows.size == 0:
        return 0
    shown = ", ".join(str(int(r)) for r in rows[:_SHOWN_ROWS])
    more = f", ... ({rows.size - _SHOWN_ROWS} more)" if rows.size > _SHOWN_ROWS else ""
    rows_word = "row" if rows.size == 1 else "rows"
    warnings.warn(
        f"{name} has missing values (NaN) in {rows.size} of {len(y)} rows ({rows_word} {shown}{more}). "
        "A single-task target is trained with such rows masked out of the loss and the target "
        f"statistics; drop the {rows_word} to silence this warning, or pass a 2-D y (n, n_tasks), "
        "where NaN marks missing labels.",
        MissingTargetWarning,
        stacklevel=_caller_stacklevel(),
    )
    return int(rows.size)


def check_target(y, name: str = "y") -> np.ndarray:
    """``y`` as a 1-D or 2-D array (a pandas object's values), or a clear error."""
    if y is None:  # scikit-learn's wording (check_requires_y_none)
        raise ValueError(f"the estimator requires {name} to be passed, but the target {name} is None")
    if hasattr(y, "to_numpy"):
        y = _pandas_values(y)
    y = np.asarray(y)
    if y.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D or 2-D, got shape {y.shape}")
    if y.ndim == 2 and y.shape[1] == 0:  # scikit-learn's wording (check_array's ensure_min_features)
        raise ValueError(f"Found array with 0 target column(s) (shape={y.shape}) while a minimum of 1 is required "
                         f"({name})")
    if y.dtype.kind == "c":  # astype(float) would keep the real part only (scikit-learn's wording)
        raise ValueError(f"Complex data not supported: {name} is complex")
    return y  # its length is checked against X's by check_consistent_length


def as_float_target(y: np.ndarray, name: str, rule: str) -> np.ndarray:
    """``y`` as float64; values that are not numbers raise a ``ValueError`` that states ``rule``
    and names their rows (the first five), as numpy's "could not convert string" does not."""
    try:
        return y.astype(np.float64)
    except (TypeError, ValueError):
        bad = []
        for row, value in enumerate(y.reshape(len(y), -1)):
            for v in value:
                try:
                    float(v)
                except (TypeError, ValueError):
                    bad.append(f"[{row}] {(v.item() if isinstance(v, np.generic) else v)!r}"[:60])
                    break
            if len(bad) == 5:
                break
        raise ValueError(f"{name}: {rule}; not a number at rows {', '.join(bad)}") from None


def check_n_outputs(y: np.ndarray, n_fitted: int) -> None:
    """``score``'s ``y`` has the target columns the model was fitted on (a 1-D y is one)."""
    n = 1 if y.ndim == 1 else y.shape[1]
    if n != n_fitted:
        raise ValueError(f"y has {n} target column(s); the model was fitted on {n_fitted}")


def missing_labels(labels) -> np.ndarray:
    """Which labels are missing (None or NaN; the labels may be objects), as a bool array."""
    # np.floating too: a float32 array's items are np.float32, which is no Python float
    return np.array([v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)) for v in labels], dtype=bool)


def _pandas_values(y) -> np.ndarray:
    """A pandas object's values with its missing labels (``pd.NA`` of the nullable dtypes, None)
    as NaN, numeric where every observed label is a number (an ``Int64`` column with NA)."""
    import numbers

    import pandas as pd

    values = y.to_numpy()
    if values.dtype != object:
        return values
    missing = pd.isna(values)
    if not missing.any():
        return values
    values = values.copy()
    values[missing] = np.nan
    if all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in values[~missing]):
        values = values.astype(np.float64)
    return values

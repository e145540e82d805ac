"""Checks on targets (labels), shared by the estimators, the forest and the scorers; importing
this module imports neither torch nor RDKit.

A single-task regression ``y`` (1-D, or one column) with NaN is trained on with those rows masked
out of the loss and of the target statistics (``y_mean_``, ``y_scale_``), as missing labels are
in a multi-task ``y``. In several columns that is the documented way to mark missing labels; in
one it is more often a data problem (a failed merge, an empty cell), so
:func:`warn_missing_targets` says so.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..exceptions import InvalidSmilesWarning, MissingTargetWarning
from .messages import shown_rows
from .stacklevel import _caller_stacklevel
from .validation import missing_as_nan

__all__ = ["MissingTargetWarning", "as_float_target", "check_multilabel", "check_score_weight", "check_target",
           "missing_labels", "warn_missing_targets", "warn_unscored_rows"]

def warn_missing_targets(y, name: str = "y") -> int:
    """Warn, once, when a single-task target ``y`` has missing values (NaN); return how many rows.

    The warning (:class:`MissingTargetWarning`, a ``UserWarning``) names the number of rows
    with NaN, of how many, and the first few row indices (a one-column 2-D ``y`` is one task too).
    A ``y`` of two or more columns is left alone: NaN there marks missing labels of a multi-task
    target on purpose. ``y`` that is not numeric is left to the target checks (returns 0).
    """
    y = np.asarray(y)
    # one column is one task too (``df[["logS"]]``): only two or more columns mark missing labels on purpose
    if not (y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1)) or len(y) == 0:
        return 0
    try:
        missing = np.isnan(y.astype(np.float64)).reshape(len(y))
    except (TypeError, ValueError):
        return 0
    rows = np.flatnonzero(missing)
    if rows.size == 0:
        return 0
    shown = shown_rows(rows)
    rows_word = "row" if rows.size == 1 else "rows"
    warnings.warn(
        f"{name} has missing values (NaN) in {rows.size} of {len(y)} rows ({rows_word} {shown}). "
        "A single-task target is trained with such rows masked out of the loss and the target "
        f"statistics; drop the {rows_word} to silence this warning (in a multi-task y, two or more "
        "columns, NaN marks missing labels without a warning).",
        MissingTargetWarning,
        stacklevel=_caller_stacklevel(),
    )
    return int(rows.size)


def check_target(y, name: str = "y") -> np.ndarray:
    """``y`` as a 1-D or 2-D array (a pandas object's values), or a clear error."""
    if y is None:  # scikit-learn's wording (check_requires_y_none)
        raise ValueError(f"the estimator requires {name} to be passed, but the target {name} is None")
    # pandas' values, and pd.NA in any object array (``df[tasks].to_numpy()`` of nullable columns)
    y = missing_as_nan(y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y))
    if y.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D or 2-D, got shape {y.shape}")
    if y.ndim == 2 and y.shape[1] == 0:  # scikit-learn's wording (check_array's ensure_min_features)
        raise ValueError(f"Found array with 0 target column(s) (shape={y.shape}) while a minimum of 1 is required "
                         f"({name})")
    if y.dtype.kind == "c":  # astype(float) would keep the real part only (scikit-learn's wording)
        raise ValueError(f"Complex data not supported: {name} is complex")
    return y  # its length is checked against X's by check_consistent_length


def check_score_weight(sample_weight) -> np.ndarray | None:
    """``score``'s ``sample_weight`` as finite float64 numbers, one a row (its length is checked
    beside the rows'), or an error that names it (numpy's "could not convert" does not)."""
    if sample_weight is None:
        return None
    from sklearn.utils import check_array

    try:
        weight = check_array(sample_weight, ensure_2d=False, dtype=np.float64, input_name="sample_weight")
    except ValueError as exc:
        if "sample_weight" in str(exc):
            raise
        raise ValueError(f"sample_weight must hold numbers: {exc}") from exc
    if weight.ndim != 1:
        raise ValueError(f"sample_weight must be 1-D, one weight per row; got shape {weight.shape}")
    return weight


def warn_unscored_rows(unscored: np.ndarray, who: str = "score") -> None:
    """``score`` (and the masked scorers, ``who``) leave out the rows whose prediction is NaN
    (invalid SMILES under ``on_invalid="nan"``/``"skip"``), as they leave out missing labels; one
    warning names them."""
    rows = np.flatnonzero(unscored)
    if rows.size == 0:
        return
    warnings.warn(f"{who}: left out {rows.size} of {len(unscored)} rows of X whose SMILES cannot be used "
                  f"(NaN predictions): rows {shown_rows(rows)}", InvalidSmilesWarning, stacklevel=_caller_stacklevel())


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


def check_multilabel(y: np.ndarray, name: str = "y") -> np.ndarray:
    """A multi-label ``y`` as float64 (n, n_tasks): 0, 1 or NaN (a missing label), or a
    ``ValueError`` naming the rows with other values (-1 or 2 for a missing label, a class name)."""
    y = as_float_target(y, name, "multi-label targets must be 0, 1 or NaN (a missing label)")
    y = y.reshape(len(y), -1)
    bad = ~np.isnan(y) & (y != 0) & (y != 1)
    if bad.any():
        rows = np.flatnonzero(bad.any(1))
        raise ValueError(f"{name}: multi-label targets must be 0, 1 or NaN (a missing label); other values at rows "
                         f"{rows[:10].tolist()}{' ...' if len(rows) > 10 else ''}")
    return y


def check_n_outputs(y: np.ndarray, n_fitted: int) -> None:
    """``score``'s ``y`` has the target columns the model was fitted on (a 1-D y is one)."""
    n = 1 if y.ndim == 1 else y.shape[1]
    if n != n_fitted:
        raise ValueError(f"y has {n} target column(s); the model was fitted on {n_fitted}")


def missing_labels(labels) -> np.ndarray:
    """Which labels are missing (None or NaN; the labels may be objects), as a bool array."""
    # np.floating too: a float32 array's items are np.float32, which is no Python float
    return np.array([v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)) for v in labels], dtype=bool)

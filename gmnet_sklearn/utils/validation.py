"""The one coercion of SMILES input, used by the estimators, the tokenizer and the splitters.

It depends on nothing else in the package, so every layer can import it (the estimators
re-export it as ``gmnet_sklearn.estimators._base.check_smiles_input``).
"""

from __future__ import annotations

import numpy as np


def check_smiles_input(X, name: str = "X", *, smiles_column: str = "smiles", ensure_min_samples: int = 1,
                       warn_unread_columns: bool = True) -> list:
    """A list of items (one per molecule) from a list, tuple, iterable, 1-D array, pandas Series,
    a one-column 2-D array or DataFrame, or a DataFrame with a ``smiles_column`` column
    (matched case-insensitively). The items are not checked here: the tokenizer names every
    item that is not a usable SMILES, with its position.

    A DataFrame's other columns are not read: a ``UserWarning`` names them (unless
    ``warn_unread_columns=False``: the splitters, which read the SMILES of a frame whose other
    columns are the model's features), since a model, or a transformer given two SMILES
    columns in a ``ColumnTransformer``, would otherwise leave them out without a word.

    Raises TypeError for a single string (it would be read character by character), a set or
    mapping (no row order to match labels) or a non-iterable, ValueError for other shapes or fewer than ``ensure_min_samples`` items.
    """
    if isinstance(X, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of SMILES strings, got a single string; wrap it in a list")
    if isinstance(X, (set, frozenset, dict)) or (hasattr(X, "keys") and not hasattr(X, "iloc")):
        # no order (a set) or keys rather than molecules (a mapping): rows would not line up with y
        raise TypeError(f"{name} must be an ordered sequence of SMILES strings (a list, array or pandas Series), "
                        f"got a {type(X).__name__}")
    if hasattr(X, "columns") and hasattr(X, "iloc"):  # a pandas DataFrame
        exact = [i for i, c in enumerate(X.columns) if c == smiles_column]
        alike = [i for i, c in enumerate(X.columns) if str(c).lower() == str(smiles_column).lower()]
        chosen = exact if exact else alike
        if len(chosen) > 1:  # which one holds the molecules is not ours to guess
            raise ValueError(f"{name}: DataFrame has {len(chosen)} columns named like {smiles_column!r}: "
                             f"{[X.columns[i] for i in chosen]}; keep one")
        if chosen:
            if warn_unread_columns and X.shape[1] > 1:
                import warnings

                from .stacklevel import _caller_stacklevel

                others = [c for i, c in enumerate(X.columns) if i != chosen[0]]
                warnings.warn(f"{name}: the DataFrame's column(s) {others[:10]}{' ...' if len(others) > 10 else ''} "
                              f"are not read, only its SMILES column {X.columns[chosen[0]]!r} (select that "
                              f"column yourself to silence this: {name}[{X.columns[chosen[0]]!r}], or one column "
                              "per transformer in a ColumnTransformer)", UserWarning,
                              stacklevel=_caller_stacklevel())
            X = X.iloc[:, chosen[0]]
        elif X.shape[1] == 1:
            X = X.iloc[:, 0]
        else:
            raise ValueError(f"{name}: DataFrame input needs a {smiles_column!r} column (or exactly one column); "
                             f"got columns {list(X.columns)[:10]}")
    if hasattr(X, "to_numpy"):  # pandas Series
        X = X.to_numpy(dtype=object)
    if not isinstance(X, np.ndarray):
        try:
            X = list(X)
        except TypeError:
            raise TypeError(f"{name} must be a sequence of SMILES strings, got {type(X).__name__}") from None
        # Nested sequences (a list of one-item rows) become 2-D here and are handled below.
        if any(isinstance(item, (list, tuple, np.ndarray)) for item in X):
            X = np.asarray(X, dtype=object)
    if isinstance(X, np.ndarray):
        if X.ndim == 2 and X.shape[1] == 1:
            X = X[:, 0]
        elif X.ndim != 1:
            raise ValueError(f"{name} must be 1-D (one SMILES per row), got an array of shape {X.shape}")
        X = X.tolist()
    if len(X) < ensure_min_samples:
        need = "one" if ensure_min_samples == 1 else ensure_min_samples
        raise ValueError(f"{name} is empty: need at least {need} SMILES" if not X else
                         f"{name} has {len(X)} SMILES, need at least {ensure_min_samples}")
    return X


_SMILES_PARAMS = None  # built on first use, so importing this module does not import RDKit


def mol_from_smiles(smiles):
    """RDKit's molecule for ``smiles``, or None where there is none: not a string, blank (RDKit
    reads "" as a molecule without atoms, which would pass as a valid row of zeros), or rejected
    by RDKit. Whitespace inside it is rejected too: RDKit's default reads what follows as the
    molecule's name or CXSMILES extensions, so ``"CC O"`` would be ethane (the tokenizer rejects
    it as well). Callers block RDKit's log and report the None rows."""
    global _SMILES_PARAMS
    from rdkit import Chem

    if not isinstance(smiles, str) or not smiles.strip():
        return None
    if _SMILES_PARAMS is None:
        params = Chem.SmilesParserParams()
        params.parseName, params.allowCXSMILES = False, False
        _SMILES_PARAMS = params
    return Chem.MolFromSmiles(smiles.strip(), _SMILES_PARAMS)


def check_smiles_items(X: list, name: str = "X") -> None:
    """A ``TypeError`` naming the first rows whose item is neither a string nor a missing value
    (None, NaN, ``pd.NA``): the featurisers would read an RDKit ``Mol`` or a number as a SMILES
    RDKit cannot parse (all-zero or NaN rows under their ``on_invalid``), while the estimators
    refuse it as no string. Missing values stay the caller's unparsable rows."""
    bad = [i for i, s in enumerate(X) if not isinstance(s, str) and not is_missing(s)]
    if bad:
        from .messages import shown_rows

        shown = shown_rows(bad, lambda i: f"({type(X[i]).__name__})")
        raise TypeError(f"{name} must hold SMILES strings; {len(bad)} item(s) are not strings, at rows {shown} "
                        "(an RDKit Mol: Chem.MolToSmiles(mol) gives its SMILES)")


def is_missing(value) -> bool:
    """pandas' missing value (None, NaN, ``pd.NA`` in a "string" column, ``NaT``), which is no molecule."""
    import pandas as pd

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # an array-like: no single missing value
        return False


def missing_as_nan(values: np.ndarray) -> np.ndarray:
    """Labels with the missing ones (``pd.NA`` of pandas' nullable dtypes, None) as NaN, numeric
    where every observed label is a number (an ``Int64`` column with NA)."""
    import numbers

    import pandas as pd

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

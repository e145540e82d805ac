"""RDKit 2D descriptors as a scikit-learn transformer: SMILES -> scaled descriptor matrix.

The estimators' ``descriptors=True`` fuses these into the model's head (`estimators.fusion`);
the transformer also works on its own in a ``Pipeline``. Every descriptor in RDKit's
``Descriptors._descList`` (217 in RDKit 2026.09) is computed once per distinct SMILES (in worker
processes with ``n_jobs``; the estimators use as many as torch has threads); the
scaling (a quantile map to a standard normal, which tames heavy tails such as ``Ipc``) is fitted on
the training SMILES only, and a descriptor that is missing or not finite for a molecule becomes 0,
the training median after the map. With ``memory`` (scikit-learn's meaning: a folder or a
``joblib.Memory``) the raw descriptors of a list of SMILES are cached on disk, so the candidates of
a ``GridSearchCV``, which fit the same folds, compute each fold's descriptors once.
"""

from __future__ import annotations

import os
import threading

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.preprocessing import QuantileTransformer
from sklearn.preprocessing import _data as sklearn_data  # (its BOUNDS_THRESHOLD, the map's clip)
from sklearn.utils.validation import check_is_fitted

from .utils.messages import short_repr, shown_rows

__all__ = ["RDKitDescriptors", "cached_descriptors", "compute_descriptors", "descriptor_names", "PARALLEL_MIN_SMILES"]


def descriptor_names() -> list[str]:
    from rdkit.Chem import Descriptors

    return [name for name, _ in Descriptors._descList]


def _check_descriptor_names(names, source: str, rdkit_version: str | None = None) -> None:
    """A scaling fitted on ``names`` applies to this RDKit's descriptors only if it lists the same."""
    here = descriptor_names()
    if list(names) != here:
        import rdkit

        differ = next((f"column {i}: {a!r} there, {b!r} here" for i, (a, b) in enumerate(zip(names, here))
                       if a != b), f"{len(names)} descriptors there, {len(here)} here")
        raise ValueError(f"{source} was fitted on the descriptors of RDKit {rdkit_version or '(unknown)'}, "
                         f"which RDKit {rdkit.__version__} lists otherwise ({differ}): use it with that RDKit")


#: RDKit's four EState-index descriptors each recompute the EState indices unless told they may
#: reuse the ones cached on the molecule (``force=0``); MolLogP and MolMR are the two halves of one
#: Crippen computation. Sharing both gives the same values bit for bit with less work.
_ESTATE_INDEX_DESCRIPTORS = ("MaxAbsEStateIndex", "MaxEStateIndex", "MinAbsEStateIndex", "MinEStateIndex")
_CRIPPEN_DESCRIPTORS = {"MolLogP": 0, "MolMR": 1}

#: Below this many distinct SMILES the descriptors are computed in this process: starting a worker
#: pool (each worker imports RDKit) costs more than it saves.
PARALLEL_MIN_SMILES = 512
_PARALLEL_LOCK = threading.Lock()  # joblib's process-wide worker pool, asked by one call at a time


def _new_parallel_lock():  # a forked child's copy may be held by a thread the child does not have
    global _PARALLEL_LOCK
    _PARALLEL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_parallel_lock)


def _descriptor_functions() -> list:
    """``(crippen index or None, function)`` per descriptor, in ``Descriptors._descList`` order."""
    import functools

    from rdkit.Chem import Descriptors

    funcs = []
    for name, f in Descriptors._descList:
        if name in _ESTATE_INDEX_DESCRIPTORS:
            f = functools.partial(f, force=0)
        funcs.append((_CRIPPEN_DESCRIPTORS.get(name), f))
    return funcs


def _descriptor_rows(smiles: list) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, parsed)`` for distinct SMILES: raw descriptors (NaN where one fails or is not
    finite; a NaN row where RDKit rejects the SMILES) and whether each parsed. A module-level
    function so joblib's workers can run it on a chunk."""
    from rdkit import rdBase
    from rdkit.Chem import rdMolDescriptors

    from .utils import mol_from_smiles

    funcs = _descriptor_functions()
    rows = np.full((len(smiles), len(funcs)), np.nan)
    parsed = np.zeros(len(smiles), dtype=bool)
    # RDKit's C++ log is blocked (the caller reports parse errors by row) and restored afterwards.
    with rdBase.BlockLogs():
        for i, s in enumerate(smiles):
            mol = mol_from_smiles(s)
            if mol is None:
                continue
            parsed[i] = True
            crippen = None
            row = rows[i]
            for j, (crippen_index, f) in enumerate(funcs):
                try:
                    if crippen_index is None:
                        row[j] = float(f(mol))
                    else:
                        if crippen is None:
                            crippen = rdMolDescriptors.CalcCrippenDescriptors(mol)
                        row[j] = float(crippen[crippen_index])
                except Exception:  # RDKit raises for a few descriptors on odd molecules
                    row[j] = np.nan
            row[~np.isfinite(row)] = np.nan
    return rows, parsed


def compute_descriptors(smiles, on_invalid: str = "raise", n_jobs=None) -> np.ndarray:
    """Raw RDKit 2D descriptors, (n, n_descriptors) float64; NaN where one fails or is not finite.

    Each distinct SMILES is computed once; with ``n_jobs`` (joblib's meaning: None is 1, -1 all
    cores) and at least ``PARALLEL_MIN_SMILES`` distinct SMILES, in up to that many worker
    processes, one per ``PARALLEL_MIN_SMILES / 2`` distinct SMILES (RDKit's descriptors are mostly
    Python, so threads would not run at once). ``on_invalid="nan"``
    gives a NaN row for a SMILES RDKit rejects; "raise" names the rows.
    """
    from joblib import Parallel, delayed, effective_n_jobs

    if on_invalid not in ("raise", "nan"):
        raise ValueError(f"on_invalid must be 'raise' or 'nan', got {on_invalid!r}")
    smiles = list(smiles)
    position: dict[str, int] = {}
    for s in smiles:
        if isinstance(s, str) and s not in position:
            position[s] = len(position)
    distinct = list(position)
    # at least half of PARALLEL_MIN_SMILES per worker: below PARALLEL_MIN_SMILES, none
    n_workers = min(effective_n_jobs(n_jobs), len(distinct) // (PARALLEL_MIN_SMILES // 2))
    if n_workers > 1:
        # a few chunks per worker, so one slow chunk does not hold the others up; one call at a time
        # in this process: joblib's worker pool is one per process, and two threads asking it for
        # other sizes at once deadlock in its resize (a review's two threads predicting)
        chunks = [list(c) for c in np.array_split(np.asarray(distinct, dtype=object), 4 * n_workers)]
        with _PARALLEL_LOCK:
            parts = Parallel(n_jobs=n_workers)(delayed(_descriptor_rows)(c) for c in chunks)
        rows, parsed = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    else:
        rows, parsed = _descriptor_rows(distinct)
    out = np.full((len(smiles), rows.shape[1]), np.nan)
    invalid = []
    for i, s in enumerate(smiles):
        j = position.get(s) if isinstance(s, str) else None
        if j is None or not parsed[j]:
            invalid.append(i)
        else:
            out[i] = rows[j]
    if invalid and on_invalid == "raise":
        shown = shown_rows(invalid, lambda i: f"({short_repr(smiles[i])})")
        raise ValueError(f"RDKit cannot parse {len(invalid)} SMILES, e.g. at rows {shown} "
                         "(on_invalid='nan' gives them NaN rows)")
    return out


#: Bumped whenever this module computes the rows otherwise (NaN handling, shared computations):
#: joblib's key hashes `_descriptors_keyed`'s own source, not the functions it calls.
_ROWS_VERSION = 1


def _descriptors_keyed(smiles: list, on_invalid: str, descriptor_set: tuple, n_jobs=None) -> np.ndarray:
    """``compute_descriptors`` with what its values depend on beyond the SMILES in the arguments,
    so joblib's cache key holds it: a cache filled under another RDKit or another descriptor
    list is never read back as this one's."""
    return compute_descriptors(smiles, on_invalid, n_jobs=n_jobs)


def cached_descriptors(memory, smiles, on_invalid: str = "raise", n_jobs=None) -> np.ndarray:
    """``compute_descriptors(smiles, on_invalid, n_jobs)`` through ``memory`` (None: no cache; a
    folder (str or path) or a ``joblib.Memory``, ``sklearn.utils.validation.check_memory``'s meaning). The key is
    the list of SMILES, ``on_invalid``, RDKit's version, the descriptor names and `_ROWS_VERSION` (the values are
    RDKit's own, bit for bit: tests/test_descriptors.py); not ``n_jobs``, which they do not depend on."""

    from sklearn.utils.validation import check_memory

    memory = check_memory(os.fspath(memory) if isinstance(memory, os.PathLike) else memory)  # it takes str only
    if memory.location is None:  # no cache: not even the hashing of the SMILES
        return compute_descriptors(smiles, on_invalid, n_jobs=n_jobs)
    import rdkit

    descriptor_set = (rdkit.__version__, tuple(descriptor_names()), _ROWS_VERSION)
    return memory.cache(_descriptors_keyed, ignore=["n_jobs"])(list(smiles), on_invalid, descriptor_set, n_jobs=n_jobs)


def _warn_invalid_rows(smiles: list, raw: np.ndarray) -> None:
    """Names the rows ``on_invalid="nan"`` gave NaN throughout (RDKit rejects the SMILES; a
    molecule has some descriptor): they come out of the scaling as 0, like any other row."""
    import warnings

    from .utils.stacklevel import _caller_stacklevel
    from .exceptions import InvalidSmilesWarning

    bad = np.flatnonzero(np.isnan(raw).all(axis=1)) if raw.size else np.empty(0, dtype=np.int64)
    if bad.size:
        shown = shown_rows(bad, lambda i: f"({short_repr(smiles[i])})")
        warnings.warn(f"RDKitDescriptors(on_invalid='nan'): {bad.size} of {len(smiles)} SMILES RDKit cannot parse "
                      f"get NaN descriptors (0 once scaled): rows {shown}", InvalidSmilesWarning,
                      stacklevel=_caller_stacklevel())


def _quantile_normal_transform(qt: QuantileTransformer, X: np.ndarray) -> np.ndarray:
    """``qt.transform(X)`` of a fitted ``QuantileTransformer(output_distribution="normal")`` for
    float64 rows of finite values or NaN (the raw descriptors: no other input is checked here), the
    same values, with scipy's normal quantile function called once on the whole matrix:
    scikit-learn calls it three times per column, and scipy's per-call overhead made that a fixed
    cost of every predict larger than the network's on a few molecules. The reference stays
    scikit-learn's (tests/test_descriptors.py compares the two on ties, bounds and NaN)."""
    from scipy import stats

    bounds = getattr(sklearn_data, "BOUNDS_THRESHOLD", 1e-7)
    X = np.array(X, dtype=np.float64)  # (a copy, as QuantileTransformer's)
    quantiles, references = qt.quantiles_, qt.references_
    if X.ndim != 2 or X.shape[1] != quantiles.shape[1]:
        raise ValueError(f"X has shape {X.shape}; the map has {quantiles.shape[1]} columns")
    with np.errstate(invalid="ignore"):  # NaN compares False, as in scikit-learn
        for j in range(X.shape[1]):  # scikit-learn's _transform_col, forward, "normal"
            col, q = X[:, j], quantiles[:, j]
            lower, upper = col - bounds < q[0], col + bounds > q[-1]
            finite = ~np.isnan(col)
            values = col[finite]
            col[finite] = 0.5 * (np.interp(values, q, references) - np.interp(-values, -q[::-1], -references[::-1]))
            col[upper], col[lower] = 1, 0
        z = stats.norm.ppf(X)
        return np.clip(z, stats.norm.ppf(bounds - np.spacing(1)), stats.norm.ppf(1 - (bounds - np.spacing(1))))


class RDKitDescriptors(TransformerMixin, BaseEstimator):
    """SMILES -> RDKit 2D descriptors, quantile-mapped to N(0, 1) on the training data.

    Parameters
    ----------
    n_quantiles : int, default=1000
        Quantiles of the map (capped at the number of training molecules).
    on_invalid : {"raise", "nan"}, default="raise"
        "raise": an error naming the SMILES RDKit rejects. "nan": their rows come out 0 (the
        training median, as a descriptor RDKit cannot compute for a molecule does), with an
        :class:`~gmnet_sklearn.exceptions.InvalidSmilesWarning` naming them.
    n_jobs : int, default=None
        Worker processes for the descriptors (joblib's meaning; None: one) when there are many
        distinct SMILES; the values do not depend on it.
    memory : str, path-like or joblib.Memory, default=None
        Where the raw descriptors of each list of SMILES given to ``fit`` or ``transform`` are
        cached (``cached_descriptors``); None caches nothing.

    Attributes
    ----------
    kept_ : ndarray of bool
        Which of RDKit's descriptors vary on the training data (the others are dropped).
    names_ : ndarray of str
        RDKit's descriptor names at fit, in order (``get_feature_names_out`` gives the kept ones).
    quantiles_ : QuantileTransformer
        The map of the kept descriptors to N(0, 1), fitted on the training data.
    rdkit_version_ : str
        The RDKit that computed them (another version may list other descriptors).
    n_features_out_ : int
        Number of kept descriptors. (``feature_names_in_`` is not set: the input is SMILES.)
    """

    def __init__(self, n_quantiles: int = 1000, on_invalid: str = "raise", n_jobs=None, memory=None):
        self.n_quantiles = n_quantiles
        self.on_invalid = on_invalid
        self.n_jobs = n_jobs
        self.memory = memory

    def _check_params(self):
        # here and in transform: set_params may change them on a fitted transformer
        if self.on_invalid not in ("raise", "nan"):
            raise ValueError(f"on_invalid must be 'raise' or 'nan', got {self.on_invalid!r}")
        if isinstance(self.n_quantiles, bool) or not isinstance(self.n_quantiles, (int, np.integer)) or self.n_quantiles < 2:
            raise ValueError(f"n_quantiles must be an integer >= 2, got {self.n_quantiles!r}")
        if self.n_jobs is not None and (isinstance(self.n_jobs, bool) or not isinstance(self.n_jobs, (int, np.integer))
                                        or self.n_jobs == 0):  # (joblib's own errors named no parameter)
            raise ValueError(f"n_jobs must be None or a nonzero integer (-1: every core), got {self.n_jobs!r}")

    def fit(self, X, y=None):
        return self._fit_raw(self._raw(X))

    def fit_transform(self, X, y=None, **fit_params):
        # the descriptors once (TransformerMixin's would compute them for fit, then for transform)
        raw = self._raw(X)
        return self._fit_raw(raw)._transform_raw(raw)

    def _raw(self, X) -> np.ndarray:
        from .utils.validation import check_smiles_input, check_smiles_items

        self._check_params()
        X = check_smiles_input(X)
        check_smiles_items(X)
        raw = cached_descriptors(self.memory, X, self.on_invalid, n_jobs=self.n_jobs)
        _warn_invalid_rows(X, raw)
        return raw

    def _fit_raw(self, raw: np.ndarray):
        observed = ~np.isnan(raw)
        if not observed.any():  # (on_invalid="nan": RDKit parsed none of them)
            raise ValueError(f"RDKit could parse none of the {len(raw)} training SMILES: there are no descriptors "
                             "to fit the scaling on")
        # the spread of the columns with a value only (numpy warns on all-NaN columns)
        has_value = observed.any(0)
        spread = np.zeros(raw.shape[1])
        with np.errstate(invalid="ignore"):  # inf - inf
            spread[has_value] = np.nanmax(raw[:, has_value], axis=0) - np.nanmin(raw[:, has_value], axis=0)
        self.kept_ = has_value & (np.nan_to_num(spread) > 0)
        if not self.kept_.any():  # one molecule, or copies of one: nothing to scale (or learn from)
            raise ValueError(f"no RDKit descriptor varies across the {len(raw)} training SMILES: the descriptors "
                             "need at least two different molecules")
        import rdkit

        self.names_ = np.asarray(descriptor_names(), dtype=object)
        self.rdkit_version_ = rdkit.__version__  # named should another RDKit list other descriptors
        self.quantiles_ = QuantileTransformer(n_quantiles=max(2, min(self.n_quantiles, len(raw))),
                                              output_distribution="normal", subsample=None).fit(raw[:, self.kept_])
        self.n_features_out_ = int(self.kept_.sum())
        return self

    def _restore(self, kept: np.ndarray, quantiles: np.ndarray, references: np.ndarray,
                 names: list | None = None, rdkit_version: str | None = None, source: str = "the saved scaling"):
        """A fitted transformer from saved arrays (the estimators' pickle-free format). ``names``:
        the descriptors it was fitted on, which must be this RDKit's (None: not recorded)."""
        here = descriptor_names()
        if names is not None:
            _check_descriptor_names(names, source, rdkit_version)
        self.kept_ = np.asarray(kept, dtype=bool)
        self.names_ = np.asarray(here, dtype=object)
        self.rdkit_version_ = rdkit_version
        qt = QuantileTransformer(n_quantiles=len(references), output_distribution="normal", subsample=None)
        qt.quantiles_, qt.references_ = np.asarray(quantiles), np.asarray(references)
        qt.n_quantiles_, qt.n_features_in_ = len(references), int(self.kept_.sum())
        self.quantiles_, self.n_features_out_ = qt, int(self.kept_.sum())
        return self

    def transform(self, X) -> np.ndarray:
        check_is_fitted(self, "quantiles_")
        return self._transform_raw(self._raw(X))

    def _transform_raw(self, raw: np.ndarray) -> np.ndarray:
        # a pickle (joblib) carries no RDKit: one that lists its descriptors otherwise would index
        # the wrong columns, or fail on their number
        if getattr(self, "names_", None) is not None:  # (recorded by every fit and load since they existed)
            _check_descriptor_names(self.names_, f"this {type(self).__name__}", getattr(self, "rdkit_version_", None))
        z = _quantile_normal_transform(self.quantiles_, raw[:, self.kept_])
        return np.nan_to_num(z, nan=0.0).astype(np.float32)

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "kept_")
        return self.names_[self.kept_]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.requires_fit = True
        return tags

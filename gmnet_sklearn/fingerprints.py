"""RDKit Morgan (ECFP) fingerprints as a scikit-learn transformer: the usual baseline's features.

    make_pipeline(MorganFingerprint(), RandomForestRegressor(500))   # "RF on ECFP4"

Radius 2 with 2048 bits is ECFP4 as chemists use it; bits come from RDKit's
``rdFingerprintGenerator`` (no state is fitted: ``fit`` only checks the input).
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

__all__ = ["MorganFingerprint"]


class MorganFingerprint(TransformerMixin, BaseEstimator):
    """SMILES -> (n, n_bits) uint8 Morgan fingerprint bits (``counts=True``: uint16 counts).

    Parameters
    ----------
    radius : int, default=2
        Morgan radius (2: ECFP4).
    n_bits : int, default=2048
        Fingerprint length.
    counts : bool, default=False
        Counts of each folded environment (uint16) instead of bits.
    on_invalid : {"raise", "zeros"}, default="raise"
        "raise" names the SMILES RDKit rejects; "zeros" gives them all-zero rows, with an
        :class:`~gmnet_sklearn.exceptions.InvalidSmilesWarning` naming them.

    Attributes
    ----------
    n_features_out_ : int
        ``n_bits`` (set by ``fit``, which fits no other state).
    """

    def __init__(self, radius: int = 2, n_bits: int = 2048, counts: bool = False, on_invalid: str = "raise"):
        self.radius = radius
        self.n_bits = n_bits
        self.counts = counts
        self.on_invalid = on_invalid

    def fit(self, X, y=None):
        from .utils.validation import check_smiles_input

        check_smiles_input(X)
        self._check_on_invalid()
        self.n_features_out_ = int(self.n_bits)
        return self

    def fit_transform(self, X, y=None, **fit_params):
        from .utils.validation import check_smiles_input

        # X read once: fit would exhaust a generator before TransformerMixin's transform read it
        X = check_smiles_input(X)
        # the unwrapped _transform: set_output's wrapper around transform would give the list read
        # here a fresh index, which the wrapper around fit_transform then keeps (a review: a
        # FeatureUnion's pandas output doubled its rows)
        return self.fit(X, y, **fit_params)._transform(X)

    def _check_on_invalid(self):
        # here and in transform: with no state to fit, transform may run without fit
        if self.on_invalid not in ("raise", "zeros"):
            raise ValueError(f"on_invalid must be 'raise' or 'zeros', got {self.on_invalid!r}")
        for name, low in (("radius", 0), ("n_bits", 1)):  # RDKit would truncate a float or overflow
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not isinstance(self.counts, (bool, np.bool_)):
            raise ValueError(f"counts must be True or False, got {self.counts!r}")

    def transform(self, X) -> np.ndarray:
        return self._transform(X)

    def _transform(self, X) -> np.ndarray:
        import warnings

        from .utils.stacklevel import _caller_stacklevel
        from .utils.validation import check_smiles_input, check_smiles_items
        from .exceptions import InvalidSmilesWarning
        from .utils.messages import short_repr, shown_rows

        X = check_smiles_input(X)
        check_smiles_items(X)
        self._check_on_invalid()
        out, bad = self._fingerprints(X)
        if bad:
            shown = shown_rows(bad, lambda i: f"({short_repr(X[i])})")
            if self.on_invalid == "raise":
                raise ValueError(f"RDKit cannot parse {len(bad)} SMILES, e.g. at rows {shown} "
                                 "(on_invalid='zeros' gives them all-zero rows)")
            warnings.warn(f"MorganFingerprint(on_invalid='zeros'): {len(bad)} of {len(X)} SMILES RDKit cannot "
                          f"parse get all-zero rows: rows {shown}", InvalidSmilesWarning,
                          stacklevel=_caller_stacklevel())
        return out

    def _fingerprints(self, X: list) -> tuple[np.ndarray, list]:
        """``(rows, bad)``: the fingerprints, all-zero where RDKit rejects the SMILES, and those
        positions. The estimators read this directly: they name such rows themselves."""
        from rdkit import rdBase
        from rdkit.Chem import rdFingerprintGenerator

        from .utils import mol_from_smiles

        gen = rdFingerprintGenerator.GetMorganGenerator(radius=int(self.radius), fpSize=int(self.n_bits))
        out = np.zeros((len(X), int(self.n_bits)), dtype=np.uint8 if not self.counts else np.uint16)
        bad = []
        # RDKit's log is blocked (failures are reported below, by row), then restored as it was.
        with rdBase.BlockLogs():
            for i, s in enumerate(X):
                mol = mol_from_smiles(s)
                if mol is None:
                    bad.append(i)
                    continue
                # counts held as uint16: one past 65,535 (a polymer's bit) stays 65,535, not wrapped to a small count
                out[i] = (np.minimum(gen.GetCountFingerprintAsNumPy(mol), np.iinfo(np.uint16).max) if self.counts
                          else gen.GetFingerprintAsNumPy(mol))
        return out, bad

    def get_feature_names_out(self, input_features=None):
        return np.asarray([f"morgan{self.radius}_{i}" for i in range(int(self.n_bits))], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.requires_fit = False
        return tags

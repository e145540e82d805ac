"""RDKit 2D descriptors as a scikit-learn transformer: SMILES -> scaled descriptor matrix.

The estimators' ``descriptors=True`` fuses these into the model's head (`estimators.fusion`);
the transformer also works on its own in a ``Pipeline``. Every descriptor in RDKit's
``Descriptors._descList`` (217 in RDKit 2026.09) is computed once per distinct SMILES; the
scaling (a quantile map to a standard normal, which tames heavy tails such as ``Ipc``) is fitted on
the training SMILES only, and a descriptor that is missing or not finite for a molecule becomes 0,
the training median after the map.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.preprocessing import QuantileTransformer
from sklearn.utils.validation import check_is_fitted


def descriptor_names() -> list[str]:
    from rdkit.Chem import Descriptors

    return [name for name, _ in Descriptors._descList]


def compute_descriptors(smiles, on_invalid: str = "raise") -> np.ndarray:
    """Raw RDKit 2D descriptors, (n, n_descriptors) float64; NaN where one fails or is not finite.

    Each distinct SMILES is computed once. ``on_invalid="nan"`` gives a NaN row for a SMILES RDKit
    rejects; "raise" names the rows.
    """
    from rdkit import Chem, rdBase
    from rdkit.Chem import Descriptors

    smiles = list(smiles)
    funcs = [f for _, f in Descriptors._descList]
    cache: dict[str, np.ndarray] = {}
    out = np.full((len(smiles), len(funcs)), np.nan)
    invalid = []
    # RDKit's C++ log is blocked (parse errors are reported below, by row) and restored as the
    # caller had it afterwards.
    with rdBase.BlockLogs():
        for i, s in enumerate(smiles):
            if s in cache:
                out[i] = cache[s]
                continue
            mol = Chem.MolFromSmiles(s) if isinstance(s, str) else None
            if mol is None:
                invalid.append(i)
                continue
            row = np.empty(len(funcs))
            for j, f in enumerate(funcs):
                try:
                    row[j] = float(f(mol))
                except Exception:  # RDKit raises for a few descriptors on odd molecules
                    row[j] = np.nan
            row[~np.isfinite(row)] = np.nan
            out[i] = cache[s] = row
    if invalid and on_invalid == "raise":
        shown = ", ".join(f"{i} ({smiles[i]!r})" for i in invalid[:5])
        raise ValueError(f"RDKit cannot parse {len(invalid)} SMILES, e.g. at rows {shown} "
                         "(on_invalid='nan' gives them NaN rows)")
    return out


class RDKitDescriptors(TransformerMixin, BaseEstimator):
    """SMILES -> RDKit 2D descriptors, quantile-mapped to N(0, 1) on the training data.

    Parameters
    ----------
    n_quantiles : quantiles of the map (capped at the number of training molecules).
    on_invalid : "raise" (default) or "nan": rows of SMILES RDKit rejects come out 0.

    Attributes
    ----------
    feature_names_in_ : not set (the input is SMILES); ``get_feature_names_out`` names the kept
        descriptors. ``kept_`` : mask of descriptors that vary on the training data.
    """

    def __init__(self, n_quantiles: int = 1000, on_invalid: str = "raise"):
        self.n_quantiles = n_quantiles
        self.on_invalid = on_invalid

    def fit(self, X, y=None):
        from .estimators._base import check_smiles_input

        if self.on_invalid not in ("raise", "nan"):
            raise ValueError(f"on_invalid must be 'raise' or 'nan', got {self.on_invalid!r}")
        raw = compute_descriptors(check_smiles_input(X), self.on_invalid)
        return self._fit_raw(raw)

    def _fit_raw(self, raw: np.ndarray):
        observed = ~np.isnan(raw)
        with np.errstate(invalid="ignore"):
            spread = np.nanmax(np.where(observed, raw, np.nan), axis=0) - np.nanmin(np.where(observed, raw, np.nan), axis=0)
        self.kept_ = observed.any(0) & (np.nan_to_num(spread) > 0)
        self.names_ = np.asarray(descriptor_names(), dtype=object)
        self.quantiles_ = QuantileTransformer(n_quantiles=max(2, min(self.n_quantiles, len(raw))),
                                              output_distribution="normal", subsample=None).fit(raw[:, self.kept_])
        self.n_features_out_ = int(self.kept_.sum())
        return self

    def _restore(self, kept: np.ndarray, quantiles: np.ndarray, references: np.ndarray):
        """A fitted transformer from saved arrays (the estimators' pickle-free format)."""
        self.kept_ = np.asarray(kept, dtype=bool)
        self.names_ = np.asarray(descriptor_names(), dtype=object)
        qt = QuantileTransformer(n_quantiles=len(references), output_distribution="normal", subsample=None)
        qt.quantiles_, qt.references_ = np.asarray(quantiles), np.asarray(references)
        qt.n_quantiles_, qt.n_features_in_ = len(references), int(self.kept_.sum())
        self.quantiles_, self.n_features_out_ = qt, int(self.kept_.sum())
        return self

    def transform(self, X) -> np.ndarray:
        from .estimators._base import check_smiles_input

        check_is_fitted(self, "quantiles_")
        return self._transform_raw(compute_descriptors(check_smiles_input(X), self.on_invalid))

    def _transform_raw(self, raw: np.ndarray) -> np.ndarray:
        z = self.quantiles_.transform(raw[:, self.kept_])
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

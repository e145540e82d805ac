"""Regression, the task half of ``GMNetRegressor`` and ``ChemBERTaRegressor``: targets (NaN =
missing, standardised on the training data unless ``normalize_y=False``), loss, validation
metric, blend score, ``predict`` and ``score``. The model families give the other half
(``SmilesNetBase`` subclasses)."""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from ._invalid import warn_unscored_rows
from ..utils.targets import as_float_target, check_n_outputs, check_score_weight, check_target
from .losses import MaskedMSELoss
from .metrics import ValidRMSE, masked_rmse

#: The regressors' own parameters (beside their family's): constraints and documentation.
REGRESSOR_PARAMETER_CONSTRAINTS = {"normalize_y": ["boolean"]}
REGRESSOR_PARAMETERS_DOC = """\
normalize_y : bool, default=True
    Standardise each target on the training rows (mean 0, population sd 1, as DeepChem's
    ``NormalizationTransformer``; a target constant there keeps a scale of 1) and train on
    that; predictions come back in y's units either way. False trains on y as given (the
    paper's protocol does so for Clearance's log(y + 1)). The name is scikit-learn's
    (``GaussianProcessRegressor``).
"""


class SmilesRegressorMixin(RegressorMixin):
    """Regression: y (n,) or (n, n_tasks), NaN = missing; standardised on the training data
    (``normalize_y=True``, the default) or taken as given."""

    def _check_y(self, y, n: int, name: str = "y") -> np.ndarray:
        y = as_float_target(check_target(y, name), name, "regression targets must be numeric")
        if np.isinf(y).any():
            rows = np.nonzero(np.isinf(y).reshape(n, -1).any(1))[0]
            raise ValueError(f"{name} has infinite values at rows {rows[:10].tolist()}")
        return y

    def _fit_y(self, y: np.ndarray) -> np.ndarray:
        self.n_outputs_ = 1 if y.ndim == 1 else y.shape[1]
        self._y_ndim = y.ndim
        y2 = y.reshape(len(y), -1)
        empty = np.isnan(y2).all(0)
        if empty.any():
            raise ValueError(f"target column(s) {np.nonzero(empty)[0].tolist()} have no observed values among the "
                             "training rows (labels in y_valid alone do not count)")
        if self.normalize_y:
            with np.errstate(over="ignore", invalid="ignore"):
                self.y_mean_ = np.nanmean(y2, axis=0)
                scale = np.nanstd(y2, axis=0)  # population sd, as DeepChem's NormalizationTransformer
            if not (np.isfinite(scale).all() and np.isfinite(self.y_mean_).all()):
                # squares (|y| above ~1e154) or sums past float64's range: inf predictions; the
                # statistics of y scaled down instead
                largest = np.nanmax(np.abs(y2), axis=0)
                largest = np.where(largest > 0, largest, 1.0)
                self.y_mean_ = np.nanmean(y2 / largest, axis=0) * largest
                scale = np.nanstd(y2 / largest, axis=0) * largest
            self.y_scale_ = np.where(scale > 0, scale, 1.0)
        else:  # the identity: loss, validation metric and predictions in y's own units
            self.y_mean_ = np.zeros(y2.shape[1])
            self.y_scale_ = np.ones(y2.shape[1])
        return self._transform_y(y)

    def _transform_y(self, y: np.ndarray) -> np.ndarray:
        if not hasattr(self, "y_mean_"):
            return y  # validation targets arriving before the fit; transformed in fit
        return ((y.reshape(len(y), -1) - self.y_mean_) / self.y_scale_).astype(np.float32)

    _forest_kind = "regression"

    def _criterion(self):
        return MaskedMSELoss

    def _blend_score(self, pred: np.ndarray, y_valid_z: np.ndarray) -> float:
        """Higher is better: minus the validation RMSE in original units (the selection metric)."""
        return -masked_rmse(y_valid_z.reshape(len(y_valid_z), -1) * self.y_scale_, pred * self.y_scale_)

    def _validation_metric(self, y_valid_z: np.ndarray):
        return "valid_rmse", True, ValidRMSE(self.y_scale_)

    def predict(self, X, return_std: bool = False):
        """Predictions in the original units of y (the mean over ensemble members and SMILES
        variants); NaN rows for invalid SMILES with on_invalid='nan'. ``return_std=True`` also
        returns the standard deviation over the ensemble's members (0 for one member). With
        ``forest=True`` each member is blended with the same forest, so the spread is the
        networks' times ``1 - forest_weight_`` (0 at weight 1); ``with network_alone(est):``
        (``gmnet_sklearn.forest``) gives the networks' own."""
        outs, _ = self._member_outputs(X)
        pred = outs.mean(0) * self.y_scale_ + self.y_mean_
        std = outs.std(0) * self.y_scale_
        if self._y_ndim == 1:
            pred, std = pred[:, 0], std[:, 0]
        return (pred, std) if return_std else pred

    def score(self, X, y, sample_weight=None) -> float:
        """R^2 (mean over the tasks with observed labels of nonzero weight; NaN if none), missing labels masked;
        rows of invalid SMILES (NaN predictions with ``on_invalid="nan"``) are left out with an
        ``InvalidSmilesWarning`` naming them."""
        from sklearn.metrics import r2_score

        check_is_fitted(self, "net_")
        y = as_float_target(check_target(y), "y", "regression targets must be numeric")
        check_n_outputs(y, self.n_outputs_)
        y = y.reshape(len(y), -1)
        pred = np.asarray(self.predict(X), dtype=np.float64)
        check_consistent_length(pred, y, sample_weight)  # else a reshape pairs rows wrongly
        pred = pred.reshape(len(y), -1)
        warn_unscored_rows(np.isnan(pred).all(1))
        weight = check_score_weight(sample_weight)  # (its length: above)
        scores = []
        for j in range(y.shape[1]):
            obs = ~np.isnan(y[:, j]) & ~np.isnan(pred[:, j])
            if obs.any() and (weight is None or (weight[obs] != 0).any()):  # all of them weighing 0: left out, as the classifiers do
                scores.append(r2_score(y[obs, j], pred[obs, j], sample_weight=None if weight is None else weight[obs]))
        return float(np.mean(scores)) if scores else float("nan")

    @classmethod
    def _fitted_metadata_keys(cls) -> set:
        return super()._fitted_metadata_keys() | {"y_mean_", "y_scale_", "_y_ndim"}

    def _fitted_metadata(self):
        meta = super()._fitted_metadata()
        meta.update(y_mean_=self.y_mean_, y_scale_=self.y_scale_, _y_ndim=self._y_ndim)
        return meta

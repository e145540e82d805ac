"""scikit-learn scorers that leave missing labels (NaN in y) out, task by task, as the estimators'
own ``score`` does: for ``GridSearchCV(scoring=...)``, ``cross_validate`` and the other tools on
multi-task y with missing labels, where scikit-learn's string scorers give NaN to every candidate.

    GridSearchCV(GMNetClassifier(), grid, cv=ScaffoldKFold(5), scoring=masked_roc_auc_scorer)
    cross_validate(GMNetRegressor(), X, Y, cv=KFold(5), scoring={"rmse": masked_rmse_scorer})

Each is a callable ``scorer(estimator, X, y)`` (scikit-learn's scorer protocol), greater is better;
they work for any estimator with ``predict`` / ``predict_proba`` (a Pipeline too). Rows whose
prediction is NaN (invalid SMILES under ``on_invalid="nan"``) are left out as well.
"""

from __future__ import annotations

import numpy as np

from .estimators.metrics import masked_rmse, mean_roc_auc

__all__ = ["masked_rmse_scorer", "masked_roc_auc_scorer"]


def masked_rmse_scorer(estimator, X, y) -> float:
    """Minus the RMSE per task over its observed labels, averaged over the tasks (NaN if none)."""
    y = np.asarray(y, dtype=np.float64)
    pred = np.asarray(estimator.predict(X), dtype=np.float64).reshape(y.shape)
    return -masked_rmse(np.where(np.isnan(pred), np.nan, y), pred)


def masked_roc_auc_scorer(estimator, X, y) -> float:
    """ROC-AUC per task over its observed labels, averaged over the tasks with both classes (NaN if
    none): a binary task's labels as the estimator's ``classes_`` order them, or a multi-label y of
    0, 1 and NaN."""
    proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)
    y = np.asarray(y)
    if y.ndim == 1:  # one task: its labels are the estimator's classes
        classes = np.asarray(estimator.classes_)
        if len(classes) != 2 or proba.ndim != 2 or proba.shape[1] != 2:
            raise ValueError(f"masked_roc_auc_scorer: one task needs two classes, got {classes.tolist()}")
        if not np.isin(y, classes).all():
            raise ValueError(f"masked_roc_auc_scorer: labels {sorted(set(y.tolist()) - set(classes.tolist()))} "
                             f"are not the estimator's classes {classes.tolist()} (a missing label in one task: "
                             "leave the row out)")
        y, proba = (y == classes[1]).astype(np.float64), proba[:, 1]
    else:
        y = y.astype(np.float64)
    y = np.where(np.isnan(proba), np.nan, y)  # rows predicted NaN: left out
    return mean_roc_auc(y, np.nan_to_num(proba, nan=0.5))

"""Validation/test metrics with missing labels masked (mean over tasks)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score


def _as_2d(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(len(a), -1)


def masked_rmse(y_true, y_pred) -> float:
    """RMSE per task over observed labels, averaged over tasks."""
    y_true, y_pred = _as_2d(y_true), _as_2d(y_pred)
    scores = []
    for j in range(y_true.shape[1]):
        obs = ~np.isnan(y_true[:, j])
        if obs.any():
            scores.append(np.sqrt(np.mean((y_true[obs, j] - y_pred[obs, j]) ** 2)))
    return float(np.mean(scores)) if scores else float("nan")


def mean_roc_auc(y_true, y_score) -> float:
    """ROC-AUC per task over observed labels, averaged over tasks that have both classes."""
    y_true, y_score = _as_2d(y_true), _as_2d(y_score)
    scores = []
    for j in range(y_true.shape[1]):
        obs = ~np.isnan(y_true[:, j])
        labels = y_true[obs, j]
        if len(np.unique(labels)) == 2:
            scores.append(roc_auc_score(labels, y_score[obs, j]))
    return float(np.mean(scores)) if scores else float("nan")


def has_auc(y_true) -> bool:
    """Whether ROC-AUC is defined for at least one task (it depends on the labels alone)."""
    y_true = _as_2d(y_true)
    return any(len(np.unique(col[~np.isnan(col)])) == 2 for col in y_true.T)

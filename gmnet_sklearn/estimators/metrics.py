"""Validation/test metrics with missing labels masked (mean over tasks), and the skorch scorers
that compute them on a net's validation outputs each epoch."""

from __future__ import annotations

import numpy as np
import torch
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
    """ROC-AUC per task over observed labels, averaged over tasks that have both classes; NaN
    when a score is not finite (a diverged fit: an epoch that is never the best, as masked_rmse
    makes it for regression, instead of scikit-learn's error ending the fit)."""
    y_true, y_score = _as_2d(y_true), _as_2d(y_score)
    scores = []
    for j in range(y_true.shape[1]):
        obs = ~np.isnan(y_true[:, j])
        labels = y_true[obs, j]
        if not np.isfinite(y_score[obs, j]).all():
            return float("nan")
        if len(np.unique(labels)) == 2:
            scores.append(roc_auc_score(labels, y_score[obs, j]))
    return float(np.mean(scores)) if scores else float("nan")


def has_auc(y_true) -> bool:
    """Whether ROC-AUC is defined for at least one task (it depends on the labels alone)."""
    y_true = _as_2d(y_true)
    return any(len(np.unique(col[~np.isnan(col)])) == 2 for col in y_true.T)


def _net_outputs(net, X) -> np.ndarray:
    # With EpochScoring(use_caching=True) this replays the outputs of skorch's validation pass.
    return np.concatenate([p.detach().float().cpu().numpy() for p in net.forward_iter(X)])


def scores_from_raw(raw: np.ndarray, n_tasks: int) -> np.ndarray:
    """Class probabilities (n, C) for a single task, P(label = 1) (n, n_tasks) for multi-label."""
    t = torch.as_tensor(raw)
    return (t.softmax(-1) if n_tasks == 1 else t.sigmoid()).numpy()


class ValidRMSE:
    """skorch scoring: validation RMSE in the original units of y (mean over tasks)."""

    def __init__(self, scale: np.ndarray):
        self.scale = np.asarray(scale)

    def __call__(self, net, X, y) -> float:
        pred = _net_outputs(net, X)
        return masked_rmse(y.reshape(len(y), -1) * self.scale, pred.reshape(len(pred), -1) * self.scale)


class ValidROCAUC:
    """skorch scoring: validation ROC-AUC (mean over tasks; one-vs-rest mean for multiclass)."""

    def __init__(self, n_tasks: int):
        self.n_tasks = n_tasks

    def __call__(self, net, X, y) -> float:
        return probability_roc_auc(y, scores_from_raw(_net_outputs(net, X), self.n_tasks), self.n_tasks)


def probability_roc_auc(y: np.ndarray, probs: np.ndarray, n_tasks: int) -> float:
    """ROC-AUC of probabilities as ``scores_from_raw`` gives them: mean over tasks (multi-label),
    of the positive class (binary), one-vs-rest mean (multiclass); NaN where the labels leave it undefined."""
    if n_tasks > 1:
        return mean_roc_auc(y, probs)
    if probs.shape[1] == 2:
        return mean_roc_auc(y, probs[:, 1])
    return mean_roc_auc(np.eye(probs.shape[1])[y.astype(int)], probs)

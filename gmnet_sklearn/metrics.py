"""scikit-learn scorers that leave missing labels (NaN in y) out, task by task, as the estimators'
own ``score`` does: for ``GridSearchCV(scoring=...)``, ``cross_validate`` and the other tools on
multi-task y with missing labels, where scikit-learn's string scorers give NaN to every candidate.

    GridSearchCV(GMNetClassifier(), grid, cv=ScaffoldKFold(5), scoring=masked_roc_auc_scorer)
    cross_validate(GMNetRegressor(), X, Y, cv=KFold(5), scoring={"rmse": masked_rmse_scorer})

Each is a callable ``scorer(estimator, X, y, sample_weight=None)`` (scikit-learn's scorer
protocol), greater is better; they work for any estimator with ``predict`` / ``predict_proba``
(a Pipeline too; scikit-learn's multi-output classifiers, whose ``predict_proba`` is a list of one
array a task, too). Rows whose prediction is NaN (invalid SMILES under ``on_invalid="nan"``) are
left out as well, named in an ``InvalidSmilesWarning``, as the estimators' ``score`` does. Under metadata routing, ``scorer.set_score_request(sample_weight=True)`` asks for
the weights, as scikit-learn's own scorers do. (scikit-learn's ``make_scorer`` would read a
two-task multi-label model's probabilities as a binary model's: its ``classes_`` are [0, 1].)
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.metadata_routing import MetadataRequest
from sklearn.utils.validation import check_consistent_length

from .utils.meta import inner_model
from .utils.targets import as_float_target, check_multilabel, check_score_weight, check_target, warn_unscored_rows

__all__ = ["masked_rmse_scorer", "masked_roc_auc_scorer"]


class _MaskedScorer:
    """A scorer function with scikit-learn's ``set_score_request`` for ``sample_weight``."""

    def __init__(self, score, name: str):
        self._score, self._name = score, name
        self._sample_weight_request = None  # scikit-learn's default: an error if routed without a request

    def __call__(self, estimator, X, y, sample_weight=None) -> float:
        return self._score(estimator, X, y, check_score_weight(sample_weight))

    def set_score_request(self, *, sample_weight=None):
        """Whether ``sample_weight`` is routed to this scorer (scikit-learn's metadata routing); as
        scikit-learn's scorers, it changes this scorer and returns it (``copy.copy`` it first to
        keep the module's as it was)."""
        self._sample_weight_request = sample_weight
        return self

    def get_metadata_routing(self) -> MetadataRequest:
        request = MetadataRequest(owner=self._name)
        request.score.add_request(param="sample_weight", alias=self._sample_weight_request)
        return request

    def __repr__(self) -> str:
        return f"gmnet_sklearn.metrics.{self._name}"


def _task_columns(y, n_rows: int, name: str) -> np.ndarray:
    """``y`` as (n, n_tasks), as the estimators' ``score`` reads it (pandas' values, pd.NA a missing
    label), its length checked: a reshape would otherwise pair rows wrongly."""
    y = check_target(y, f"{name}: y")
    check_consistent_length(y, np.empty(n_rows))
    return y.reshape(len(y), -1)


def _probabilities(estimator, X) -> np.ndarray:
    """``predict_proba`` as (n, columns): one column a class for one task, or each task's positive
    class for several; scikit-learn's multi-output classifiers (forests, k-NN) give a list of one
    (n, classes) array a task, which ``np.asarray`` would stack task-first (a review)."""
    proba = estimator.predict_proba(X)
    if not isinstance(proba, list):
        proba = np.asarray(proba, dtype=np.float64)
        return proba.reshape(len(proba), -1)
    classes = getattr(estimator, "classes_", None)
    columns = []
    for j, p in enumerate(proba):
        p = np.asarray(p, dtype=np.float64)
        task = [0, 1][:p.shape[1]] if classes is None else np.asarray(classes[j]).tolist()
        if 1 in task:
            columns.append(p[:, task.index(1)])
        elif task == [0]:  # a task whose training labels were all 0
            columns.append(np.zeros(len(p)))
        else:
            raise ValueError(f"masked_roc_auc_scorer: task {j}'s classes are {task}; a multi-label y holds 0, 1 "
                             "and NaN")
    return np.column_stack(columns)


def _weighted_mean(values: np.ndarray, weight: np.ndarray) -> float:
    return float(np.average(values, weights=weight))


def _rmse(estimator, X, y, sample_weight) -> float:
    pred = np.asarray(estimator.predict(X), dtype=np.float64)
    y = as_float_target(_task_columns(y, len(pred), "masked_rmse_scorer"), "masked_rmse_scorer: y",
                        "regression targets must be numeric")
    pred = pred.reshape(len(pred), -1)
    warn_unscored_rows(np.isnan(pred).all(1), "masked_rmse_scorer")  # (a task's NaN alone: scored in the others)
    if pred.shape[1] != y.shape[1]:
        raise ValueError(f"masked_rmse_scorer: y has {y.shape[1]} target column(s), the estimator predicts "
                         f"{pred.shape[1]}")
    weight = np.ones(len(y)) if sample_weight is None else sample_weight
    check_consistent_length(y, weight)
    scores = []
    for j in range(y.shape[1]):
        seen = ~np.isnan(y[:, j]) & ~np.isnan(pred[:, j])
        if weight[seen].sum() > 0:
            scores.append(np.sqrt(_weighted_mean((y[seen, j] - pred[seen, j]) ** 2, weight[seen])))
    return -float(np.mean(scores)) if scores else float("nan")


def _roc_auc(estimator, X, y, sample_weight) -> float:
    from sklearn.metrics import roc_auc_score

    proba = _probabilities(estimator, X)
    warn_unscored_rows(np.isnan(proba).all(1), "masked_roc_auc_scorer")
    y = _task_columns(y, len(proba), "masked_roc_auc_scorer")
    weight = np.ones(len(y)) if sample_weight is None else sample_weight
    check_consistent_length(y, weight)
    n_tasks = getattr(inner_model(estimator), "n_tasks_", None)  # the estimators' own; others: y's columns say it
    if y.shape[1] == 1 and (n_tasks or 1) == 1:  # one task (a one-column y too, as fit and score read it)
        classes = np.asarray(estimator.classes_)
        labels = y[:, 0]
        unknown = ~np.isin(labels, classes)
        if unknown.any():
            raise ValueError(f"masked_roc_auc_scorer: labels {np.unique(labels[unknown]).tolist()} are not the "
                             f"estimator's classes {classes.tolist()} (a missing label in one task: leave the row out)")
        if proba.shape[1] != len(classes):
            raise ValueError(f"masked_roc_auc_scorer: {proba.shape[1]} probability columns for the estimator's "
                             f"{len(classes)} classes")
        seen = ~np.isnan(proba).any(1) & (weight > 0)
        if len(np.unique(labels[seen])) < 2:
            return float("nan")
        if len(classes) == 2:
            return float(roc_auc_score(labels[seen] == classes[1], proba[seen, 1], sample_weight=weight[seen]))
        # several classes: one-vs-rest, each class's AUC averaged, as the estimators' validation metric
        present = [k for k in range(len(classes)) if len(np.unique(labels[seen] == classes[k])) == 2]
        return float(np.mean([roc_auc_score(labels[seen] == classes[k], proba[seen, k], sample_weight=weight[seen])
                              for k in present]))
    if n_tasks is not None and y.shape[1] != n_tasks:
        raise ValueError(f"masked_roc_auc_scorer: y has {y.shape[1]} target column(s); the model was fitted on {n_tasks}")
    if proba.shape[1] != y.shape[1]:
        raise ValueError(f"masked_roc_auc_scorer: y has {y.shape[1]} label columns, the estimator gives "
                         f"{proba.shape[1]} probability columns")
    y = check_multilabel(y, "masked_roc_auc_scorer: y")
    scores = []
    for j in range(y.shape[1]):
        seen = ~np.isnan(y[:, j]) & ~np.isnan(proba[:, j]) & (weight > 0)
        if len(np.unique(y[seen, j])) == 2:
            scores.append(roc_auc_score(y[seen, j], proba[seen, j], sample_weight=weight[seen]))
    return float(np.mean(scores)) if scores else float("nan")


#: Minus the RMSE per task over its observed labels (weighted by ``sample_weight``), averaged
#: over the tasks (NaN if none).
masked_rmse_scorer = _MaskedScorer(_rmse, "masked_rmse_scorer")

#: ROC-AUC per task over its observed labels, averaged over the tasks with both classes (NaN if
#: none): one task's labels as the estimator's ``classes_`` order them (a one-column y too; three
#: or more classes: one-vs-rest, averaged), or a multi-label y of 0, 1 and NaN.
masked_roc_auc_scorer = _MaskedScorer(_roc_auc, "masked_roc_auc_scorer")

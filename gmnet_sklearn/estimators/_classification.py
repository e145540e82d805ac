"""Classification, the task half of ``GMNetClassifier`` and ``ChemBERTaClassifier``: labels (one
task, or 0/1/NaN multi-label), loss, validation metric (ROC-AUC), blend score, ``predict_proba``,
``decision_function``, ``predict`` and ``score``. The model families give the other half."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from ._base import _placing_every_row
from ._invalid import warn_unscored_rows
from ..utils.stacklevel import _caller_stacklevel
from ..utils.targets import check_multilabel, check_n_outputs, check_score_weight, check_target, missing_labels
from .losses import CrossEntropyLoss, MaskedBCEWithLogitsLoss
from .metrics import ValidROCAUC, has_auc, probability_roc_auc, scores_from_raw

#: decision_function's clip of probabilities away from 0 and 1 (finite log-odds)
PROBA_EPS = 1e-15


class SmilesClassifierMixin(ClassifierMixin):
    """Classification: y (n,) single task (2 logits + cross-entropy for binary), or (n, n_tasks)
    multi-label with 0/1/NaN (BCE with missing labels masked)."""

    def __sklearn_tags__(self):
        # here, after ClassifierMixin has put its ClassifierTags in (the base's tags run first)
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        tags.target_tags.multi_output = False  # a classifier's 2-D y is multi-label only, not multi-class per column
        return tags

    def _check_y(self, y, n: int, name: str = "y") -> np.ndarray:
        y = check_target(y, name)
        if y.ndim == 2 and y.shape[1] == 1:
            # one task as a column: raveled with scikit-learn's warning; missing labels, which
            # a single task cannot mask, are named
            column = y[:, 0]
            missing = missing_labels(column)
            if missing.any():
                raise ValueError(f"{name} is one task with missing labels at rows {np.nonzero(missing)[0][:10].tolist()}: "
                                 "leave those rows out (a 2-D y with NaN is for several tasks)")
            warnings.warn(f"A column-vector {name} was passed when a 1d array was expected; it is raveled",
                          DataConversionWarning, stacklevel=_caller_stacklevel())
            y = column
        if y.ndim == 2:
            # scikit-learn's cross_val_predict(method="predict_proba") label-encodes each column
            # before the fit: NaN becomes 2
            try:
                y = check_multilabel(y, name)
            except ValueError as exc:
                try:
                    values = y.astype(np.float64)
                except (TypeError, ValueError):
                    values = np.array([np.nan])
                if np.isnan(values).any() or not set(np.unique(values)) <= {0, 1, 2}:
                    raise
                raise ValueError(f"{exc}; if cross_val_predict(method='predict_proba') passed it, it label-encoded "
                                 "each column (NaN became 2): take cross_validate(return_estimator=True, "
                                 "return_indices=True) and each fold's predict_proba instead") from None
        else:
            missing = missing_labels(y)
            if missing.any():
                raise ValueError(
                    f"{name}: single-task labels must not be missing (rows {np.nonzero(missing)[0][:10].tolist()}); "
                    "pass a 2-D y with NaN for multi-task data with missing labels"
                )
            infinite = [i for i, v in enumerate(y.tolist()) if isinstance(v, float) and np.isinf(v)]
            if infinite:  # (scikit-learn's own check says "infinity", not where)
                raise ValueError(f"{name} has infinite labels at rows {infinite[:10]}")
            blank = [i for i, v in enumerate(y.tolist()) if isinstance(v, str) and not v.strip()]
            if blank:  # a missing label written as "", not a class of its own
                raise ValueError(f"{name} has blank labels at rows {blank[:10]}: single-task labels must not be "
                                 "missing (leave those rows out, or pass a 2-D y with NaN for missing labels)")
            try:
                check_classification_targets(y)  # a continuous y is a regression target
            except ValueError as exc:  # (scikit-learn's words name no argument: y or y_valid)
                raise ValueError(f"{name}: {exc}") from None
        return y

    def _fit_y(self, y: np.ndarray) -> np.ndarray:
        if y.ndim == 1:
            self._label_encoder = LabelEncoder().fit(y)
            self.classes_ = self._label_encoder.classes_
            if len(self.classes_) < 2:
                raise ValueError(f"the classifier needs at least two classes in y; got only one class: {self.classes_.tolist()}")
            self.n_outputs_ = len(self.classes_)
            self.n_tasks_ = 1
        else:
            self.n_tasks_ = self.n_outputs_ = y.shape[1]
            empty = np.isnan(y).all(0)
            if empty.any():  # as the regressors say it: nothing to learn that task from
                raise ValueError(f"target column(s) {np.nonzero(empty)[0].tolist()} have no observed labels among the "
                                 "training rows (labels in y_valid alone do not count)")
            one_class = [j for j in range(y.shape[1]) if len(np.unique(y[~np.isnan(y[:, j]), j])) < 2]
            if one_class:
                warnings.warn(f"tasks {one_class} have fewer than two classes in the training data",
                              UserWarning, stacklevel=_caller_stacklevel())
            # scikit-learn's multi-label convention (MLPClassifier, OneVsRestClassifier): one entry
            # per label column; its probability scorers read the number of columns from it
            self.classes_ = np.arange(self.n_tasks_)
        return self._transform_y(y)

    def _transform_y(self, y: np.ndarray) -> np.ndarray:
        if not hasattr(self, "n_tasks_"):
            return y
        if self.n_tasks_ == 1:
            if y.ndim != 1:
                raise ValueError("validation labels must be 1-D like the training labels")
            # compared as arrays: tolist() makes datetime64 labels dates, no longer equal to them
            unseen = np.unique(y[~np.isin(y, self.classes_)])
            if unseen.size:
                raise ValueError(f"validation labels {unseen.tolist()} are not among the training classes "
                                 f"{self.classes_.tolist()}")
            return self._label_encoder.transform(y).astype(np.int64)
        return y.reshape(len(y), -1).astype(np.float32)

    _forest_kind = "classification"

    def _internal_split(self, smiles: list, seed: int, y: np.ndarray | None = None):
        """The base split, with the rows of any class it left out of the training part moved back
        into it: the classes are the training part's, and a rare class (a row or two on one small
        scaffold) would otherwise be unknown to the model, or leave it a single class."""
        if y is not None and y.ndim == 1 and self.valid_split == "random":
            stratified = self._stratified_split(len(smiles), seed, y)
            if stratified is not None:  # (a large valid_size can still round a class out of training)
                return self._seen_classes_only(*stratified, y)
        train, valid = super()._internal_split(smiles, seed, y)
        if y is None or y.ndim != 1 or not len(valid):
            return train, valid
        train, valid = self._seen_classes_only(train, valid, y)
        if self.valid_split in ("scaffold", "balanced_scaffold") and len(valid) and not self._can_rank(y[valid]):
            # the rows moved back can leave one class (the base checked before the move): the
            # balanced scaffold order, where it ranks after the same move
            balanced = self._balanced_order(smiles, seed)
            if balanced is not None:
                b_train, b_valid = _placing_every_row(*self._seen_classes_only(*balanced, y), len(smiles))
                if len(b_valid) and self._can_rank(y[b_valid]):
                    return np.sort(b_train), b_valid
        return train, valid

    @staticmethod
    def _seen_classes_only(train, valid, y):
        unseen = ~np.isin(y[valid], y[train])
        if unseen.any():
            train, valid = np.sort(np.concatenate([train, valid[unseen]])), valid[~unseen]
        return train, valid

    def _stratified_split(self, n: int, seed: int, y: np.ndarray):
        """``valid_split="random"`` for one task: both parts keep the classes' proportions
        (scikit-learn's StratifiedShuffleSplit), so the validation part can rank; None where a
        class has a single row (the plain random draw then)."""
        from sklearn.model_selection import StratifiedShuffleSplit

        _, counts = np.unique(y, return_counts=True)
        n_valid = max(1, int(round(self.valid_size * n)))
        if counts.min() < 2 or n_valid < len(counts) or n - n_valid < len(counts):
            return None
        train, valid = next(StratifiedShuffleSplit(n_splits=1, test_size=n_valid, random_state=seed)
                            .split(np.zeros(n), y))
        return np.sort(train), np.sort(valid)

    def _can_rank(self, y_valid: np.ndarray) -> bool:
        """ROC-AUC needs both classes (in at least one task)."""
        if y_valid.ndim == 2:
            return has_auc(np.asarray(y_valid, dtype=np.float64))
        return len(np.unique(y_valid)) > 1

    def _criterion(self):
        return CrossEntropyLoss if self.n_tasks_ == 1 else MaskedBCEWithLogitsLoss

    def _blend_score(self, probs: np.ndarray, y_valid: np.ndarray) -> float:
        """The validation ROC-AUC of blended probabilities (NaN where the labels leave it undefined)."""
        return probability_roc_auc(y_valid, probs, self.n_tasks_)

    def _scores_from_raw(self, raw: np.ndarray) -> np.ndarray:
        return scores_from_raw(raw, self.n_tasks_)

    def _validation_metric(self, y_valid: np.ndarray):
        if not self._can_rank(y_valid):
            warnings.warn("ROC-AUC is undefined on the validation labels (one class only); selecting by validation loss",
                          UserWarning, stacklevel=_caller_stacklevel())
            return "valid_loss", True, None  # skorch records it already

        return "valid_roc_auc", False, ValidROCAUC(self.n_tasks_)

    def _average_space(self, raw: np.ndarray) -> np.ndarray:
        return self._scores_from_raw(raw)  # members and SMILES variants average probabilities

    def predict_proba(self, X) -> np.ndarray:
        """Single task: (n, n_classes) class probabilities. Multi-label: (n, n_tasks) P(label = 1).
        The mean over ensemble members and SMILES variants. Rows of invalid SMILES are NaN with
        on_invalid='nan'."""
        probs, _ = self._raw_predict(X)
        return probs

    def decision_function(self, X) -> np.ndarray:
        """Log-odds of the (averaged, blended) probabilities: binary (n,), multi-label (n, n_tasks);
        log-probabilities (n, n_classes) for multiclass. Probabilities are clipped to
        [1e-15, 1 - 1e-15] first, so the values stay finite (scikit-learn's ROC-AUC scorer reads
        them) where a forest's vote or a saturated softmax gives exactly 0 or 1."""
        probs = np.clip(self.predict_proba(X), PROBA_EPS, 1 - PROBA_EPS)  # (NaN rows stay NaN)
        if self.n_tasks_ == 1 and probs.shape[1] == 2:
            return np.log(probs[:, 1]) - np.log(probs[:, 0])
        if self.n_tasks_ > 1:
            return np.log(probs) - np.log1p(-probs)
        return np.log(probs)

    def predict(self, X) -> np.ndarray:
        """Class labels (single task) or 0/1 per task (multi-label). With on_invalid='nan', rows of
        invalid SMILES are NaN (object dtype when the classes are not numbers, True/False too)."""
        return self._labels(self.predict_proba(X))

    def _labels(self, probs: np.ndarray) -> np.ndarray:
        """``predict``'s answer from ``predict_proba``'s."""
        valid = ~np.isnan(probs).any(1)
        if self.n_tasks_ > 1:
            out = (probs >= 0.5).astype(np.float64 if not valid.all() else np.int64)
            out[~valid] = np.nan if not valid.all() else 0
            return out
        labels = self.classes_[np.argmax(np.nan_to_num(probs, nan=0.0), axis=1)]
        if valid.all():
            return labels
        kind = labels.dtype.kind
        out = labels.astype(np.float64) if kind in "iuf" else labels.astype(object)  # (True/False stay labels)
        out[~valid] = np.nan
        return out

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy (single task) or mean per-task accuracy over observed labels (multi-label; a
        task without any observed label in ``y``, or with zero weight on all of them, is left
        out; unlike scikit-learn's subset accuracy, which missing labels leave undefined),
        weighted by ``sample_weight``. Rows of invalid SMILES (NaN predictions with
        ``on_invalid="nan"``) are left out with an ``InvalidSmilesWarning`` naming them."""
        from sklearn.metrics import accuracy_score

        check_is_fitted(self, "net_")
        y = check_target(y)
        check_n_outputs(y, self.n_tasks_)
        y = self._check_y(y, len(y))  # as fit takes them: 0, 1 or NaN per task; one task's labels all present
        probs = self.predict_proba(X)
        check_consistent_length(probs, y, sample_weight)
        sample_weight = check_score_weight(sample_weight)  # (its length: above)
        valid = ~np.isnan(probs).any(1)
        warn_unscored_rows(~valid)
        if not valid.any():
            return float("nan")
        pred = self._labels(probs[valid])
        weight = None if sample_weight is None else sample_weight[valid]
        if self.n_tasks_ == 1:
            if weight is not None and not weight.any():  # all of it weighing 0: no score, as the regressors say
                return float("nan")
            return float(accuracy_score(y[valid], pred, sample_weight=weight))
        y = np.asarray(y, dtype=np.float64)[valid]
        weight = np.ones(len(y)) if weight is None else weight
        accuracies = [np.average(pred[seen, j] == y[seen, j], weights=weight[seen])
                      for j in range(y.shape[1]) if weight[seen := ~np.isnan(y[:, j])].sum() > 0]
        return float(np.mean(accuracies)) if accuracies else float("nan")

    @classmethod
    def _fitted_metadata_keys(cls) -> set:
        return super()._fitted_metadata_keys() | {"classes_", "classes_dtype", "n_tasks_"}

    def _fitted_metadata(self):
        meta = super()._fitted_metadata()
        # the labels' dtype too: JSON keeps values only (object strings came back as "<U", int8 as
        # int64); dates and durations as their integer counts of the dtype's unit (tolist() gives
        # datetime.date, which JSON cannot hold, for a day's unit)
        classes = self.classes_.view(np.int64) if self.classes_.dtype.kind in "mM" else self.classes_
        meta.update(classes_=classes, classes_dtype=self.classes_.dtype.str, n_tasks_=self.n_tasks_)
        return meta

    def _restore_fitted_metadata(self, meta):
        meta = dict(meta)
        dtype = meta.pop("classes_dtype", None)  # (None: saved before it was kept)
        super()._restore_fitted_metadata(meta)
        if dtype is not None:
            self.classes_ = np.asarray(meta["classes_"], dtype=np.dtype(dtype))
        if self.n_tasks_ == 1:
            self._label_encoder = LabelEncoder().fit(self.classes_)
        else:  # the convention of this version (models saved before hold [0, 1])
            self.classes_ = np.arange(self.n_tasks_)

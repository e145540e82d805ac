"""The masked scorers (gmnet_sklearn.metrics): missing labels left out task by task, as the
estimators' own score, where scikit-learn's string scorers give NaN."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, KFold

from gmnet_sklearn import GMNetClassifier, GMNetRegressor
from gmnet_sklearn.metrics import masked_rmse_scorer, masked_roc_auc_scorer

from ._smiles import SMILES, class_target, regression_target

SMALL = dict(d_model=16, n_layers=1, n_heads=2, k=3, L=1, max_epochs=1, random_state=0, descriptors=False,
             fingerprint=False, forest=False)


class Fixed:
    """An estimator that answers what it is given (the scorers' arithmetic alone)."""

    def __init__(self, pred=None, proba=None, classes=(0, 1)):
        self.pred, self.proba, self.classes_ = pred, proba, np.asarray(classes)

    def predict(self, X):
        return self.pred

    def predict_proba(self, X):
        return self.proba


def test_the_arithmetic_leaves_out_missing_labels_and_nan_predictions():
    y = np.array([[1.0, np.nan], [2.0, 4.0], [3.0, 5.0], [4.0, np.nan]])
    pred = np.array([[1.5, 0.0], [2.0, 3.0], [np.nan, np.nan], [4.0, 9.0]])
    expected = -np.mean([np.sqrt(np.mean([0.25, 0.0, 0.0])), 1.0])  # task 0 rows 0, 1, 3; task 1 row 1
    assert masked_rmse_scorer(Fixed(pred=pred), None, y) == pytest.approx(expected)
    labels = np.array(["b", "a", "b", "a", "b"], dtype=object)
    proba = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6], [np.nan, np.nan]])
    got = masked_roc_auc_scorer(Fixed(proba=proba, classes=["a", "b"]), None, labels)
    assert got == pytest.approx(roc_auc_score([1, 0, 1, 0], proba[:4, 1]))
    multi = np.array([[1, np.nan], [0, 1], [1, 0], [0, np.nan]], dtype=float)
    scores = np.array([[0.9, 0.5], [0.2, 0.8], [0.7, 0.1], [0.4, 0.3]])
    assert masked_roc_auc_scorer(Fixed(proba=scores, classes=[0, 1]), None, multi) == pytest.approx(
        np.mean([roc_auc_score([1, 0, 1, 0], scores[:, 0]), roc_auc_score([1, 0], scores[[1, 2], 1])]))
    with pytest.raises(ValueError, match=r"labels \['c'\] are not the estimator's classes"):
        masked_roc_auc_scorer(Fixed(proba=proba[:4], classes=["a", "b"]), None, np.array(["a", "b", "c", "a"]))


def test_a_search_on_missing_labels_scores_every_candidate():
    X = list(SMILES[:40])
    Y = np.c_[regression_target(SMILES[:40]), -regression_target(SMILES[:40])]
    Y[::4, 1] = np.nan
    plain = GridSearchCV(GMNetRegressor(**SMALL), {"k": [3, 4]}, cv=KFold(2), scoring="neg_root_mean_squared_error")
    with pytest.warns(UserWarning):  # scikit-learn's scorer meets NaN labels: every score NaN
        assert np.isnan(plain.fit(X, Y).cv_results_["mean_test_score"]).all()
    masked = GridSearchCV(GMNetRegressor(**SMALL), {"k": [3, 4]}, cv=KFold(2), scoring=masked_rmse_scorer).fit(X, Y)
    assert np.isfinite(masked.cv_results_["mean_test_score"]).all()
    c = class_target(SMILES[:40])
    labels = np.c_[c, 1 - c].astype(float)
    labels[::5, 0] = np.nan
    clf = GridSearchCV(GMNetClassifier(**SMALL), {"k": [3, 4]}, cv=KFold(2), scoring=masked_roc_auc_scorer)
    assert np.isfinite(clf.fit(X, labels).cv_results_["mean_test_score"]).all()

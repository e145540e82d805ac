"""The masked scorers (gmnet_sklearn.metrics): missing labels left out task by task, as the
estimators' own score, where scikit-learn's string scorers give NaN."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, KFold

from gmnet_sklearn import GMNetClassifier, GMNetRegressor
from gmnet_sklearn.exceptions import InvalidSmilesWarning
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
    # the rows of NaN predictions are named, as the estimators' score names them (a review)
    with pytest.warns(InvalidSmilesWarning, match=r"masked_rmse_scorer: left out 1 of 4 rows .*: rows 2$"):
        assert masked_rmse_scorer(Fixed(pred=pred), None, y) == pytest.approx(expected)
    labels = np.array(["b", "a", "b", "a", "b"], dtype=object)
    proba = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6], [np.nan, np.nan]])
    with pytest.warns(InvalidSmilesWarning, match=r"masked_roc_auc_scorer: left out 1 of 5 rows .*: rows 4$"):
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
    with pytest.warns(UserWarning, match="Scoring failed"):  # scikit-learn's scorer meets NaN labels: every score NaN
        assert np.isnan(plain.fit(X, Y).cv_results_["mean_test_score"]).all()
    masked = GridSearchCV(GMNetRegressor(**SMALL), {"k": [3, 4]}, cv=KFold(2), scoring=masked_rmse_scorer).fit(X, Y)
    assert np.isfinite(masked.cv_results_["mean_test_score"]).all()
    c = class_target(SMILES[:40])
    labels = np.c_[c, 1 - c].astype(float)
    labels[::5, 0] = np.nan
    clf = GridSearchCV(GMNetClassifier(**SMALL), {"k": [3, 4]}, cv=KFold(2), scoring=masked_roc_auc_scorer)
    assert np.isfinite(clf.fit(X, labels).cv_results_["mean_test_score"]).all()


def test_one_column_y_weights_multiclass_and_shapes():
    """A one-column y scored 0.5 (broadcast against two probability columns), a 1-D y on a
    multi-label model read the second task's probabilities, sample_weight was refused, three
    classes raised, labels such as -1 for missing gave NaN, and a y of another length was
    reshaped onto the predictions (a review)."""
    labels = np.array([1, 0, 1, 0, 1, 0])
    proba = np.array([[0.1, 0.9], [0.8, 0.2], [0.6, 0.4], [0.4, 0.6], [0.3, 0.7], [0.9, 0.1]])
    one = masked_roc_auc_scorer(Fixed(proba=proba), None, labels)
    assert one == pytest.approx(roc_auc_score(labels, proba[:, 1]))
    assert masked_roc_auc_scorer(Fixed(proba=proba), None, labels[:, None]) == one
    w = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 0.0])
    assert masked_roc_auc_scorer(Fixed(proba=proba), None, labels, sample_weight=w) == pytest.approx(
        roc_auc_score(labels[:5], proba[:5, 1], sample_weight=w[:5]))
    pred = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([1.5, 2.0, 2.0, np.nan])
    assert masked_rmse_scorer(Fixed(pred=pred), None, y, sample_weight=np.array([1.0, 1.0, 2.0, 5.0])) == pytest.approx(
        -np.sqrt(np.average([0.25, 0.0, 1.0], weights=[1.0, 1.0, 2.0])))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        masked_rmse_scorer(Fixed(pred=np.arange(4.0)), None, np.arange(4.0).reshape(2, 2))
    three = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.5, 0.3, 0.2], [0.1, 0.3, 0.6]])
    y3 = np.array(["a", "b", "c", "a", "c"])
    assert masked_roc_auc_scorer(Fixed(proba=three, classes=["a", "b", "c"]), None, y3) == pytest.approx(
        roc_auc_score(y3, three, multi_class="ovr"))
    multi = Fixed(proba=proba)
    multi.n_tasks_ = 2  # a two-task multi-label model: classes_ [0, 1] as a binary one's
    with pytest.raises(ValueError, match=r"y has 1 target column\(s\); the model was fitted on 2"):
        masked_roc_auc_scorer(multi, None, labels)
    with pytest.raises(ValueError, match=r"masked_roc_auc_scorer: y: multi-label targets must be 0, 1 or NaN "
                                         r"\(a missing label\); other values at rows \[0, 1, 2, 3, 4, 5\]"):
        masked_roc_auc_scorer(multi, None, np.c_[labels, -np.ones(6)])
    # the rows that are not numbers named, as the estimators' score names them (numpy's "could not
    # convert string to float" named none)
    with pytest.raises(ValueError, match=r"masked_rmse_scorer: y: regression targets must be numeric; not a "
                                         r"number at rows \[2\] 'n/a'"):
        masked_rmse_scorer(Fixed(pred=np.arange(4.0)), None, np.array(["1", "2", "n/a", "4"], dtype=object))
    with pytest.raises(ValueError, match=r"masked_rmse_scorer: y must be 1-D or 2-D"):
        masked_rmse_scorer(Fixed(pred=np.arange(4.0)), None, np.zeros((4, 1, 1)))


def test_sample_weight_is_routed_as_to_scikit_learns_scorers():
    import sklearn
    from sklearn.model_selection import cross_validate

    import copy

    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    w = np.linspace(0.1, 3.0, 40)
    asked = copy.copy(masked_rmse_scorer).set_score_request(sample_weight=True)  # (in place, as scikit-learn's)
    assert masked_rmse_scorer.get_metadata_routing().score.requests == {"sample_weight": None}
    assert asked.get_metadata_routing().score.requests == {"sample_weight": True}
    with sklearn.config_context(enable_metadata_routing=True):
        est = GMNetRegressor(**SMALL).set_fit_request(X_valid=False, y_valid=False)
        weighted = cross_validate(est, X, y, cv=KFold(2), scoring=asked, params={"sample_weight": w})["test_score"]
    plain = cross_validate(GMNetRegressor(**SMALL), X, y, cv=KFold(2), scoring=masked_rmse_scorer)["test_score"]
    assert np.isfinite(weighted).all() and not np.allclose(weighted, plain)  # the weights counted


def test_the_scorers_see_through_a_search_and_read_nullable_labels():
    """Through a fitted search a two-task model's 1-D y took the one-task path (the search has no
    n_tasks_), and pd.NA labels were refused as "not 0, 1 or NaN" (a review)."""
    import pandas as pd

    c = class_target(SMILES[:40])
    Y = np.c_[c, 1 - c].astype(float)
    search = GridSearchCV(GMNetClassifier(**SMALL), {"k": [3]}, cv=KFold(2)).fit(list(SMILES[:40]), Y)
    with pytest.raises(ValueError, match=r"y has 1 target column\(s\); the model was fitted on 2"):
        masked_roc_auc_scorer(search, list(SMILES[:40]), c)
    nullable = pd.DataFrame({"a": pd.array(c, dtype="Int64"), "b": pd.array(1 - c, dtype="Int64")})
    nullable.iloc[::7, 0] = pd.NA
    with_nan = Y.copy()
    with_nan[::7, 0] = np.nan
    assert masked_roc_auc_scorer(search, list(SMILES[:40]), nullable) == masked_roc_auc_scorer(
        search, list(SMILES[:40]), with_nan)


def test_scikit_learns_multi_output_classifiers_give_one_probability_array_a_task():
    """A review: a forest's predict_proba on a multi-label y is a list of (n, 2) arrays, which the
    scorer stacked task-first and then failed on ("inconsistent numbers of samples")."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline

    from gmnet_sklearn.fingerprints import MorganFingerprint

    X = SMILES[:50]
    Y = np.c_[class_target(X), np.arange(50) % 3 == 0, np.zeros(50)].astype(int)  # the last task: all 0
    clf = make_pipeline(MorganFingerprint(n_bits=64), RandomForestClassifier(5, random_state=0)).fit(X, Y)
    proba = clf.predict_proba(X)
    assert isinstance(proba, list)
    expected = np.mean([roc_auc_score(Y[:, j], proba[j][:, 1]) for j in range(2)])  # (task 2 has one class)
    assert masked_roc_auc_scorer(clf, X, Y) == pytest.approx(expected)
    Y[0, 0] = 2  # a class that is no label of a multi-label y
    clf.fit(X, Y)
    with pytest.raises(ValueError, match=r"multi-label targets must be 0, 1 or NaN .*other values at rows \[0\]"):
        masked_roc_auc_scorer(clf, X, Y)

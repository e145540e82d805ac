"""forest=True: a random forest on the molecule features beside the network, blended at the weight
the validation split picks (gmnet_sklearn/forest.py)."""

import pickle
from fractions import Fraction

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, PredefinedSplit

from gmnet_sklearn import ChemBERTaClassifier, GMNetClassifier, GMNetRegressor
from gmnet_sklearn.estimators import load_model
from gmnet_sklearn.estimators.metrics import masked_rmse
from gmnet_sklearn.forest import BLEND_GRID, FALLBACK_WEIGHT, MoleculeForest, choose_blend_weight

from ._smiles import SMILES, class_target, regression_target

TINY = dict(d_model=16, n_layers=1, n_heads=2, k=3, L=1, batch_size=16, max_epochs=3, lr=1e-3, random_state=0,
            device="cpu")
X = list(SMILES)
Y = regression_target(SMILES)


def test_blend_weight_is_the_best_on_validation_and_the_smallest_on_ties():
    y = np.linspace(-1, 1, 20)[:, None]
    noise = np.random.RandomState(0).normal(0, 1, y.shape)
    score = lambda pred: -masked_rmse(y, pred)  # noqa: E731
    assert choose_blend_weight(y + noise, y, score) == 1.0  # a perfect forest
    assert choose_blend_weight(y, y + noise, score) == 0.0  # a perfect network
    # errors of opposite sign cancel in the average
    assert choose_blend_weight(y + 0.3, y - 0.3, score) == 0.5
    # every blend the same: the network alone
    assert choose_blend_weight(y, y, score) == 0.0
    assert choose_blend_weight(y, y, lambda pred: float("nan")) == FALLBACK_WEIGHT


def test_the_network_trains_as_without_the_forest_and_predictions_are_the_blend():
    plain = GMNetRegressor(**TINY, forest=False).fit(X, Y)
    est = GMNetRegressor(**TINY, forest=True).fit(X, Y)
    assert est.forest_weight_ in BLEND_GRID
    w = est.forest_weight_
    features = est._molecule_features(X)
    forest = est.forest_.predict(features)[:, 0] * est.y_scale_[0] + est.y_mean_[0]
    np.testing.assert_allclose(est.predict(X), (1 - w) * plain.predict(X) + w * forest, rtol=1e-6, atol=1e-6)
    assert plain.forest_ is None and plain.forest_weight_ == 0.0


def test_the_forest_sees_the_training_part_only_and_its_weight_comes_from_the_validation_set():
    Xv, yv = X[40:], Y[40:]
    est = GMNetRegressor(**TINY, forest=True).fit(X[:40], Y[:40], X_valid=Xv, y_valid=yv)
    tree = est.forest_.forests_[0].estimators_[0].tree_
    assert tree.weighted_n_node_samples[0] == 40  # bootstrap draws: as many as training molecules
    # the chosen weight is the one that scores best on (Xv, yv), blended in original units
    w0 = est.forest_weight_
    with_weight = {}
    for w in BLEND_GRID:
        est.forest_weight_ = w
        with_weight[w] = masked_rmse(yv, est.predict(Xv))
    assert with_weight[w0] == min(with_weight.values())
    est.forest_weight_ = w0


def test_without_validation_data_the_blend_is_the_plain_average():
    est = GMNetRegressor(**TINY, forest=True, valid_split=None).fit(X, Y)
    assert est.forest_weight_ == FALLBACK_WEIGHT


def test_classifier_blends_probabilities_binary_and_multi_label():
    y = class_target(X)
    clf = GMNetClassifier(**TINY, forest=True).fit(X, y)
    proba = clf.predict_proba(X[:7])
    assert proba.shape == (7, 2) and np.allclose(proba.sum(1), 1)
    y2 = np.stack([y, (np.arange(len(X)) % 3 == 0), np.ones(len(X))], 1).astype(float)
    y2[::5, 1] = np.nan
    multi = GMNetClassifier(**TINY, forest=True, valid_split=None).fit(X, y2)  # every row trains the forest
    p = multi.predict_proba(X[:7])
    assert p.shape == (7, 3) and ((p >= 0) & (p <= 1)).all()
    assert multi.forest_.forests_[2] == 1.0  # a task with one class: its frequency
    assert multi.forest_.forests_[1].estimators_[0].tree_.weighted_n_node_samples[0] == np.sum(~np.isnan(y2[:, 1]))


def test_chemberta_takes_the_forest_too():
    est = ChemBERTaClassifier(d_model=16, n_layers=1, n_heads=2, intermediate_size=16, batch_size=16, max_epochs=2,
                              random_state=0, device="cpu", forest=True).fit(X, class_target(X))
    assert est.predict_proba(X[:3]).shape == (3, 2)


def test_without_head_features_the_forest_reads_morgan_counts():
    est = GMNetRegressor(**TINY, forest=True, descriptors=False, fingerprint=False, valid_split=None).fit(X, Y)
    assert est.forest_.forests_[0].n_features_in_ == 2048
    assert np.isfinite(est.predict(X[:5])).all()
    with_head = GMNetRegressor(**TINY, forest=True, descriptors=False, fingerprint=True, valid_split=None).fit(X, Y)
    np.testing.assert_array_equal(  # the same features: the head's fused fingerprint is those counts
        with_head._molecule_features(X[:5]), est._forest_features(X[:5], None))


def test_save_load_pickle_clone_and_search_keep_the_forest(tmp_path):
    est = GMNetRegressor(**TINY, forest=True, valid_split=None)
    assert clone(est).get_params() == est.get_params()
    fitted = est.fit(X, Y)
    pred = fitted.predict(X[:10])
    loaded = load_model(fitted.save(tmp_path / "saved"))
    assert (tmp_path / "saved" / "forest.skops").exists()
    assert loaded.forest_weight_ == fitted.forest_weight_
    np.testing.assert_allclose(loaded.predict(X[:10]), pred, rtol=1e-6)
    np.testing.assert_allclose(pickle.loads(pickle.dumps(fitted)).predict(X[:10]), pred, rtol=1e-6)
    fold = np.r_[np.full(40, -1), np.zeros(len(X) - 40, dtype=int)]
    grid = GridSearchCV(GMNetRegressor(**{**TINY, "max_epochs": 1}), {"forest": [False, True]},
                        cv=PredefinedSplit(fold), refit=False).fit(X, Y)
    assert np.isfinite(grid.cv_results_["mean_test_score"]).all()


def test_a_forest_file_with_other_types_is_refused(tmp_path):
    import skops.io as sio

    forest = MoleculeForest("regression").fit(np.random.RandomState(0).rand(20, 4), np.arange(20.0)[:, None])
    forest.save(tmp_path / "ok.skops")
    assert MoleculeForest.load(tmp_path / "ok.skops").predict(np.zeros((2, 4))).shape == (2, 1)
    sio.dump({"forests": [Fraction(1, 3)]}, tmp_path / "bad.skops")  # a type skops does not trust by default
    with pytest.raises(ValueError, match="fractions.Fraction"):
        MoleculeForest.load(tmp_path / "bad.skops")


def test_invalid_smiles_give_nan_rows_with_the_forest_too():
    est = GMNetRegressor(**TINY, forest=True, valid_split=None, on_invalid="nan").fit(X, Y)
    pred = est.predict(["CCO", "C1CC", "c1ccccc1"])
    assert np.isnan(pred[1]) and np.isfinite(pred[[0, 2]]).all()


def test_a_model_saved_before_the_forest_existed_loads_as_a_network_alone(tmp_path):
    import json

    est = GMNetRegressor(**TINY, forest=False, valid_split=None).fit(X, Y)
    path = est.save(tmp_path / "old")
    config = json.loads((path / "config.json").read_text())
    del config["params"]["forest"], config["fitted"]["forest_weight_"]
    (path / "config.json").write_text(json.dumps(config))
    loaded = load_model(path)
    assert loaded.forest is False and loaded.forest_ is None
    np.testing.assert_allclose(loaded.predict(X[:5]), est.predict(X[:5]), rtol=1e-6)


def test_save_follows_the_fit_not_later_set_params_and_a_reused_folder_lends_no_forest(tmp_path):
    est = GMNetRegressor(**TINY, forest=True).fit(X, Y)
    expected = est.predict(X[:8])
    est.set_params(descriptors=False)  # after the fit: the saved model is still the fitted one
    np.testing.assert_allclose(load_model(est.save(tmp_path / "m")).predict(X[:8]), expected, rtol=1e-6)
    plain = GMNetRegressor(**TINY, forest=False).fit(X, Y)
    loaded = load_model(plain.save(tmp_path / "m"))  # the folder held a forest=True model's forest.skops
    assert loaded.forest_ is None and not (tmp_path / "m" / "forest.skops").exists()
    np.testing.assert_allclose(loaded.predict(X[:8]), plain.predict(X[:8]), rtol=1e-6)


def test_decision_function_stays_finite_where_the_blend_says_0_or_1():
    from sklearn.metrics import get_scorer

    y = class_target(SMILES)
    clf = GMNetClassifier(**TINY, forest=True).fit(X, y)
    clf.forest_weight_ = 1.0  # the forest alone: unanimous trees give probabilities of exactly 0 or 1
    proba = clf.predict_proba(X)
    assert ((proba == 0) | (proba == 1)).any()
    scores = clf.decision_function(X)
    assert np.isfinite(scores).all()
    assert np.all(np.diff(scores[np.argsort(proba[:, 1], kind="stable")]) >= 0)  # the probabilities' order
    assert np.isfinite(get_scorer("roc_auc")(clf, X, y))


def test_forest_seeds_near_2_to_the_32_and_threads_of_the_predicting_call():
    features = np.random.RandomState(0).normal(size=(30, 4))
    y = np.random.RandomState(1).normal(size=(30, 2))
    forest = MoleculeForest("regression", random_state=2**32 - 1).fit(features, y)  # task 1: seed 0
    assert [f.random_state for f in forest.forests_] == [2**32 - 1, 0]
    est = GMNetRegressor(**TINY, forest=True, n_jobs=2).fit(X, Y)
    est.set_params(n_jobs=1).predict(X[:4])
    assert all(f.n_jobs == 1 for f in est.forest_.forests_)  # the predicting call's threads
    # a few rows: one thread (a pool costs more than the trees); more threads as the rows grow
    from gmnet_sklearn.forest import ROWS_PER_THREAD

    for rows, jobs in ((1, 1), (2 * ROWS_PER_THREAD - 1, 1), (2 * ROWS_PER_THREAD, 2), (10 * ROWS_PER_THREAD, 2)):
        expected = forest.predict(np.zeros((rows, 4)), n_jobs=1)
        np.testing.assert_allclose(forest.predict(np.zeros((rows, 4)), n_jobs=2), expected, rtol=1e-12)
        assert [f.n_jobs for f in forest.forests_] == [jobs, jobs]


def test_network_alone_leaves_an_unfitted_estimator_unfitted():
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from gmnet_sklearn.forest import network_alone

    est = GMNetRegressor()
    with network_alone(est):
        pass
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


def test_blend_weight_predicts_at_another_weight_and_restores_the_fitted_one():
    from gmnet_sklearn.forest import blend_weight, network_alone

    est = GMNetRegressor(**TINY, forest=True).fit(X, Y)
    fitted = est.forest_weight_
    features = est._molecule_features(X)
    forest = est.forest_.predict(features)[:, 0] * est.y_scale_[0] + est.y_mean_[0]
    with network_alone(est):
        network = est.predict(X)
    for w in (0.0, 0.3, 1.0):
        with blend_weight(est, w):
            np.testing.assert_allclose(est.predict(X), (1 - w) * network + w * forest, rtol=1e-6, atol=1e-6)
    assert est.forest_weight_ == fitted


def test_blend_weight_keeps_a_fit_made_inside_it_and_ends_out_of_order_blocks_on_the_fitted_weight(monkeypatch):
    """A review: a fit inside the block had its chosen weight replaced by the earlier fit's (or, on
    an unfitted model, deleted: predict failed); blocks left out of order (threads) ended on a
    weight of their own instead of the fitted one."""
    from gmnet_sklearn import forest as F

    est = GMNetRegressor(**TINY, forest=True).fit(X[:40], Y[:40])
    fitted = est.forest_weight_
    assert fitted not in (0.3, 0.5)
    a, b = F.blend_weight(est, 0.3), F.blend_weight(est, 0.5)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert est.forest_weight_ == 0.5  # b is still open
    b.__exit__(None, None, None)
    assert est.forest_weight_ == fitted and not F._BLENDS
    from gmnet_sklearn.estimators import _base

    monkeypatch.setattr(_base, "choose_blend_weight", lambda *a, **k: 0.65)  # (off the grid: a weight no fit chose)
    with F.network_alone(est):
        est.fit(X[:40], Y[:40])
        assert est.forest_weight_ == 0.65
    assert est.forest_weight_ == 0.65  # the new fit's, not the old one's
    # a block opened on the new model while one on the old is still open ends on the new model's own
    monkeypatch.setattr(_base, "choose_blend_weight", lambda *a, **k: 0.85)
    with F.network_alone(est):
        est.fit(X[:40], Y[:40])
        with F.blend_weight(est, 0.5):
            assert est.forest_weight_ == 0.5
        assert est.forest_weight_ == 0.85
    assert est.forest_weight_ == 0.85 and not F._BLENDS
    unfitted = GMNetRegressor(**TINY, forest=True)
    with F.network_alone(unfitted):
        unfitted.fit(X[:40], Y[:40])
    assert unfitted.forest_weight_ == 0.85 and unfitted.predict(X[:3]).shape == (3,)


def test_blend_weight_refuses_a_weight_it_cannot_give():
    """A model without a forest is the network at any weight: only 0 (network_alone) is accepted;
    a weight outside [0, 1] is no blend."""
    from gmnet_sklearn.forest import blend_weight, network_alone

    est = GMNetRegressor(**TINY, forest=False).fit(X, Y)
    with pytest.raises(ValueError, match="has no forest to blend"):
        with blend_weight(est, 0.5):
            pass
    with network_alone(est):
        pred = est.predict(X)
    np.testing.assert_array_equal(pred, est.predict(X))
    with pytest.raises(ValueError, match=r"weight must be a number in \[0, 1\], got 1.5"):
        with blend_weight(GMNetRegressor(**TINY, forest=True), 1.5):
            pass


def test_blend_weight_acts_on_the_model_inside_a_pipeline_or_a_search():
    """On a Pipeline, network_alone set forest_weight_ on the Pipeline, which nothing reads: the
    blend stayed (a review); anything else is refused."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from gmnet_sklearn.forest import blend_weight, network_alone

    est = GMNetRegressor(**TINY, forest=True).fit(X, Y)
    with network_alone(est):
        network = est.predict(X)
    pipe = make_pipeline(FunctionTransformer(), est)
    with network_alone(pipe) as given:
        assert given is pipe
        np.testing.assert_array_equal(pipe.predict(X), network)
    np.testing.assert_array_equal(pipe.predict(X), est.predict(X))
    with pytest.raises(TypeError, match="acts on a GMNet or ChemBERTa estimator, not a FunctionTransformer"):
        with blend_weight(FunctionTransformer(), 0.0):
            pass
    with pytest.raises(ValueError, match="weight must be a number"):
        with blend_weight(est, "0.5"):
            pass


def test_blend_at_the_ends_is_one_side_alone_even_where_the_other_is_not_finite():
    """Found in review: 0 * NaN is NaN, so weight 1 was not the forest alone for a network that gave
    non-finite outputs, and the weight choice fell back to 0.5."""
    import numpy as np

    from gmnet_sklearn.forest import blend, choose_blend_weight

    network, forest = np.array([[np.nan], [np.inf]]), np.array([[0.3], [0.7]])
    np.testing.assert_array_equal(blend(network, forest, 1.0), forest)
    np.testing.assert_array_equal(blend(forest, network, 0.0), forest)
    assert blend(network[None], forest, 1.0).shape == (1, 2, 1)
    y = np.array([[0.3], [0.7]])
    assert choose_blend_weight(network, forest, lambda p: -np.sqrt(np.mean((p - y) ** 2))) == 1.0


def test_a_forest_names_what_is_wrong_with_its_y():
    """MoleculeForest (public) met string y, an empty task, a misspelt kind or a multi-label task
    without the value 1 with numpy's or scikit-learn's errors (a review)."""
    X = np.random.RandomState(0).rand(6, 3)
    with pytest.raises(ValueError, match="kind must be 'regression' or 'classification', got 'Regression'"):
        MoleculeForest("Regression").fit(X, np.arange(6.0))
    with pytest.raises(ValueError, match=r"y: regression targets must be numbers \(NaN: a missing label\); not a number at rows \[0\] 'a'"):
        MoleculeForest("regression").fit(X, np.array(list("abcdef")))
    with pytest.raises(ValueError, match=r"target column\(s\) \[1\] have no observed values"):
        MoleculeForest("regression").fit(X, np.c_[np.arange(6.0), np.full(6, np.nan)])
    with pytest.raises(ValueError, match=r"y: multi-label targets must be 0, 1 or NaN \(a missing label\); other values at rows \[1, 3, 5\]"):
        MoleculeForest("classification", multi_label=True).fit(X, np.c_[[0, 2, 0, 2, 0, 2], np.zeros(6)])
    with pytest.raises(ValueError, match="1-D class indices"):
        MoleculeForest("classification").fit(X, np.array(["a", "b"] * 3))
    with pytest.raises(ValueError, match="y has 5 rows for 6 rows of features"):
        MoleculeForest("regression").fit(X, np.arange(5.0))
    # (a review: no rows was "y must be numbers ... float64"; predict before fit an AttributeError;
    # random_state=None a TypeError)
    with pytest.raises(ValueError, match=r"features must be a 2-D array with at least one row, got shape \(0, 3\)"):
        MoleculeForest("regression").fit(np.zeros((0, 3)), np.zeros(0))
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted yet"):
        MoleculeForest("regression").predict(X)
    assert MoleculeForest("regression", random_state=None).fit(X, np.arange(6.0)).predict(X).shape == (6, 1)

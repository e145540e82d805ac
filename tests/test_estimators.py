"""The scikit-learn estimators: fit/predict, the sklearn ecosystem, persistence, bad input."""

import json
import os
import re
import pickle

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from skorch.callbacks import Callback
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from gmnet_sklearn import ChemBERTaClassifier, ChemBERTaRegressor, GMNetClassifier, GMNetRegressor
from gmnet_sklearn.estimators import load_model
from gmnet_sklearn.tokenizer import SmilesTokenizer

from ._smiles import SMILES, class_target, regression_target

TINY = dict(d_model=16, n_layers=1, n_heads=2, k=3, L=1, batch_size=16, max_epochs=2, lr=1e-3, random_state=0)
TINY_CB = dict(d_model=16, n_layers=1, n_heads=2, intermediate_size=16, batch_size=16, max_epochs=2, lr=1e-3, random_state=0)
X = SMILES
Y = regression_target(SMILES)
C = class_target(SMILES)


@pytest.fixture(scope="module")
def fitted_regressor():
    return GMNetRegressor(**TINY).fit(X, Y)


@pytest.fixture(scope="module")
def fitted_classifier():
    return GMNetClassifier(**TINY).fit(X, np.where(C == 1, "aromatic", "aliphatic"))


# ---- basics ---------------------------------------------------------------------------------


def test_init_stores_params_unchanged_and_clone():
    cb = []
    est = GMNetRegressor(k=6, L=2, callbacks=cb, vocab_file=None)
    assert est.get_params()["k"] == 6 and est.callbacks is cb
    est.set_params(k=10, L=4, lr=1e-4)
    assert (est.k, est.L, est.lr) == (10, 4, 1e-4)
    c = clone(est)
    assert c.get_params() == {**est.get_params(), "callbacks": c.callbacks}
    assert not hasattr(c, "net_")
    # Invalid values are only rejected in fit (sklearn convention).
    bad = GMNetRegressor(lr=-1)
    with pytest.raises(ValueError, match="'lr' parameter of GMNetRegressor must be a float in the range \\(0.0, inf\\)"):
        bad.fit(X, Y)


def test_regressor_fit_predict(fitted_regressor):
    est = fitted_regressor
    pred = est.predict(X)
    assert pred.shape == (len(X),) and np.isfinite(pred).all()
    assert est.n_outputs_ == 1 and est.net_ is not None
    # The target statistics come from the train part of the internal scaffold split only.
    train, valid = est._internal_split(X, seed=0)
    assert est.n_train_ == len(train) and est.n_valid_ == len(valid) > 0
    assert est.y_mean_[0] == pytest.approx(Y[train].mean(), rel=1e-12)
    assert est.y_scale_[0] == pytest.approx(Y[train].std(), rel=1e-12)
    assert abs(Y[train].mean() - Y.mean()) > 1e-6  # so the check above tells the two apart
    scores = [row["valid_rmse"] for row in est.history_]
    assert len(scores) == 2 and est.best_epoch_ == int(np.argmin(scores)) + 1
    assert est.score(X, Y) == pytest.approx(r2_score(Y, pred))
    # y of another length than X is an error, not predictions paired with the wrong rows
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        est.score(X, Y[: len(X) // 2])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        est.score(X, Y, sample_weight=np.ones(3))


@pytest.mark.parametrize("cls, params", [(GMNetRegressor, TINY), (ChemBERTaRegressor, TINY_CB)])
def test_regressor_normalize_y_false_trains_on_y_as_given(cls, params):
    """normalize_y=False: the loss and the validation RMSE in y's own units (the paper's Clearance);
    predictions in y's units either way, and the run differs from the standardised one."""
    Y2 = Y * 50 + 300  # far from mean 0, sd 1: a standardised and a raw fit cannot coincide
    raw = cls(**params, normalize_y=False).fit(X, Y2)
    np.testing.assert_array_equal(raw.y_mean_, [0.0])
    np.testing.assert_array_equal(raw.y_scale_, [1.0])
    pred = raw.predict(X)
    assert pred.shape == (len(X),) and np.isfinite(pred).all()
    # the selection metric is the RMSE in y's units: the first epochs' outputs near 0 sit ~300 off
    assert raw.history_[0]["valid_rmse"] > 100
    z = cls(**params).fit(X, Y2)
    assert z.y_mean_[0] == pytest.approx(Y2[z._internal_split(X, seed=0)[0]].mean(), rel=1e-12)
    assert z.history_[0]["valid_rmse"] < 100 and not np.allclose(z.predict(X), pred)
    with pytest.raises(ValueError, match="'normalize_y' parameter of .* must be an instance of 'bool'"):
        cls(**params, normalize_y="no").fit(X, Y2)


@pytest.mark.parametrize("regressor, classifier", [(GMNetRegressor, GMNetClassifier),
                                                   (ChemBERTaRegressor, ChemBERTaClassifier)])
def test_regressors_take_their_familys_parameters_and_normalize_y(regressor, classifier):
    """The regressors spell out their family's signature (scikit-learn reads parameters from it):
    the same names and defaults as the classifier's, and normalize_y."""
    import inspect

    def defaults(cls):
        return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items() if k != "self"}

    assert defaults(regressor) == {**defaults(classifier), "normalize_y": True}
    assert "normalize_y" not in classifier().get_params()
    assert regressor.__doc__.count("normalize_y :") == 1


def test_model_pickled_before_normalize_y_existed_unpickles_with_its_default(fitted_regressor):
    state = dict(fitted_regressor.__getstate__())  # a copy: scikit-learn's is the fixture's own __dict__
    del state["normalize_y"]
    old = GMNetRegressor.__new__(GMNetRegressor)
    old.__setstate__(state)
    assert old.get_params()["normalize_y"] is True and clone(old).normalize_y is True
    np.testing.assert_array_equal(old.predict(X[:4]), fitted_regressor.predict(X[:4]))


def test_adam_is_fused_where_torch_has_it(fitted_regressor):
    import torch

    from gmnet_sklearn.estimators._base import adam_options

    version = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
    assert adam_options("cpu") == ({"fused": True} if version >= (2, 4) else {})
    assert adam_options("cuda") == {"fused": True} and adam_options("mps") == {}
    opt = fitted_regressor.net_.optimizer_
    assert isinstance(opt, torch.optim.Adam) and opt.defaults["lr"] == fitted_regressor.lr
    assert bool(opt.defaults.get("fused")) == (version >= (2, 4))
    assert not opt.state  # the moments serve no predict: not kept in memory or in a pickle


def test_predictions_in_original_units():
    y = Y * 1000 + 5000
    est = GMNetRegressor(**{**TINY, "max_epochs": 1}).fit(X, y)
    pred = est.predict(X)
    # Standardised inside, returned in the units of y: y is an affine map of Y, so the model
    # trains on the same z-scores and its predictions are the same map of Y's model's.
    base = GMNetRegressor(**{**TINY, "max_epochs": 1}).fit(X, Y).predict(X)
    np.testing.assert_allclose(pred, base * 1000 + 5000, rtol=0, atol=1e-3 * y.std())
    assert abs(pred.mean() - y.mean()) < 2 * y.std() and pred.std() > 0.01 * y.std()


def test_multi_output_regression_with_missing_targets():
    Y2 = np.stack([Y, -Y], 1)
    Y2[::3, 1] = np.nan
    est = GMNetRegressor(**TINY).fit(pd.Series(X), Y2)
    pred = est.predict(np.array(X, dtype=object))
    assert pred.shape == (len(X), 2) and np.isfinite(pred).all()
    with pytest.raises(ValueError, match="no observed values"):
        GMNetRegressor(**TINY).fit(X, np.stack([Y, np.full(len(Y), np.nan)], 1))
    # observed only in rows an internal split would hold out: they stay in training
    held_out = GMNetRegressor(**TINY, valid_split="random")._internal_split(X, 0)[1]
    sparse = np.full(len(Y), np.nan)
    sparse[held_out] = 1.0
    est = GMNetRegressor(**TINY, valid_split="random").fit(X, np.stack([Y, sparse], 1))
    assert est.n_train_ == len(X) and est.n_valid_ == 0  # (every held-out row held a label of the task)
    with pytest.raises(ValueError, match=r"among the training rows \(labels in y_valid alone do not count\)"):
        GMNetRegressor(**TINY).fit(X[:20], np.stack([Y[:20], np.full(20, np.nan)], 1), X_valid=X[20:],
                                   y_valid=np.stack([Y[20:], Y[20:]], 1))


def test_classifier_string_labels(fitted_classifier):
    est = fitted_classifier
    assert list(est.classes_) == ["aliphatic", "aromatic"]
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 2) and np.allclose(proba.sum(1), 1)
    labels = np.where(C == 1, "aromatic", "aliphatic")
    pred = est.predict(X)
    np.testing.assert_array_equal(pred, est.classes_[proba.argmax(1)])
    assert est.score(X, labels) == pytest.approx(np.mean(pred == labels))


def test_multiclass_and_multilabel():
    y3 = np.array([i % 3 for i in range(len(X))])
    est = GMNetClassifier(**TINY).fit(X, y3)
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 3)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=0, atol=1e-6)  # a softmax, not three sigmoids
    np.testing.assert_array_equal(est.predict(X), est.classes_[proba.argmax(1)])
    scores = est.decision_function(X)
    assert scores.shape == (len(X), 3)
    np.testing.assert_array_equal(scores.argmax(1), proba.argmax(1))
    Ym = np.stack([C, 1 - C, C], 1).astype(float)
    Ym[::4, 0] = np.nan
    est = GMNetClassifier(**TINY).fit(X, Ym)
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 3) and ((proba >= 0) & (proba <= 1)).all()
    assert set(np.unique(est.predict(X))) <= {0, 1}


def test_chemberta_estimators_share_the_api():
    reg = ChemBERTaRegressor(**TINY_CB).fit(X, Y)
    assert reg.predict(X).shape == (len(X),)
    clf = ChemBERTaClassifier(**TINY_CB).fit(X, C)
    assert clf.predict_proba(X).shape == (len(X), 2)


# ---- best-epoch selection ---------------------------------------------------------------------


def test_restores_best_validation_epoch_regression():
    Xv, Yv = X[:12], Y[:12]
    # the network alone (forest=False): its predictions are the restored epoch's
    est = GMNetRegressor(**{**TINY, "max_epochs": 6, "lr": 3e-3, "forest": False, "average_epochs": 1}).fit(
        X[12:], Y[12:], X_valid=Xv, y_valid=Yv)
    scores = [row["valid_rmse"] for row in est.history_]
    rmse = np.sqrt(np.mean((est.predict(Xv) - Yv) ** 2))
    assert rmse == pytest.approx(min(scores), rel=1e-4)
    assert est.best_epoch_ == int(np.argmin(scores)) + 1
    assert est.n_valid_ == 12


def test_restores_best_validation_epoch_classification():
    from sklearn.metrics import roc_auc_score

    Xv, Cv = X[::3], C[::3]
    train = [i for i in range(len(X)) if i % 3]
    est = GMNetClassifier(**{**TINY, "max_epochs": 5, "lr": 3e-3, "average_epochs": 1}).fit(
        [X[i] for i in train], C[train], X_valid=Xv, y_valid=Cv)
    scores = [row["valid_roc_auc"] for row in est.history_]
    assert roc_auc_score(Cv, est.predict_proba(Xv)[:, 1]) == pytest.approx(max(scores), abs=1e-6)


def test_internal_scaffold_split_used_by_default():
    est = GMNetRegressor(**TINY).fit(X, Y)
    assert est.n_valid_ > 0 and est.n_train_ + est.n_valid_ == len(X)
    est = GMNetRegressor(**{**TINY, "valid_split": None}).fit(X, Y)
    assert est.n_valid_ == 0 and est.best_epoch_ == 2


# ---- the scikit-learn ecosystem -----------------------------------------------------------------


def canonical(smiles):
    from rdkit import Chem

    return [Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in smiles]


def test_pipeline_with_smiles_standardiser():
    pipe = Pipeline([("canon", FunctionTransformer(canonical)), ("model", GMNetRegressor(**TINY))])
    pipe.fit(X, Y)
    assert pipe.predict(X).shape == (len(X),)
    pipe.set_params(model__k=4)
    assert pipe.named_steps["model"].k == 4


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_grid_search_over_k_and_L(n_jobs):
    # the network alone: joblib's worker processes would fit the forest at its full 500 trees
    # (conftest's smaller forest is this process's; test_forest searches with it) and the
    # descriptors are the same in every cell. Two values each: the search changes the shapes.
    est = GMNetRegressor(**{**TINY, "max_epochs": 1, "valid_split": None, "forest": False, "descriptors": False})
    # in worker processes (each imports torch and loads the kernels) two cells show it as well as four
    param_grid = {"k": [4, 6], "L": [2, 3]} if n_jobs == 1 else {"k": [4, 6], "L": [3]}
    if n_jobs > 1:
        est.set_params(n_jobs=1)  # the README: scores equal to the sequential search's, to the bit
    grid = GridSearchCV(est, param_grid, cv=KFold(2), n_jobs=n_jobs, error_score="raise")
    grid.fit(X, Y)
    assert len(grid.cv_results_["params"]) == (4 if n_jobs == 1 else 2)
    assert np.isfinite(grid.cv_results_["mean_test_score"]).all()
    assert grid.best_estimator_.predict(X[:3]).shape == (3,)
    if n_jobs > 1:
        sequential = GridSearchCV(est, param_grid, cv=KFold(2), error_score="raise").fit(X, Y)
        for key in ("split0_test_score", "split1_test_score"):
            np.testing.assert_array_equal(grid.cv_results_[key], sequential.cv_results_[key], err_msg=key)


def test_memory_caches_the_descriptors_of_a_searchs_folds_and_changes_no_prediction(tmp_path, monkeypatch):
    """``memory``: the second candidate of a search reads each fold's descriptors from the cache; a
    fit through the cache predicts what one without it does; ``save`` leaves the cache behind."""
    import gmnet_sklearn.descriptors as D

    calls = []
    real = D._descriptor_rows
    monkeypatch.setattr(D, "_descriptor_rows", lambda s: calls.append(len(s)) or real(s))
    params = {**TINY, "max_epochs": 1, "valid_split": None, "forest": False}
    plain = GMNetRegressor(**params).fit(X, Y)
    expected, n_plain = plain.predict(X), len(calls)
    grid = GridSearchCV(GMNetRegressor(**params, memory=tmp_path / "cache"), {"k": [3, 4]}, cv=KFold(2),
                        refit=False, error_score="raise").fit(X, Y)
    assert np.isfinite(grid.cv_results_["mean_test_score"]).all()
    assert len(calls) - n_plain == 4  # each fold's training and test SMILES, for the first candidate only
    cached = GMNetRegressor(**params, memory=str(tmp_path / "cache")).fit(X, Y)
    np.testing.assert_array_equal(cached.predict(X), expected)
    n = len(calls)
    np.testing.assert_array_equal(cached.predict(X), expected)
    assert len(calls) == n
    cached.save(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "config.json").read_text())["params"]["memory"] is None
    assert clone(cached).memory == str(tmp_path / "cache")
    with pytest.raises(ValueError, match="memory"):
        GMNetRegressor(**params, memory=5).fit(X, Y)


def test_cross_val_score_classifier():
    scores = cross_val_score(GMNetClassifier(**{**TINY, "max_epochs": 1}), X, C, cv=2, scoring="roc_auc")
    assert scores.shape == (2,) and np.isfinite(scores).all()


def test_same_random_state_same_predictions():
    a = GMNetRegressor(**TINY).fit(X, Y).predict(X)
    b = GMNetRegressor(**TINY).fit(X, Y).predict(X)
    np.testing.assert_array_equal(a, b)
    c = GMNetRegressor(**{**TINY, "random_state": 1}).fit(X, Y).predict(X)
    assert not np.allclose(a, c)


def test_pickle_and_joblib_round_trip(fitted_regressor, tmp_path):
    expected = fitted_regressor.predict(X)
    path = tmp_path / "model.joblib"
    joblib.dump(fitted_regressor, path)
    np.testing.assert_array_equal(joblib.load(path).predict(X), expected)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fitted_regressor)).predict(X), expected)
    # a model pickled on CUDA comes back on the CPU where there is none: skorch moves its nets,
    # and the estimator's data device must follow them (here: a device_ the nets are not on)
    state = pickle.dumps(fitted_regressor)
    moved = pickle.loads(state)
    moved.__dict__["device_"] = "cuda:0"
    again = pickle.loads(pickle.dumps(moved))
    assert again.device_ == "cpu" and fitted_regressor.device_ == "cpu"
    np.testing.assert_array_equal(again.predict(X), expected)


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_safe_save_and_load(kind, fitted_regressor, fitted_classifier, tmp_path):
    est = fitted_regressor if kind == "regressor" else fitted_classifier
    est.save(tmp_path / "m")
    files = sorted(p.name for p in (tmp_path / "m").iterdir())
    # descriptors=True (the default) adds the descriptor scaling, stored as arrays too, and
    # forest=True (the default) the forest, in skops' format; the training history is skorch's JSON
    assert files == ["config.json", "descriptors.safetensors", "forest.skops", "history.json", "model.safetensors",
                     "vocab.txt"]
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["estimator"] == type(est).__name__ and config["params"]["k"] == 3
    loaded = load_model(tmp_path / "m")
    assert type(loaded) is type(est)
    if kind == "regressor":
        np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    else:
        np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
        assert list(loaded.classes_) == list(est.classes_)
    other = GMNetClassifier if kind == "regressor" else GMNetRegressor
    with pytest.raises(TypeError, match=rf"holds a {type(est).__name__}, not a {other.__name__}"):
        other.load(tmp_path / "m")


def test_a_saved_descriptor_scaling_names_its_descriptors_and_another_rdkit_list_is_refused(
        fitted_regressor, tmp_path, monkeypatch):
    from safetensors import safe_open

    from gmnet_sklearn import descriptors as D

    fitted_regressor.save(tmp_path / "m")
    with safe_open(str(tmp_path / "m" / "descriptors.safetensors"), framework="pt") as fh:
        assert json.loads(fh.metadata()["names"]) == D.descriptor_names()
    here = D.descriptor_names()
    # an RDKit that lists one more descriptor first: every column would be read as its neighbour
    monkeypatch.setattr(D, "descriptor_names", lambda: ["NewDescriptor", *here])
    with pytest.raises(ValueError, match=r"descriptors.safetensors was fitted on the descriptors of RDKit .* "
                                         rf"\(column 0: '{here[0]}' there, 'NewDescriptor' here\)"):
        load_model(tmp_path / "m")


def test_deepchem_vocabulary(deepchem_vocab):
    est = GMNetRegressor(**{**TINY, "vocab_file": str(deepchem_vocab)}).fit(X, Y)
    assert est.tokenizer_.vocab_size == 591
    model = est.net_.module_.model  # the Chem-GMNet inside the (default) descriptor fusion
    assert model.encoder.embedding.P.shape == (591, 3)


def test_tokenizes_each_distinct_smiles_once_per_fit(monkeypatch):
    calls = []
    original = SmilesTokenizer._encode_one

    def counting(self, smiles):
        calls.append(smiles)
        return original(self, smiles)

    monkeypatch.setattr(SmilesTokenizer, "_encode_one", counting)
    doubled = X + X
    GMNetRegressor(**{**TINY, "max_epochs": 3, "valid_split": None}).fit(doubled, np.concatenate([Y, Y]))
    assert sorted(calls) == sorted(set(X))


def test_progress_bar_when_verbose(capsys):
    GMNetRegressor(**{**TINY, "max_epochs": 1, "verbose": 1}).fit(X, Y)
    captured = capsys.readouterr()
    assert "epoch" in captured.out and "valid_rmse" in captured.out
    assert re.search(r"\d+/\d+ \[[\d:]+<[\d:?]+, +[\d.?]+ ?(it/s|s/it)\]", captured.err), captured.err  # tqdm's bar


# ---- bad input --------------------------------------------------------------------------------


def test_predict_before_fit():
    with pytest.raises(NotFittedError):
        GMNetRegressor().predict(X)


def test_invalid_smiles_named():
    bad = X[:10] + ["C1CC", "not_a_smiles"]
    with pytest.raises(ValueError) as err:
        GMNetRegressor(**TINY).fit(bad, np.zeros(len(bad)))
    assert "C1CC" in str(err.value) and "[10]" in str(err.value)


def test_bad_inputs_have_clear_errors():
    with pytest.raises(ValueError, match="empty"):
        GMNetRegressor(**TINY).fit([], [])
    with pytest.raises(TypeError, match="not a string"):
        GMNetRegressor(**TINY).fit(X[:5] + [42], np.zeros(6))
    with pytest.raises(TypeError, match="single string"):
        GMNetRegressor(**TINY).fit("CCO", [1.0])
    for unordered in (set(X[:5]), dict.fromkeys(X[:5])):  # no row order to pair with y
        with pytest.raises(TypeError, match="ordered sequence of SMILES"):
            GMNetRegressor(**TINY).fit(unordered, np.zeros(5))
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[50, 49\]"):
        GMNetRegressor(**TINY).fit(X, Y[:-1])
    with pytest.raises(ValueError, match="at least two classes.*'a'"):
        GMNetClassifier(**TINY).fit(X, ["a"] * len(X))
    with pytest.raises(ValueError, match="must not be missing"):
        GMNetClassifier(**TINY).fit(X, np.where(C == 1, 1.0, np.nan))


def test_too_long_smiles():
    long = "C" * 40
    with pytest.raises(ValueError, match=r"max_length=20"):
        GMNetRegressor(**{**TINY, "max_length": 20}).fit(X + [long], np.zeros(len(X) + 1))
    with pytest.raises(ValueError, match="exceeds what the ChemBERTa model can take"):
        ChemBERTaRegressor(**{**TINY_CB, "max_length": 600}).fit(X, Y)


def test_predict_nan_rows_for_invalid_smiles(fitted_regressor, fitted_classifier):
    batch = X[:5] + ["C1CC"] + X[5:8]
    with pytest.raises(ValueError, match="C1CC"):
        fitted_regressor.predict(batch)
    reg = clone(fitted_regressor).set_params(on_invalid="nan")
    reg.__dict__.update({k: v for k, v in fitted_regressor.__dict__.items() if k.endswith("_") or k.startswith("_")})
    pred = reg.predict(batch)
    assert np.isnan(pred[5]) and np.isfinite(np.delete(pred, 5)).all()
    np.testing.assert_allclose(np.delete(pred, 5), fitted_regressor.predict(X[:8]), rtol=1e-6)
    fitted_classifier.set_params(on_invalid="nan")
    try:
        proba = fitted_classifier.predict_proba(batch)
        labels = fitted_classifier.predict(batch)
    finally:
        fitted_classifier.set_params(on_invalid="raise")
    # The invalid row: NaN probabilities and a NaN label (object array: the classes are strings).
    assert np.isnan(proba[5]).all() and np.isfinite(np.delete(proba, 5, axis=0)).all()
    assert labels.dtype == object and isinstance(labels[5], float) and np.isnan(labels[5])
    assert set(np.delete(labels, 5)) <= {"aliphatic", "aromatic"}


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("cls,params", [(GMNetRegressor, TINY), (ChemBERTaRegressor, TINY_CB)], ids=["gmnet", "chemberta"])
def test_fit_on_cuda_then_predict_on_cpu(cls, params, tmp_path):
    # Trained on the GPU (batches gathered there, fused Adam, best epoch restored), the model
    # predicts the same on the GPU and, saved and loaded, on the CPU.
    est = cls(**params, device="cuda").fit(X, Y)
    assert est.device_ == "cuda" and next(est.net_.module_.parameters()).is_cuda
    pred = est.predict(X)
    assert np.isfinite(pred).all()
    cpu = cls.load(est.save(tmp_path / "m"), device="cpu")
    np.testing.assert_allclose(cpu.predict(X), pred, rtol=1e-4, atol=1e-5 * np.abs(pred).max())


class _RecordThreads(Callback):
    def __init__(self):
        self.seen = []

    def on_epoch_end(self, net, **kwargs):
        self.seen.append(torch.get_num_threads())


def test_n_jobs_sets_torch_threads_for_fit_and_predict_and_restores_them(monkeypatch):
    before = torch.get_num_threads()
    n = 1 if before != 1 else 2
    record = _RecordThreads()
    est = GMNetRegressor(d_model=16, n_layers=1, n_heads=2, k=3, L=1, max_epochs=2, batch_size=16, random_state=0,
                         descriptors=False, fingerprint=False, forest=False, n_jobs=n, callbacks=[record])
    est.fit(SMILES, regression_target(SMILES))
    assert record.seen == [n, n] and torch.get_num_threads() == before
    import gmnet_sklearn.estimators._base as base

    inside = []
    real = base.SmilesNetBase._member_outputs_of
    monkeypatch.setattr(base.SmilesNetBase, "_member_outputs_of",
                        lambda self, *a: inside.append(torch.get_num_threads()) or real(self, *a))
    est.predict(SMILES[:5])
    assert inside == [n] and torch.get_num_threads() == before
    with pytest.raises(ValueError, match="n_jobs"):
        GMNetRegressor(n_jobs=0).fit(SMILES, regression_target(SMILES))



# ---- edge cases found in review -----------------------------------------------------------
def test_a_fit_failing_before_training_leaves_no_checkpoint_folder(tmp_path, monkeypatch):
    """The best-epoch checkpoint folder is made with the callbacks; a failure after that and before
    training (a pretrained shape conflict, a model that cannot be built) must not leave it behind,
    once per failing candidate of a search."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=False)

    def fail(seed):
        raise RuntimeError("no model")

    monkeypatch.setattr(est, "_initialize_module", fail)
    with pytest.raises(RuntimeError, match="no model"):
        est.fit(X, Y)
    assert not list(tmp_path.glob("gmnet_ckpt_*")) and "_checkpoint_dir" not in est.__dict__


def test_a_fits_checkpoint_folder_names_its_process_and_goes_with_the_fit(tmp_path, monkeypatch):
    import os
    import tempfile

    from gmnet_sklearn.estimators import _base

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(_base.tempfile, "mkdtemp", lambda **kw: made.append(real(**kw)) or made[-1])
    GMNetRegressor(**dict(TINY, max_epochs=1)).fit(X, Y)
    assert len(made) == 1 and os.path.basename(made[0]).startswith(f"gmnet_ckpt_{os.getpid()}_")
    assert not list(tmp_path.glob("gmnet_ckpt_*"))  # (torch may leave a cache folder of its own there)


def test_a_fit_gives_the_callers_torch_random_stream_back_and_says_when_fits_share_a_process():
    from gmnet_sklearn.estimators import _base

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    GMNetRegressor(**dict(TINY, max_epochs=1)).fit(X, Y)
    assert torch.equal(torch.rand(3), expected)
    _base._ACTIVE_FITS["count"] += 1  # as while another thread's fit runs
    try:
        with pytest.warns(UserWarning, match="another fit is running in this process"):
            GMNetRegressor(**dict(TINY, max_epochs=1)).fit(X, Y)
    finally:
        _base._ACTIVE_FITS["count"] -= 1


def test_torch_threads_are_each_threads_own():
    """With torch's OpenMP backend the thread count is per thread: a fit in another thread keeps
    its own n_jobs, and each block gives back its thread's count."""
    import threading

    from gmnet_sklearn.estimators._base import torch_threads

    before = torch.get_num_threads()
    first_in, second_done = threading.Event(), threading.Event()
    seen = {}

    def first():
        with torch_threads(1):
            first_in.set()
            second_done.wait(10)
            seen["first"] = torch.get_num_threads()
        seen["first, after"] = torch.get_num_threads()

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(10)
    with torch_threads(3):
        seen["second"] = torch.get_num_threads()
    second_done.set()
    thread.join()
    assert seen["first"] == 1 and seen["second"] == 3
    assert torch.get_num_threads() == before


def test_a_row_the_scaffold_split_leaves_in_no_part_is_trained_on(monkeypatch):
    """DeepChem's split keeps a row whose scaffold RDKit cannot make in no part; the internal
    split must not drop it silently: it trains, after the split's own rows in their order."""
    import gmnet_sklearn.model_selection.scaffold as ms

    est = GMNetRegressor(**TINY)
    ref_train, ref_valid = est._internal_split(list(X), seed=0)
    lost = int(ref_train[3])
    real = ms._deepchem_split
    monkeypatch.setattr(ms, "_deepchem_split", lambda *a, **k: (
        [i for i in real(*a, **k)[0] if i != lost], *real(*a, **k)[1:]))
    train, valid = est._internal_split(list(X), seed=0)
    assert valid.tolist() == ref_valid.tolist()
    assert train.tolist() == [i for i in ref_train.tolist() if i != lost] + [lost]


def test_a_class_the_internal_split_sends_to_validation_only_is_trained_on():
    """A rare class (one row) that the internal split puts in the validation part goes back into
    the training part: the model knows every class of y."""
    from gmnet_sklearn.estimators._base import SmilesNetBase

    X = list(SMILES[:40])
    y = np.array(["a", "b"] * 20, dtype=object)
    est = GMNetClassifier(**TINY, valid_split="random")
    _, base_valid = SmilesNetBase._internal_split(est, X, 0, y)
    y[base_valid[0]] = "c"  # the one "c" sits where the plain split validates
    train, valid = est._internal_split(X, 0, y)
    assert base_valid[0] in train and base_valid[0] not in valid and sorted(np.concatenate([train, valid])) == list(range(40))
    fitted = GMNetClassifier(**TINY, valid_split="random").fit(X, y)
    assert fitted.classes_.tolist() == ["a", "b", "c"] and fitted.predict_proba(X[:3]).shape == (3, 3)


def test_classifier_takes_a_column_vector_y_and_names_its_missing_labels():
    from sklearn.exceptions import DataConversionWarning

    X, y = list(SMILES[:40]), class_target(SMILES[:40])
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        est = GMNetClassifier(**TINY).fit(X, y.reshape(-1, 1))
    assert est.n_tasks_ == 1 and est.predict(X[:4]).shape == (4,)
    y_missing = y.astype(float).reshape(-1, 1)
    y_missing[[3, 7]] = np.nan
    with pytest.raises(ValueError, match=r"one task with missing labels at rows \[3, 7\]"):
        GMNetClassifier(**TINY).fit(X, y_missing)
    with pytest.raises(ValueError, match=r"must not be missing \(rows \[3, 7\]\)"):  # float32 labels are named too
        GMNetClassifier(**TINY).fit(X, y_missing.ravel().astype(np.float32))


def test_a_failed_refit_leaves_the_earlier_fit_as_it_was():
    from sklearn.utils.validation import check_is_fitted

    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    est = GMNetRegressor(**TINY).fit(X, y)
    before, state = est.predict(X), dict(est.__dict__)
    # fails after the new vocabulary and target scaling were fitted (the bad SMILES is X_valid's)
    with pytest.raises(ValueError, match="X_valid"):
        est.fit(X + ["[Xe]"], np.append(y, 1.0) + 100, X_valid=["C(("], y_valid=[1.0])
    np.testing.assert_array_equal(est.predict(X), before)  # not the old network through a new vocabulary
    assert est.__dict__.keys() == state.keys() and all(est.__dict__[k] is state[k] for k in state)
    check_is_fitted(est)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):  # fails at the first check
        est.fit(X, y[:-1])
    np.testing.assert_array_equal(est.predict(X), before)
    # a failure in training: the earlier networks were let go (one model's memory), so unfitted
    def broken(self, *args, **kwargs):
        raise RuntimeError("out of memory")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GMNetRegressor, "_fit_member", broken)
        with pytest.raises(RuntimeError, match="out of memory"):
            est.fit(X, y)
    assert not any(name in est.__dict__ for name in ("net_", "nets_", "forest_"))
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    # a first fit that fails leaves an unfitted estimator, with nothing half-fitted on it
    fresh = GMNetRegressor(**TINY)
    with pytest.raises(ValueError, match="X_valid"):
        fresh.fit(X, y, X_valid=["C(("], y_valid=[1.0])
    assert not [k for k in fresh.__dict__ if k.endswith("_") and not k.startswith("__")]
    with pytest.raises(NotFittedError):
        check_is_fitted(fresh)


def test_training_tokens_outside_a_given_vocabulary_are_said(tmp_path, recwarn):
    from gmnet_sklearn.tokenizer import tokenize_smiles

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "C", "c", "(", ")", "1", "=", "O"]) + "\n")
    X, y = list(SMILES[:24]), regression_target(SMILES[:24])
    unknown = [t for s in X for t in tokenize_smiles(s) if t not in ("C", "c", "(", ")", "1", "=", "O")]
    assert unknown
    params = dict(TINY, max_epochs=1, valid_split=None)
    with pytest.warns(UserWarning, match=rf"{len(unknown)} of \d+ tokens of the training SMILES \(in \d+ of 24, SMILES variants included\) are "
                                         rf"not in the vocabulary of vocab_file='{vocab}' and are read as \[UNK\]"):
        GMNetRegressor(**params, vocab_file=str(vocab)).fit(X, y)
    recwarn.clear()
    GMNetRegressor(**params).fit(X, y)  # a vocabulary fitted on X has all of X's tokens
    assert not [w for w in recwarn if "[UNK]" in str(w.message)]


def test_predicting_in_chunks_gives_the_whole_inputs_answers(monkeypatch):
    """Large inputs are predicted PREDICT_CHUNK rows at a time (memory): the same answers, TTA,
    forest and ensemble included, and errors that name rows by their place in the whole input."""
    from gmnet_sklearn.estimators import _base

    X_all, y_all = list(SMILES[:40]), regression_target(SMILES[:40])
    reg = GMNetRegressor(**dict(TINY, max_epochs=1), n_estimators=2, tta=1, forest=True).fit(X_all, y_all)
    clf = GMNetClassifier(**dict(TINY, max_epochs=1)).fit(X_all, class_target(SMILES[:40]))
    whole = (reg.predict(X_all, return_std=True), clf.predict_proba(X_all))
    monkeypatch.setattr(_base, "PREDICT_CHUNK", 7)
    pieces = []
    real = GMNetRegressor._member_outputs_of
    monkeypatch.setattr(GMNetRegressor, "_member_outputs_of", lambda self, rows, *a: pieces.append(len(rows)) or real(self, rows, *a))
    chunked = (reg.predict(X_all, return_std=True), clf.predict_proba(X_all))
    assert pieces == [7, 7, 7, 7, 7, 5]
    for a, b in zip([*whole[0], whole[1]], [*chunked[0], chunked[1]]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    bad = X_all[:15] + ["C1CC("] + X_all[16:30] + ["Xx"]
    with pytest.raises(ValueError, match=r"2 of 31 SMILES are invalid:\n  \[15\] 'C1CC\(':.*\n  \[30\] 'Xx'"):
        reg.predict(bad)
    reg.set_params(on_invalid="nan")
    assert np.flatnonzero(np.isnan(reg.predict(bad))).tolist() == [15, 30]


def test_n_jobs_follows_scikit_learns_meaning_of_negative_counts():
    from joblib import effective_n_jobs

    from gmnet_sklearn.estimators._base import torch_threads

    threads = torch.get_num_threads()
    with torch_threads(-1):
        assert torch.get_num_threads() == effective_n_jobs(-1)
    assert torch.get_num_threads() == threads
    X, y = list(SMILES[:24]), regression_target(SMILES[:24])
    GMNetRegressor(**dict(TINY, max_epochs=1), n_jobs=-1).fit(X, y).predict(X[:2])
    with pytest.raises(ValueError, match="n_jobs"):
        GMNetRegressor(n_jobs=0).fit(X, y)


@pytest.mark.parametrize("Est", [GMNetRegressor, GMNetClassifier])
def test_a_target_without_columns_is_refused(Est):
    with pytest.raises(ValueError, match=r"0 target column\(s\) \(shape=\(24, 0\)\)"):
        Est(**TINY).fit(list(SMILES[:24]), np.empty((24, 0)))


def test_classifier_tags_say_multi_label_not_multiclass_multioutput():
    from sklearn.utils import get_tags

    for Est in (GMNetClassifier, ChemBERTaClassifier):
        tags = get_tags(Est())
        assert tags.classifier_tags.multi_label and not tags.target_tags.multi_output
    for Est in (GMNetRegressor, ChemBERTaRegressor):
        assert get_tags(Est()).target_tags.multi_output


def test_a_fit_whose_forest_fails_leaves_no_fitted_model(monkeypatch):
    from sklearn.utils.validation import check_is_fitted

    from gmnet_sklearn.forest import MoleculeForest

    def broken(self, features, y):
        raise MemoryError("no room for the trees")

    monkeypatch.setattr(MoleculeForest, "fit", broken)
    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    est = GMNetRegressor(**TINY, forest=True)
    with pytest.raises(MemoryError):
        est.fit(X, y)
    assert not any(hasattr(est, name) for name in ("net_", "nets_", "forest_"))
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


def test_validation_data_errors_name_the_validation_data():
    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    with pytest.raises(ValueError, match=r"y_valid has infinite values at rows \[1\]"):
        GMNetRegressor(**TINY).fit(X, y, X_valid=X[:2], y_valid=[1.0, np.inf])
    with pytest.raises(TypeError, match="^X_valid: "):  # a non-string item
        GMNetRegressor(**TINY).fit(X, y, X_valid=["CCO", 3], y_valid=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"^y_valid: single-task labels must not be missing"):
        GMNetClassifier(**TINY).fit(X, class_target(X), X_valid=X[:3], y_valid=[0, None, 1])
    with pytest.raises(ValueError, match=r"all 2 SMILES in X_valid are invalid, nothing left to select the best epoch"):
        GMNetRegressor(**TINY, on_invalid="skip").fit(X, y, X_valid=["C((", "xyz"], y_valid=[1.0, 2.0])


def test_complex_targets_are_refused_not_cut_to_their_real_part():
    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    for est in (GMNetRegressor(**TINY), GMNetClassifier(**TINY)):
        with pytest.raises(ValueError, match="Complex data not supported"):
            est.fit(X, y + 1j)


def test_score_needs_the_target_columns_the_model_was_fitted_on(fitted_regressor):
    X40, y = list(SMILES[:40]), regression_target(SMILES[:40])
    with pytest.raises(ValueError, match=r"y has 2 target column\(s\); the model was fitted on 1"):
        fitted_regressor.score(X40, np.stack([y, y], axis=1))
    three = GMNetRegressor(**{**TINY, "max_epochs": 1}).fit(X40, np.stack([y, -y, 2 * y], axis=1))
    with pytest.raises(ValueError, match=r"y has 1 target column\(s\); the model was fitted on 3"):
        three.score(X40, y)
    labels = np.stack([class_target(X40)] * 3, axis=1).astype(float)
    multi = GMNetClassifier(**{**TINY, "max_epochs": 1}).fit(X40, labels)
    with pytest.raises(ValueError, match=r"y has 2 target column\(s\); the model was fitted on 3"):
        multi.score(X40, labels[:, :2])


def test_y_valid_must_have_the_columns_of_y():
    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    y2 = np.stack([y, -y], axis=1)
    with pytest.raises(ValueError, match=r"y_valid has 1 target column\(s\) and y 2"):
        GMNetRegressor(**TINY).fit(X[:30], y2[:30], X_valid=X[30:], y_valid=y[30:])
    with pytest.raises(ValueError, match=r"y_valid has 1 target column\(s\) and y 2"):
        GMNetClassifier(**TINY).fit(X[:30], (y2[:30] > 0).astype(float), X_valid=X[30:], y_valid=(y[30:] > 0).astype(float))


def test_save_load_keeps_the_best_epoch_and_refuses_what_json_cannot_hold_before_writing(tmp_path):
    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    est = GMNetRegressor(**{**TINY, "max_epochs": 3}, device=torch.device("cpu")).fit(X, y)
    assert est.net_.train_split is None  # the fitted net holds no validation data
    old_mask = os.umask(0o022)
    try:
        folder = est.save(tmp_path / "m")
    finally:
        os.umask(old_mask)
    # every file readable as the umask lets new files be (safetensors writes its own 0600)
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in folder.iterdir()} == {f.name: "0o644" for f in folder.iterdir()}
    loaded = load_model(folder)
    assert loaded.best_epoch_ == est.best_epoch_ and loaded.resume_info_ is None
    np.testing.assert_allclose(loaded.predict(X[:5]), est.predict(X[:5]), rtol=1e-5)
    odd = GMNetRegressor(**{**TINY, "max_epochs": 1}, activation=np.tanh).fit(X, y)  # a callable: numpy in, out
    with pytest.raises(TypeError, match="cannot store ufunc in config.json"):
        odd.save(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()  # nothing half-written
    # a callable that makes torch tensors inside still fits: the constructor probe is built on the
    # meta device, the activation's own tensors are not
    GMNetRegressor(**{**TINY, "max_epochs": 1}, activation=lambda t: torch.tanh(torch.as_tensor(t)).numpy()).fit(X, y)


def test_save_keeps_the_history_with_what_callbacks_record_and_the_text_of_what_json_cannot_hold(tmp_path):
    from skorch.callbacks import Callback

    class Records(Callback):
        def __init__(self, value):
            self.value = value

        def on_epoch_end(self, net, **kwargs):
            net.history.record("extra", self.value)

    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    value = {"np": np.float32(0.5), "tensor": torch.tensor([1.0, 2.0]), "array": np.arange(2)}
    est = GMNetRegressor(**{**TINY, "max_epochs": 2}, callbacks=[Records(value)]).fit(X, y)
    loaded = load_model(est.save(tmp_path / "m"))
    assert [row["extra"] for row in loaded.history_] == [{"np": 0.5, "tensor": [1.0, 2.0], "array": [0, 1]}] * 2
    assert loaded.history_[:, "valid_rmse"] == pytest.approx(est.history_[:, "valid_rmse"])
    from datetime import date

    odd = GMNetRegressor(**{**TINY, "max_epochs": 1}, callbacks=[Records({"when": date(2026, 11, 30)})]).fit(X, y)
    with pytest.warns(UserWarning, match=r"of types \['date'\].* saved as their text"):
        odd.save(tmp_path / "odd")
    assert load_model(tmp_path / "odd").history_[-1, "extra"] == {"when": "2026-11-30"}
    # a history file config.json does not list (another version's, left in a reused folder) is not read
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    del config["histories"]
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    assert not len(load_model(tmp_path / "m").history_)


def test_randomised_smiles_past_max_length_fall_back_to_the_given_smiles():
    """'CC(C)C' has 8 tokens with [CLS]/[SEP]; some of its randomised SMILES ('C(C)(C)C') have 10."""
    X = ["CC(C)C", "CCO", "CCN", "CCC", "CCCl", "CC=O", "C#N", "CCCC", "OCCO", "NCCN", "CCCO", "CC#N"] * 2
    y = np.arange(len(X), dtype=float)
    est = GMNetRegressor(**TINY, max_length=8, augment=4, tta=4, valid_split=None, descriptors=False,
                         fingerprint=False, forest=False).fit(X, y)
    variants = est._encodable_variants(["CC(C)C"], [["C(C)(C)C", "C(C)CC"]])
    assert variants == [["CC(C)C", "C(C)CC"]]
    pred = est.predict(["CC(C)C", "CCO"])
    assert np.isfinite(pred).all()
    # predict's views: each variant, or the given SMILES where the tokenizer rejects it
    import copy

    from gmnet_sklearn.augment import randomized_smiles

    plain = copy.copy(est).set_params(tta=0)
    for i, s in enumerate(["CC(C)C", "CCO"]):
        views = est._encodable_variants([s], randomized_smiles([s], 4, est._tta_seed, per_molecule=True))[0]
        expected = np.mean([plain.predict([s])[0]] + [plain.predict([v])[0] for v in views])
        assert pred[i] == pytest.approx(expected, rel=1e-6)
    assert "CC(C)C" in est._encodable_variants(["CC(C)C"], randomized_smiles(["CC(C)C"], 4, est._tta_seed, per_molecule=True))[0]


def test_multi_output_score_leaves_out_a_task_whose_labels_all_weigh_zero():
    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    Y = np.stack([y, 2 * y], axis=1)
    est = GMNetRegressor(**TINY).fit(X, Y)
    pred = est.predict(X)
    Y_eval = Y.copy()
    Y_eval[10:, 1] = np.nan  # the second task's labels are on rows 0-9 only, which weigh 0
    weight = np.r_[np.zeros(10), np.arange(1, 31, dtype=float)]
    assert est.score(X, Y_eval, sample_weight=weight) == pytest.approx(r2_score(Y[:, 0], pred[:, 0], sample_weight=weight))
    weight[:10] = 1.0
    expected = np.mean([r2_score(Y[:, 0], pred[:, 0], sample_weight=weight),
                        r2_score(Y[:10, 1], pred[:10, 1], sample_weight=weight[:10])])
    assert est.score(X, Y_eval, sample_weight=weight) == pytest.approx(expected)


def test_multilabel_score_weights_rows_and_leaves_out_tasks_without_labels():
    X, y = list(SMILES[:40]), class_target(SMILES[:40]).astype(float)
    Y = np.stack([y, 1 - y, y], axis=1)
    est = GMNetClassifier(**TINY).fit(X, Y)
    pred = est.predict(X)
    Y_eval = Y.copy()
    Y_eval[:, 2] = np.nan  # the third task has no label here
    weight = np.arange(1, 41, dtype=float)
    expected = np.mean([np.average(pred[:, j] == Y[:, j], weights=weight) for j in range(2)])
    assert est.score(X, Y_eval, sample_weight=weight) == pytest.approx(expected)
    with pytest.raises(NotFittedError):
        GMNetClassifier(**TINY).score(X, Y)


def test_best_epoch_follows_the_selection_metric_not_a_users_scorer():
    from skorch.callbacks import EpochScoring

    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    # a user scorer whose best epoch is the first: "valid_neg_epoch" is highest at epoch 1
    user = EpochScoring(lambda net, X, y: -len(net.history), name="valid_neg_epoch", lower_is_better=False, on_train=False)
    est = GMNetRegressor(**{**TINY, "max_epochs": 4, "lr": 3e-3}, callbacks=[user]).fit(X, y)
    rmse_best = [row["epoch"] for row in est.history_ if row.get("valid_rmse_best")][-1]
    assert rmse_best > 1  # else the two answers would coincide
    assert est.best_epoch_ == rmse_best and [row["valid_neg_epoch_best"] for row in est.history_][0]


def test_save_writes_the_parameters_the_fit_ran_with_and_tta_predicts_repeat(tmp_path):
    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    drawn = GMNetRegressor(**{**TINY, "random_state": np.random.RandomState(3)}, tta=2).fit(X, y)
    np.testing.assert_array_equal(drawn.predict(X[:6]), drawn.predict(X[:6]))  # tta's seed is drawn once, at fit
    reloaded = load_model(drawn.save(tmp_path / "drawn"))  # saved with the seed the fit drew
    assert reloaded.random_state == drawn._tta_seed
    np.testing.assert_allclose(reloaded.predict(X[:6]), drawn.predict(X[:6]), rtol=1e-5)
    est = GMNetRegressor(**TINY, tta=2).fit(X, y)
    est.set_params(d_model=32, n_estimators=2)  # after fit: not what the weights are
    loaded = load_model(est.save(tmp_path / "m"))
    # get_params as set (a pickle's too); the networks as fitted
    assert (loaded.d_model, loaded.n_estimators) == (32, 2) and len(loaded.nets_) == 1
    assert (loaded._params_at_fit["d_model"], loaded._params_at_fit["n_estimators"]) == (16, 1)
    np.testing.assert_allclose(loaded.predict(X[:6]), est.predict(X[:6]), rtol=1e-5)


def test_validation_without_labels_or_without_a_finite_metric():
    with pytest.raises(ValueError, match="y_valid has no observed labels"):
        GMNetRegressor(**TINY).fit(X[:16], Y[:16], X_valid=X[16:24], y_valid=np.full(8, np.nan))
    # an internal split whose rows have no labels (sparse multi-task labels): no epoch could be
    # ranked, so the fit trains on every row without selection (found in review: it scored NaN
    # every epoch; a classifier's loss of 0 on no label restored epoch 1)
    held_out = GMNetRegressor(**TINY, valid_split="random")._internal_split(X, 0)[1]
    Y2 = np.stack([Y, -Y], 1)
    Y2[held_out] = np.nan
    with pytest.warns(UserWarning, match=rf"internal validation split's {len(held_out)} rows have no observed label"):
        est = GMNetRegressor(**TINY, valid_split="random").fit(X, Y2)
    assert "valid_loss" not in est.history_[-1] and est.n_train_ == len(X) and np.isfinite(est.predict(X)).all()
    # y_valid whose labelled rows all leave as invalid SMILES: refused after the skip, not before
    with pytest.warns(UserWarning, match="X_valid"), pytest.raises(ValueError, match="no observed labels on the rows kept"):
        GMNetRegressor(**TINY, on_invalid="skip").fit(X[:16], Y[:16], X_valid=["C1CC", "CCO"], y_valid=[1.0, np.nan])


def test_predict_follows_the_fitted_molecule_features_not_later_set_params():
    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False).fit(X, Y)
    expected = est.predict(X[:6])
    for params in ({"fingerprint": True}, {"descriptors": True}):
        est.set_params(**params)
        np.testing.assert_array_equal(est.predict(X[:6]), expected)
        est.set_params(descriptors=False, fingerprint=False)


def test_pandas_nullable_targets_mark_missing_labels():
    y = class_target(SMILES)
    y_int = pd.array(np.asarray(y == y[0], dtype=int), dtype="Int64")
    multi = pd.DataFrame({"a": y_int, "b": y_int[::-1]})
    multi.iloc[3, 1] = pd.NA
    clf = GMNetClassifier(**TINY, descriptors=False, fingerprint=False, forest=False).fit(X, multi)
    assert clf.n_tasks_ == 2
    single = pd.Series(list(y), dtype=object)
    single.iloc[5] = pd.NA  # a missing single-task label: the row is named (was: "boolean value of NA")
    with pytest.raises(ValueError, match=r"single-task labels must not be missing \(rows \[5\]\)"):
        GMNetClassifier(**TINY, descriptors=False, fingerprint=False, forest=False).fit(X, single)


def test_regression_score_leaves_out_tasks_without_labels():
    Y2 = np.stack([Y, -Y], 1)
    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=False).fit(X, Y2)
    Y2[:, 1] = np.nan
    assert est.score(X, Y2) == pytest.approx(r2_score(Y, est.predict(X)[:, 0]))
    assert np.isnan(est.score(X, np.full_like(Y2, np.nan)))


def test_a_loaded_model_keeps_what_it_was_fitted_with(tmp_path):
    X, y = list(SMILES[:40]), regression_target(SMILES[:40])
    light = dict(TINY, descriptors=False, fingerprint=True, forest=False, valid_split=None)
    vocab = GMNetRegressor(**light).fit(X, y).save(tmp_path / "first") / "vocab.txt"  # a vocabulary file to fit with
    est = GMNetRegressor(**light, vocab_file=str(vocab), tta=1).fit(X, y)
    loaded = load_model(est.save(tmp_path / "m"))
    expected = loaded.predict(X[:6])
    np.testing.assert_allclose(expected, est.predict(X[:6]), rtol=1e-5)
    # set_params after loading changes neither the model's inputs nor tta's variants, as after fit
    loaded.set_params(fingerprint=False, random_state=5)
    np.testing.assert_array_equal(loaded.predict(X[:6]), expected)
    loaded.set_params(n_estimators=2)  # save writes the model it has (was: a missing model_1 file)
    np.testing.assert_array_equal(load_model(loaded.save(tmp_path / "again")).predict(X[:6]), expected)
    # a clone of the loaded model refits as the saved fit did: the same vocabulary file
    assert loaded.vocab_file == str(vocab)
    refit = clone(load_model(tmp_path / "m")).fit(X, y)
    assert refit.tokenizer_.vocabulary_ == est.tokenizer_.vocabulary_
    np.testing.assert_array_equal(refit.predict(X[:6]), est.predict(X[:6]))


def test_score_leaves_out_rows_of_invalid_smiles_and_names_them(fitted_regressor, fitted_classifier):
    from sklearn.metrics import accuracy_score

    from gmnet_sklearn.exceptions import InvalidSmilesWarning

    batch = X[:5] + ["C1CC"] + X[5:8]
    keep = np.r_[0:5, 6:9]
    reg = clone(fitted_regressor).set_params(on_invalid="nan")
    reg.__dict__.update({k: v for k, v in fitted_regressor.__dict__.items() if k.endswith("_") or k.startswith("_")})
    y = np.r_[Y[:5], 0.0, Y[5:8]]
    with pytest.warns(InvalidSmilesWarning, match=r"left out 1 of 9 rows .*rows 5"):
        assert reg.score(batch, y) == pytest.approx(r2_score(y[keep], fitted_regressor.predict(X[:8])))
    labels = np.where(C == 1, "aromatic", "aliphatic")
    y_cls = np.concatenate([labels[:5], ["aromatic"], labels[5:8]])
    fitted_classifier.set_params(on_invalid="nan")
    try:  # single task (was: accuracy_score's "Input y_pred contains NaN")
        with pytest.warns(InvalidSmilesWarning, match="rows 5"):
            score = fitted_classifier.score(batch, y_cls)
    finally:
        fitted_classifier.set_params(on_invalid="raise")
    assert score == pytest.approx(accuracy_score(y_cls[keep], fitted_classifier.predict(X[:8])))
    # multi-label, the labels a pandas frame with missing ones (was: "float() ... not 'NAType'")
    c = pd.array(np.asarray(C[:40] == C[0], dtype=int), dtype="Int64")
    frame = pd.DataFrame({"a": c, "b": c[::-1]})
    frame.iloc[3, 1] = pd.NA
    clf = GMNetClassifier(**TINY, descriptors=False, fingerprint=False, forest=False, on_invalid="nan").fit(X[:40], frame)
    pred = clf.predict(X[:40])
    observed = frame.notna().to_numpy()
    expected = np.mean([np.mean(pred[observed[:, j], j] == frame.iloc[:, j].to_numpy()[observed[:, j]]) for j in range(2)])
    assert clf.score(X[:40], frame) == pytest.approx(expected)
    with_invalid = pd.concat([frame, frame.iloc[:1]], ignore_index=True)
    with pytest.warns(InvalidSmilesWarning, match="rows 40"):
        assert clf.score(X[:40] + ["C1CC"], with_invalid) == pytest.approx(expected)


def test_a_non_numeric_regression_target_is_named_by_its_row():
    y = list(Y[:16].astype(object))
    y[3], y[9] = "n/a", "?"
    with pytest.raises(ValueError, match=r"y: regression targets must be numeric; not a number at rows \[3\] 'n/a', \[9\] '\?'"):
        GMNetRegressor(**TINY).fit(X[:16], y)
    Y2 = np.stack([Y[:16], Y[:16]], 1).astype(object)
    Y2[5, 1] = "x"
    with pytest.raises(ValueError, match=r"not a number at rows \[5\] 'x'"):
        GMNetRegressor(**TINY).fit(X[:16], Y2)


def test_a_saved_model_predicts_as_the_one_saved_after_set_params(tmp_path):
    """Found in review: save wrote the fit's tta and on_invalid, while predict reads the current
    ones, so a model given tta=2 after its fit predicted otherwise once loaded."""
    est = GMNetRegressor(**TINY).fit(X, Y)
    est.set_params(tta=2, on_invalid="nan")
    loaded = load_model(est.save(tmp_path / "m"))
    assert (loaded.tta, loaded.on_invalid) == (2, "nan") and loaded._params_at_fit["tta"] == 0
    probe = list(X[:6]) + ["C1CC"]
    np.testing.assert_allclose(loaded.predict(probe), est.predict(probe), rtol=1e-5)
    assert np.isnan(loaded.predict(probe)[-1])
    assert json.loads((tmp_path / "m" / "config.json").read_text())["params"]["tta"] == 0  # the fit's, for a refit


def test_a_saved_model_keeps_every_parameter_set_after_its_fit_and_predicts_as_fitted(tmp_path):
    """A review: save wrote the fit's parameters but tta and on_invalid, so a loaded model's
    get_params were not the saved one's (a pickle's are)."""
    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=False).fit(X, Y)
    est.set_params(n_jobs=2, verbose=1, batch_size=256, max_epochs=7, lr=1e-3 / 2, d_model=32)
    loaded = load_model(est.save(tmp_path / "m"))
    assert loaded.get_params() == est.get_params() == pickle.loads(pickle.dumps(est)).get_params()
    assert loaded._params_at_fit["d_model"] == 16  # the shape the weights were built with
    np.testing.assert_allclose(loaded.predict(X[:6]), est.predict(X[:6]), rtol=1e-5)


def test_save_replaces_its_own_folder_whole_and_refuses_other_folders(tmp_path, monkeypatch):
    """A review: save wrote over a folder in place, so one stopped half-way left one model's
    weights beside another's config (loaded without a word, predicting neither model's values); it
    wrote into a pretrained encoder's folder; a smaller ensemble left the earlier members' files."""
    import gmnet_sklearn.utils.files as files

    small = dict(TINY, descriptors=False, fingerprint=False, forest=False)
    a = GMNetRegressor(**small).fit(X, Y)
    b = GMNetRegressor(**small, n_estimators=2).fit(X, Y[::-1] * 1000)
    folder = b.save(tmp_path / "m")
    assert {"model_1.safetensors", "history_1.json"} <= {f.name for f in folder.iterdir()}
    real = files.write_atomic

    def stop_at_the_vocabulary(path, data):
        if str(path).endswith("vocab.txt"):
            raise KeyboardInterrupt
        real(path, data)

    monkeypatch.setattr(files, "write_atomic", stop_at_the_vocabulary)
    with pytest.raises(KeyboardInterrupt):
        a.save(folder)
    monkeypatch.setattr(files, "write_atomic", real)
    with pytest.raises(ValueError, match="has no config.json: a save\\(\\) into it did not finish"):
        load_model(folder)
    a.save(folder)  # the unfinished folder is save's own: written again
    assert sorted(f.name for f in folder.iterdir()) == ["config.json", "history.json", "model.safetensors", "vocab.txt"]
    np.testing.assert_array_equal(load_model(folder).predict(X[:5]), a.predict(X[:5]))
    # files of others beside a saved model are left as they are (a model card, Finder's, Jupyter's)
    (folder / "README.md").write_text("card")
    (folder / ".DS_Store").write_text("")
    a.save(folder)
    assert (folder / "README.md").read_text() == "card"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("mine")
    a.save(tmp_path / "notes")  # (a project folder, as save(".") from it)
    assert (tmp_path / "notes" / "README.md").read_text() == "mine"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "README.md").write_text("mine")
    (tmp_path / "other" / "vocab.txt").write_text("[PAD]\n")
    with pytest.raises(ValueError, match=r"has no config.json and holds files save\(\) would replace \(vocab.txt\) "
                                         r"beside others \(README.md\)"):
        a.save(tmp_path / "other")
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text(json.dumps({"format": "gmnet_sklearn.pretrained.v1"}))
    with pytest.raises(ValueError, match="holds another kind of folder .*a pretrained encoder's"):
        a.save(encoder)
    assert sorted(f.name for f in encoder.iterdir()) == ["config.json"]


def test_save_keeps_what_a_pickle_keeps_and_a_subclass_loads_itself(tmp_path):
    """A review: a RandomState set after the fit made save fail (a pickle keeps it; the loaded
    model keeps the fit's seed); a subclass's folder could not be loaded once the registry was
    read-only."""
    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=False).fit(X, Y)
    est.set_params(random_state=np.random.RandomState(0))
    assert load_model(est.save(tmp_path / "m")).random_state == 0

    class MyRegressor(GMNetRegressor):
        pass

    mine = MyRegressor(**TINY, descriptors=False, fingerprint=False, forest=False).fit(X, Y)
    loaded = MyRegressor.load(mine.save(tmp_path / "mine"))
    assert type(loaded) is MyRegressor
    np.testing.assert_allclose(loaded.predict(X[:4]), mine.predict(X[:4]), rtol=1e-5)
    with pytest.raises(ValueError, match="holds a 'MyRegressor', which this version cannot load"):
        load_model(tmp_path / "mine")


def test_a_crafted_folder_runs_no_code_and_reads_nothing_else(tmp_path):
    """A security review: config.json could name a cache folder (joblib's pickles, which predict
    read: code ran) or set any attribute through "fitted"; a FIFO hung load; a reordered
    vocab.txt loaded silently; any scikit-learn estimator loaded as "the forest"; save's temporary
    file had a name one could plant a link at."""
    import skops.io as sio
    from sklearn.dummy import DummyRegressor

    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=True).fit(X, Y)
    folder = est.save(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())

    def with_config(**changes):
        (folder / "config.json").write_text(json.dumps({**config, **changes}))

    for changes in ({"params": {**config["params"], "memory": str(tmp_path / "cache")}},
                    {"params_now": {"memory": str(tmp_path / "cache")}},
                    {"fitted": {**config["fitted"], "memory": str(tmp_path / "cache")}},
                    {"fitted": {**config["fitted"], "predict": "x"}}):
        with_config(**changes)
        with pytest.raises(ValueError, match="which save\\(\\) does not write; not loaded"):
            load_model(folder)
    with_config(params={**config["params"], "tta": -1})
    with pytest.raises(Exception, match="tta"):
        load_model(folder)
    with_config()
    tokens = (folder / "vocab.txt").read_text().splitlines()
    tokens[10], tokens[11] = tokens[11], tokens[10]
    good_vocab = (folder / "vocab.txt").read_text()
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n")
    with pytest.raises(ValueError, match="is not the vocabulary the model was saved with"):
        load_model(folder)
    (folder / "vocab.txt").write_text(good_vocab)
    # a model larger than its weights file (the shapes checked before the model takes memory), or
    # more members than files
    with_config(params={**config["params"], "d_model": 64 * config["params"]["d_model"]})
    with pytest.raises(ValueError, match=r"model.safetensors does not hold the weights of the model its config.json "
                                         r"describes: shapes: dense.bias is \(16,\) where the model has \(1024,\)"):
        load_model(folder)
    with_config(params={**config["params"], "n_layers": 10**6})  # refused before a million layers are built
    with pytest.raises(ValueError, match=r"1000000 layers, more than the file's \d+ tensors"):
        load_model(folder)
    with_config(params={**config["params"], "n_estimators": 2})
    with pytest.raises(FileNotFoundError, match=r"model_1.safetensors: no such file"):
        load_model(folder)
    with_config()
    good_forest = (folder / "forest.skops").read_bytes()
    (folder / "forest.skops").write_bytes(sio.dumps({"kind": "regression", "multi_label": False, "random_state": 0,
                                                     "n_jobs": 1, "n_classes": None,
                                                     "forests": [DummyRegressor(constant=1e6).fit([[0]], [0])]}))
    with pytest.raises(ValueError, match="is not a forest save\\(\\) wrote"):
        load_model(folder)
    (folder / "forest.skops").write_bytes(good_forest)
    np.testing.assert_allclose(load_model(folder).predict(X[:3]), est.predict(X[:3]), rtol=1e-5)
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")
    with pytest.raises(ValueError, match="config.json: not a regular file"):
        load_model(folder)
    (folder / "config.json").unlink()
    with_config()
    # links at the names a pid-based temporary file would take: nothing written through them
    target = tmp_path / "outside"
    target.write_text("theirs")
    for name in ("vocab.txt", "config.json", "history.json", "model.safetensors"):
        (folder / f".{name}.{os.getpid()}.tmp").symlink_to(target)
    est.save(folder)
    assert target.read_text() == "theirs"


def test_a_folder_saved_when_none_meant_a_fitted_vocabulary_refits_with_one(tmp_path):
    """A review: vocab_file=None meant a vocabulary fitted on the training SMILES until it came to
    mean DeepChem's; a clone of a model saved before refitted with another vocabulary."""
    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=False, vocab_file="training").fit(X, Y)
    folder = est.save(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    del config["vocabulary_digest"]  # as saved then
    config["params"]["vocab_file"] = None
    (folder / "config.json").write_text(json.dumps(config))
    loaded = load_model(folder)
    assert loaded.vocab_file == "training"
    assert clone(loaded).fit(X, Y).tokenizer_.vocab_size == est.tokenizer_.vocab_size < 591
    deepchem = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=False).fit(X, Y)
    assert load_model(deepchem.save(tmp_path / "d")).vocab_file is None  # (DeepChem's: None stays None)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "params_now": {"tta": -1}}))
    with pytest.raises(Exception, match="tta"):  # a value set after the fit is checked too
        load_model(folder)


def test_load_names_what_it_cannot_read(tmp_path):
    """A review: a cut history or forest file failed in a parser's words; a folder from before a
    parameter existed loaded with today's default (another model); a newer folder's parameter or
    estimator failed in Python's words."""
    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=True).fit(X, Y)
    folder = est.save(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    for name in ("history.json", "forest.skops"):
        good = (folder / name).read_bytes()
        (folder / name).write_bytes(good[: len(good) // 2])
        with pytest.raises(ValueError, match=re.escape(f"{folder / name}: not readable")):
            load_model(folder)
        (folder / name).write_bytes(good)
    old = {**config, "params": {k: v for k, v in config["params"].items() if k not in ("descriptors", "fingerprint")}}
    (folder / "config.json").write_text(json.dumps(old))
    loaded = load_model(folder)  # (today's defaults, True, would build a fusion head the weights lack)
    assert (loaded.descriptors, loaded.fingerprint) == (False, False)
    np.testing.assert_allclose(loaded.predict(X[:5]), est.predict(X[:5]), rtol=1e-5)
    (folder / "config.json").write_text(json.dumps({**config, "params": {**config["params"], "bogus": 1}}))
    with pytest.raises(ValueError, match=r"holds parameters \['bogus'\] that this version's GMNetRegressor does not "
                                         r"have \(saved by gmnet_sklearn"):
        load_model(folder)
    (folder / "config.json").write_text(json.dumps({**config, "estimator": "GMNetRanker"}))
    with pytest.raises(ValueError, match="holds a 'GMNetRanker', which this version cannot load"):
        load_model(folder)


def test_classifier_conventions_found_in_review(tmp_path):
    """Multi-label classes_ is one entry per label column (scikit-learn's convention: its
    probability scorers read it); the labels' dtype survives save/load; multi-label score checks its
    labels and leaves out a task whose labels all have zero weight; a random internal split keeps
    both classes in its validation part."""
    from sklearn.metrics import get_scorer

    small = dict(TINY, descriptors=False, fingerprint=False, forest=False)
    Y2 = np.stack([C, 1 - C, C], 1).astype(float)
    multi = GMNetClassifier(**small).fit(X, Y2)
    assert multi.classes_.tolist() == [0, 1, 2]
    assert np.isfinite(get_scorer("neg_log_loss")(multi, X, Y2))
    assert load_model(multi.save(tmp_path / "multi")).classes_.tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="must be 0, 1 or NaN"):
        multi.score(X, Y2 * 2)
    weight = np.ones(len(X))
    Y3 = Y2.copy()
    Y3[:, 2] = np.where(np.arange(len(X)) < 10, Y2[:, 2], np.nan)
    weight[:10] = 0  # task 2's only labels weigh nothing: left out, not a ZeroDivisionError
    assert np.isfinite(multi.score(X, Y3, sample_weight=weight))
    labels = pd.Series(np.where(C == 1, "active", "inactive"), dtype=object)
    single = GMNetClassifier(**small).fit(X, labels)
    assert single.classes_.dtype == object
    loaded = load_model(single.save(tmp_path / "single"))
    assert loaded.classes_.dtype == object and loaded.predict(X[:4]).dtype == single.predict(X[:4]).dtype
    y = np.array([1] * 3 + [0] * (len(X) - 3))
    est = GMNetClassifier(**small, valid_split="random", valid_size=0.2)
    for seed in range(8):
        train, valid = est._internal_split(list(X), seed, y)
        assert set(y[valid]) == {0, 1} and sorted([*train, *valid]) == list(range(len(X)))


def test_a_scaffold_validation_part_left_one_class_by_the_moved_rows_tries_the_balanced_order():
    """Found in review: the classes the training part lacks are moved out of the validation part
    after the base split checked that part could rank; moving them can leave it one class."""
    smiles = [f"c1ccccc1{'C' * i}" for i in range(1, 13)] + [f"C1CCCCC1{'C' * i}" for i in range(1, 7)] + \
             ["c1ccncc1", "c1ccoc1", "c1ccsc1", "C1CCOC1", "C1CCNC1", "c1ccc2ccccc2c1"]
    y = np.array(["a", "b"] * 9 + ["b", "b", "b", "b", "c", "a"], dtype=object)  # DeepChem's valid: rows 18-22
    clf = GMNetClassifier(valid_size=0.2)
    ranked = 0
    for seed in range(6):
        train, valid = clf._internal_split(smiles, seed, y)
        assert sorted([*train, *valid]) == list(range(len(smiles))) and "c" not in set(y[valid])
        ranked += len(set(y[valid])) > 1
    assert ranked  # without the retry every seed left the validation part class "b" alone


def test_warnings_of_the_fit_point_at_the_caller_and_a_task_without_labels_is_refused_by_both():
    """Found in a user's walk through the README: an empty internal split warned from the library's
    own line without saying why; the classifier trained on a task with no label at all."""
    one_scaffold = [f"c1ccccc1{'C' * i}" for i in range(1, 21)]
    with pytest.warns(UserWarning, match=r"20 molecules in 1 scaffold group") as caught:
        GMNetRegressor(**TINY, forest=False).fit(one_scaffold, np.arange(20.0))
    assert {w.filename for w in caught if "internal validation split" in str(w.message)} == {__file__}
    Y2 = np.stack([C, C], 1).astype(float)
    Y2[:, 1] = np.nan
    with pytest.raises(ValueError, match=r"target column\(s\) \[1\] have no observed labels"):
        GMNetClassifier(**TINY).fit(X, Y2)
    import gmnet_sklearn

    assert gmnet_sklearn.load_model is load_model


def test_a_stratified_random_split_never_leaves_a_class_out_of_training():
    y = np.array(["a"] * 2 + ["b"] * 18, dtype=object)
    est = GMNetClassifier(valid_split="random", valid_size=0.8)
    for seed in range(5):
        train, valid = est._internal_split(list(X[:20]), seed, y)
        assert set(y[train]) == {"a", "b"} and sorted([*train, *valid]) == list(range(20))


def test_searches_on_missing_labels_and_routed_validation_sets_as_the_readme_says():
    """Found in review: README's recipes for scikit-learn's tools on multi-label y with NaN (a
    splitter, not an integer cv; the estimator's own score) and for X_valid/y_valid (metadata
    routing), and the hint when cross_val_predict label-encoded the columns."""
    import sklearn
    from sklearn.model_selection import cross_val_predict, cross_validate

    small = dict(TINY, max_epochs=1, descriptors=False, fingerprint=False, forest=False)
    X40, c = list(SMILES[:40]), C[:40]
    Y = np.c_[c, 1 - c].astype(float)
    Y[::5, 0] = np.nan
    grid = GridSearchCV(GMNetClassifier(**small), {"k": [3, 4]}, cv=KFold(2)).fit(X40, Y)
    assert np.isfinite(grid.cv_results_["mean_test_score"]).all()
    with pytest.raises(ValueError, match="cross_val_predict.*label-encoded each column"):
        cross_val_predict(GMNetClassifier(**small), X40, Y, cv=KFold(2), method="predict_proba")
    encoded = np.where(np.isnan(Y), 2, Y).astype(int)
    for labels in (encoded, encoded.astype(object)):  # (an object array of the same labels: the hint too)
        with pytest.raises(ValueError, match="cross_val_predict.*label-encoded each column"):
            GMNetClassifier(**small).fit(X40, labels)
    y = regression_target(SMILES[:40])
    with sklearn.config_context(enable_metadata_routing=True):
        est = GMNetRegressor(**small).set_fit_request(X_valid=True, y_valid=True)
        folds = cross_validate(est, X40, y, cv=KFold(2), params={"X_valid": X40[:10], "y_valid": y[:10]},
                               return_estimator=True)
    assert [e.n_valid_ for e in folds["estimator"]] == [10, 10]  # the whole validation set in each fold
    # (README: scikit-learn cuts a fit parameter with as many rows as X to the training fold,
    # routed or not: a review found the README saying routing prevents it)
    with sklearn.config_context(enable_metadata_routing=True):
        same_length = cross_validate(est, X40, y, cv=KFold(2), params={"X_valid": X40, "y_valid": y},
                                     return_estimator=True)
    assert [e.n_valid_ for e in same_length["estimator"]] == [20, 20]


def test_predict_score_transform_and_load_leave_the_callers_torch_stream(tmp_path):
    """predict, score, the embedder and load drew from torch's global generator (a DataLoader's
    base seed; load's random initial weights): a user's seeded sequence, or a seeded fit in
    another thread, changed (a review). fit gave it back already."""
    import torch

    from gmnet_sklearn.embedder import GMNetEmbedder

    est = GMNetRegressor(d_model=16, n_layers=1, n_heads=2, k=3, L=1, max_epochs=1, random_state=0,
                         descriptors=False, fingerprint=False, forest=False).fit(SMILES[:30], Y[:30])
    est.save(tmp_path / "m")
    torch.manual_seed(0)
    expected = torch.rand(3)
    for call in (lambda: est.predict(SMILES[:3]), lambda: est.score(SMILES[:8], Y[:8]),
                 lambda: GMNetEmbedder(est, prefit=True).fit(SMILES[:3]).transform(SMILES[:3]),
                 lambda: GMNetRegressor.load(tmp_path / "m"), lambda: est.fit(SMILES[:30], Y[:30])):
        torch.manual_seed(0)
        call()
        assert torch.equal(torch.rand(3), expected)


def test_a_loaded_model_builds_no_optimizer(tmp_path):
    """load built an optimizer its nets never use (torch's first one imports torch._dynamo:
    about 1.6 s of loading a model in a fresh process); a loaded net asked to train says why not,
    and the estimator fits as ever."""
    import pickle

    from skorch.exceptions import SkorchTrainingImpossibleError

    est = GMNetRegressor(d_model=16, n_layers=1, n_heads=2, k=3, L=1, max_epochs=1, random_state=0,
                         descriptors=False, fingerprint=False, forest=False).fit(SMILES[:30], Y[:30])
    loaded = GMNetRegressor.load(est.save(tmp_path / "m"))
    assert loaded.net_.optimizer_ is None
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(loaded)).predict(SMILES[:5]), est.predict(SMILES[:5]))
    with pytest.raises(SkorchTrainingImpossibleError, match="loaded to predict and has no optimizer"):
        loaded.net_.partial_fit(None)
    loaded.fit(SMILES[:30], Y[:30])
    np.testing.assert_array_equal(loaded.predict(SMILES[:5]), est.predict(SMILES[:5]))  # the same seed, the same fit


def test_a_refit_keeps_nothing_only_the_earlier_fit_set():
    """descriptor_scaler_ (a refit without descriptors) and the label encoder (a refit on
    multi-label y) stayed on the estimator and in its pickle (a review)."""
    small = dict(d_model=16, n_layers=1, n_heads=2, k=3, L=1, max_epochs=1, random_state=0, fingerprint=False,
                 forest=False)
    est = GMNetRegressor(**small, descriptors=True).fit(SMILES[:30], Y[:30])
    assert hasattr(est, "descriptor_scaler_")
    assert not hasattr(est.set_params(descriptors=False).fit(SMILES[:30], Y[:30]), "descriptor_scaler_")
    c = (Y[:30] > np.median(Y[:30])).astype(int)
    clf = GMNetClassifier(**small, descriptors=False).fit(SMILES[:30], c)
    assert "_label_encoder" in clf.__dict__
    assert "_label_encoder" not in clf.fit(SMILES[:30], np.c_[c, 1 - c]).__dict__

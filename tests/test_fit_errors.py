"""Errors a fit, a predict or a load meets, found in a review of every message the library gives:
each comes early (before the data are prepared, where the parameters alone show it), names what
is wrong (the parameter, the row, the file), and never leaves a model that predicts NaN quietly."""

import re
import warnings

import numpy as np
import pytest
import torch
from sklearn.utils.validation import check_is_fitted

from gmnet_sklearn import GMNetClassifier, GMNetRegressor, load_model
from gmnet_sklearn.estimators import _base

from ._smiles import SMILES, regression_target

SMALL = dict(d_model=16, n_layers=1, n_heads=2, k=3, L=1, batch_size=16, max_epochs=2, lr=1e-3, random_state=0,
             descriptors=False, fingerprint=False, forest=False)
X = list(SMILES[:40])
Y = regression_target(SMILES[:40])


def test_what_only_the_model_checks_fails_before_the_data_and_keeps_the_earlier_fit(monkeypatch):
    est = GMNetRegressor(**SMALL).fit(X, Y)
    before = est.predict(X)
    prepared = []
    monkeypatch.setattr(GMNetRegressor, "_prepare_data",
                        lambda self, *a: prepared.append(1) or _base.SmilesNetBase._prepare_data(self, *a))
    for params, message in (({"d_model": 10, "n_heads": 3}, "d_model=10 is not divisible by n_heads=3"),
                            ({"activation": torch.nn.functional.gelu}, "activation=.*numpy float64 arrays")):
        with pytest.raises((ValueError, TypeError), match=message):
            est.set_params(**params).fit(X, Y)
        est.set_params(d_model=16, n_heads=2, activation="gelu")
        assert not prepared  # raised before the data were prepared
        check_is_fitted(est)
        np.testing.assert_array_equal(est.predict(X), before)
    with pytest.raises(ValueError, match="elementwise"):  # a callable that is no elementwise map
        GMNetRegressor(**{**SMALL, "activation": lambda t: t.sum()}).fit(X, Y)


@pytest.mark.parametrize("device,message", [("gpu0", "device='gpu0' is not a torch device"),
                                            ("cuda:64", "device='cuda:64'")])
def test_a_device_this_machine_lacks_is_named_before_the_data(device, message, monkeypatch):
    monkeypatch.setattr(GMNetRegressor, "_prepare_data", lambda *a: pytest.fail("the data were prepared"))
    with pytest.raises(ValueError, match=message):
        GMNetRegressor(**{**SMALL, "device": device}).fit(X, Y)


def test_a_diverged_fit_raises_instead_of_predicting_nan():
    with pytest.raises(ValueError, match=r"diverged: the network's weights are not finite .* Lower the learning rate"):
        GMNetRegressor(**{**SMALL, "lr": 1e30, "valid_split": None}).fit(X, Y)


@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_conj_shift_must_be_finite(value):
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="conj_shift"):
        GMNetRegressor(**{**SMALL, "conj_shift": value}).fit(X, Y)


def test_a_broken_model_folder_names_the_file(tmp_path):
    folder = GMNetRegressor(**SMALL).fit(X, Y).save(tmp_path / "m")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"model\.safetensors: not readable"):
        load_model(folder)
    config = folder / "config.json"
    config.write_text(config.read_text()[:50])
    with pytest.raises(ValueError, match=r"config\.json: not readable \(JSONDecodeError"):
        load_model(folder)


def test_predict_names_the_rows_whose_tokens_the_vocabulary_lacks():
    est = GMNetRegressor(**SMALL, vocab_file="training").fit(X, Y)
    assert "I" not in est.tokenizer_.vocabulary_ and "[U]" not in est.tokenizer_.vocabulary_
    from gmnet_sklearn.exceptions import UnknownTokenWarning

    with pytest.warns(UnknownTokenWarning, match=r"2 of 3 SMILES hold tokens the model's vocabulary lacks, read as "
                                         r"\[UNK\]: rows 0, 2; tokens \['I', '\[U\]'\]"):
        est.predict(["CCI", "CCO", "[U]"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.predict(X)  # known tokens: silent
    with pytest.warns(UserWarning, match=r"rows 0, 3, 6") as record, pytest.MonkeyPatch.context() as patch:
        patch.setattr(_base, "PREDICT_CHUNK", 2)  # the chunks' rows in one warning, by position in X
        est.predict(["CCI", "CCO", "CCN", "CCI", "CCO", "CCN", "CCI"])
    assert sum("[UNK]" in str(w.message) for w in record) == 1
    from gmnet_sklearn import GMNetEmbedder

    with pytest.warns(UserWarning, match=r"1 of 2 SMILES hold tokens .*: rows 1; tokens \['I'\]"):
        GMNetEmbedder(est, prefit=True).fit(X).transform(["CCO", "CCI"])


def test_the_internal_split_keeps_a_sparse_tasks_only_labels_in_training():
    est = GMNetRegressor(**SMALL)
    _, valid = est._internal_split(X, 0)
    y = np.c_[Y, np.full(len(X), np.nan)]
    y[valid[:3], 1] = [1.0, 2.0, 3.0]  # the task's labels: rows the scaffold split puts into validation
    train, valid_after = est._internal_split(X, 0, y)
    assert set(valid[:3]) <= set(train) and set(valid_after) == set(valid) - set(valid[:3])
    assert sorted([*train, *valid_after]) == list(range(len(X)))
    fitted = est.fit(X, y)  # raised "target column(s) [1] have no observed values among the training rows"
    assert fitted.n_train_ == len(train)


def test_the_classifier_names_infinite_and_blank_labels_and_scores_as_it_fits():
    labels = np.array([0.0, 1.0] * 20)
    labels[5] = np.inf
    with pytest.raises(ValueError, match=r"y has infinite labels at rows \[5\]"):
        GMNetClassifier(**SMALL).fit(X, labels)
    names = np.array(["active", "inactive"] * 20, dtype=object)
    names[[3, 8]] = ["", " "]
    with pytest.raises(ValueError, match=r"blank labels at rows \[3, 8\]"):
        GMNetClassifier(**SMALL).fit(X, names)
    clf = GMNetClassifier(**SMALL).fit(X, np.array([0, 1] * 20))
    y_nan = np.array([0.0, 1.0] * 20)
    y_nan[7] = np.nan
    with pytest.raises(ValueError, match=r"must not be missing \(rows \[7\]\)"):
        clf.score(X, y_nan)
    y = np.array([0, 1] * 20)
    assert np.isnan(clf.score(X, y, sample_weight=np.zeros(len(X))))  # as the regressor: no weight, no score
    with pytest.raises(ValueError, match="sample_weight must be 1-D"):
        clf.score(X, y, sample_weight=np.ones((len(X), 1)))
    multi = GMNetClassifier(**SMALL).fit(X, np.c_[y, 1 - y].astype(float))
    with pytest.raises(ValueError, match="NaN"):
        multi.score(X, np.c_[y, 1 - y].astype(float), sample_weight=[np.nan] + [1.0] * (len(X) - 1))


def test_a_transformers_warning_is_the_callers():
    from gmnet_sklearn.fingerprints import MorganFingerprint

    fingerprint = MorganFingerprint(on_invalid="zeros").fit(["CCO"])
    with pytest.warns(Warning) as record:  # (past scikit-learn's set_output wrapper of transform)
        fingerprint.transform(["CCO", "C((" + "C" * 200])
    assert record[0].filename == __file__
    assert len(str(record[0].message)) < 300  # the SMILES cut short, not in full


def test_a_folder_named_like_the_package_is_not_the_package():
    from gmnet_sklearn.utils import stacklevel, targets

    source = f"{stacklevel._PACKAGE_DIR}_examples/script.py"  # (a sibling folder: gmnet_sklearn_examples)
    namespace = {"warn_missing_targets": targets.warn_missing_targets}
    exec(compile("def user_fit(y):\n    return warn_missing_targets(y)\n", source, "exec"), namespace)
    with pytest.warns(Warning) as record:
        namespace["user_fit"](np.array([np.nan, 1.0]))
    assert record[0].filename == source


def test_a_callbacks_warning_is_the_callers_past_skorch():
    # RestoreBest (called by skorch at the end of training) warns when no epoch had a finite
    # validation metric: the fit that diverged
    with pytest.warns(UserWarning, match="not finite in any epoch") as record:
        with pytest.raises(ValueError, match="diverged"):
            GMNetRegressor(**{**SMALL, "lr": 1e30}).fit(X, Y)
    assert [w.filename for w in record if "not finite in any epoch" in str(w.message)] == [__file__]


def test_parameters_set_after_the_fit_are_checked_where_they_are_read(tmp_path):
    """A review: set_params(tta=-1) after a fit made predict fail inside the augmenter (without the
    parameter's name), n_jobs=0 inside torch, on_invalid="bogus" ran as "raise", and save wrote a
    folder load refuses. They are checked as fit checks them, before anything is written."""
    from sklearn.utils._param_validation import InvalidParameterError

    est = GMNetRegressor(**SMALL).fit(X, Y)
    before = est.predict(X[:5])
    for name, value in (("tta", -1), ("n_jobs", 0), ("on_invalid", "bogus")):
        est.set_params(**{name: value})
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
            est.predict(X[:5])
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
            est.save(tmp_path / name)
        assert not (tmp_path / name).exists()
        est.set_params(**{name: GMNetRegressor().get_params()[name]})
    np.testing.assert_array_equal(est.predict(X[:5]), before)


def test_callbacks_entries_that_are_no_callback_fail_before_the_data(monkeypatch):
    from skorch.callbacks import EpochTimer

    prepared = []
    monkeypatch.setattr(GMNetRegressor, "_prepare_data",
                        lambda self, *a: prepared.append(1) or _base.SmilesNetBase._prepare_data(self, *a))
    for callbacks, shown in (([1], "callbacks[0] is 1"), ([EpochTimer(), ("timer", "EpochTimer")], "callbacks[1] is ('timer', 'EpochTimer')")):
        with pytest.raises(ValueError, match=re.escape(shown) + ": not a skorch Callback"):
            GMNetRegressor(**SMALL, callbacks=callbacks).fit(X, Y)
    assert not prepared
    # skorch's forms: an instance, a class, a (name, callback) pair
    GMNetRegressor(**{**SMALL, "max_epochs": 1}, callbacks=[EpochTimer, ("timer2", EpochTimer())]).fit(X[:20], Y[:20])


def test_review_findings_on_targets_weights_and_labels():
    """y given as a number is named; a regressor's score checks sample_weight as the classifiers'
    does; True/False labels stay labels beside the NaN rows of on_invalid="nan"; the
    descriptors' n_jobs is checked where it is set."""
    from gmnet_sklearn.descriptors import RDKitDescriptors

    with pytest.raises(ValueError, match=r"y must be 1-D or 2-D, got shape \(\)"):
        GMNetRegressor(**SMALL).fit(X, 1.0)
    est = GMNetRegressor(**SMALL).fit(X, Y)
    with pytest.raises(ValueError, match="sample_weight must hold numbers: could not convert string to float: 'a'"):
        est.score(X, Y, sample_weight=["a"] * len(X))
    labels = np.asarray(Y) > np.median(Y)
    clf = GMNetClassifier(**SMALL, on_invalid="nan").fit(X, labels)
    pred = clf.predict(X[:3] + ["C1CC"])
    assert pred.dtype == object and all(isinstance(p, (bool, np.bool_)) for p in pred[:3]) and np.isnan(pred[3])
    for n_jobs in (0, "a", True):
        with pytest.raises(ValueError, match=f"n_jobs must be None or a nonzero integer.*got {n_jobs!r}"):
            RDKitDescriptors(n_jobs=n_jobs).fit(X[:5])

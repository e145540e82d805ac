"""SMILES RDKit rejects: on_invalid="skip" in fit (rows left out consistently, named in a warning,
recorded in fitted attributes), the default error, and RDKit's C++ log kept off stderr."""

import re
import warnings

import numpy as np
import pytest
from rdkit import Chem, rdBase

from gmnet_sklearn import ChemBERTaClassifier, GMNetClassifier, GMNetRegressor
from gmnet_sklearn.descriptors import RDKitDescriptors
from gmnet_sklearn.estimators import InvalidSmilesWarning, load_model

from ._smiles import SMILES, class_target, regression_target

TINY = dict(d_model=16, n_layers=1, n_heads=2, k=4, L=2, batch_size=16, max_epochs=2, lr=1e-3, random_state=0)
TINY_CB = dict(d_model=16, n_layers=1, n_heads=2, intermediate_size=16, batch_size=16, max_epochs=2, lr=1e-3,
               random_state=0)
# Rejected by RDKit (unclosed ring, pentavalent carbon, hypervalent N as in BBBP) or by the
# tokenizer (not a string: an empty CSV cell), at known positions among valid SMILES.
BAD = {3: "C1CC", 17: "c1ccccc1C(F)(F)(F)F", 30: "CN(=O)(=O)C", 41: float("nan")}


def _with_bad(smiles, y):
    X, Y, rows = list(smiles), list(y), sorted(BAD)
    for pos in rows:
        X.insert(pos, BAD[pos])
        Y.insert(pos, Y[0])
    return X, np.asarray(Y), rows


def test_default_still_raises_naming_the_rows():
    X, y, rows = _with_bad(SMILES, regression_target(SMILES))
    with pytest.raises((ValueError, TypeError)) as err:
        GMNetRegressor(**TINY).fit(X, y)
    assert "[3] 'C1CC'" in str(err.value) and "[17]" in str(err.value) and "4 of" in str(err.value)
    with pytest.raises(ValueError, match="on_invalid"):
        GMNetRegressor(**{**TINY, "on_invalid": "drop"}).fit(SMILES, regression_target(SMILES))


def test_skip_equals_a_fit_on_the_valid_rows():
    """Everything fit derives from the data (scaffold split, vocabulary, descriptors, Morgan
    counts, SMILES variants) sees the same rows as a fit on the valid rows alone."""
    params = {**TINY, "augment": 1, "fingerprint": True}
    y_clean = regression_target(SMILES)
    X, y, rows = _with_bad(SMILES, y_clean)
    with pytest.warns(InvalidSmilesWarning) as record:
        skipping = GMNetRegressor(**params, on_invalid="skip").fit(X, y)
    assert len(record) == 1
    message = str(record[0].message)
    assert "4 of 54 rows of X" in message and "[3] 'C1CC'" in message and "[41] nan" in message
    assert "valence" in message  # the reason, as RDKit gives it
    assert record[0].filename == __file__  # attributed to the caller, not to the library
    assert skipping.n_invalid_skipped_ == 4
    assert skipping.invalid_rows_.tolist() == rows and skipping.invalid_rows_.dtype == np.int64
    assert skipping.invalid_valid_rows_.tolist() == []

    plain = GMNetRegressor(**params).fit(SMILES, y_clean)
    assert plain.n_invalid_skipped_ == 0 and plain.invalid_rows_.tolist() == []
    assert skipping.n_train_ == plain.n_train_ and skipping.n_valid_ == plain.n_valid_
    assert skipping.tokenizer_.vocabulary_ == plain.tokenizer_.vocabulary_
    np.testing.assert_array_equal(skipping.predict(SMILES), plain.predict(SMILES))

    # predict: one row per input, NaN for the invalid ones
    pred = skipping.predict(X)
    assert pred.shape == (len(X),)
    assert np.isnan(pred[rows]).all()
    np.testing.assert_array_equal(np.delete(pred, rows), plain.predict(SMILES))


def test_skip_in_the_validation_set_and_multi_task_targets():
    """Rows of X_valid are skipped with their labels too; a 2-D y loses whole rows."""
    y2 = np.c_[class_target(SMILES), 1 - class_target(SMILES)].astype(float)
    y2[::7, 1] = np.nan  # missing labels stay masked, not skipped
    X, y, rows = _with_bad(SMILES, y2)
    Xv, yv = X[:30], y[:30]
    with pytest.warns(InvalidSmilesWarning) as record:
        est = GMNetClassifier(**TINY, on_invalid="skip").fit(X, y, X_valid=Xv, y_valid=yv)
    assert len(record) == 2 and "rows of X_valid" in str(record[1].message)
    assert est.invalid_rows_.tolist() == rows
    assert est.invalid_valid_rows_.tolist() == [3, 17]
    assert est.n_invalid_skipped_ == 6 and est.n_valid_ == 28 and est.n_train_ == len(SMILES)
    valid_rows = [i for i in range(30) if i not in (3, 17)]
    ref = GMNetClassifier(**TINY).fit(SMILES, y2, X_valid=[Xv[i] for i in valid_rows], y_valid=yv[valid_rows])
    np.testing.assert_array_equal(est.predict_proba(SMILES), ref.predict_proba(SMILES))
    assert np.isnan(est.predict_proba(X)[rows]).all()


def test_skip_chemberta_and_save_load(tmp_path):
    labels = class_target(SMILES)
    X, y, rows = _with_bad(SMILES, labels)
    with pytest.warns(InvalidSmilesWarning):
        est = ChemBERTaClassifier(**TINY_CB, on_invalid="skip").fit(X, y)
    assert est.invalid_rows_.tolist() == rows
    est.save(tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.n_invalid_skipped_ == 4 and loaded.invalid_rows_.tolist() == rows
    assert loaded.invalid_valid_rows_.dtype == np.int64
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    assert np.isnan(loaded.predict(X)[rows].astype(float)).all()


def test_skip_with_nothing_left_is_an_error():
    with pytest.raises(ValueError, match="all 2 SMILES in X are invalid"):
        GMNetRegressor(**TINY, on_invalid="skip").fit(["C1CC", "CC(C)(C)(C)(C)C"], [1.0, 2.0])


def test_skip_without_invalid_rows_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", InvalidSmilesWarning)
        est = GMNetRegressor(**{**TINY, "max_epochs": 1}, on_invalid="skip").fit(SMILES, regression_target(SMILES))
    assert est.n_invalid_skipped_ == 0


def test_descriptor_transformer_names_rows_and_checks_its_option():
    with pytest.raises(ValueError, match=r"rows 1 \('C1CC'\).*on_invalid='nan'"):
        RDKitDescriptors().fit(["CCO", "C1CC", "CCN"])
    z = RDKitDescriptors(on_invalid="nan").fit(["CCO", "CCCO", "CCN"]).transform(["CCO", "C1CC"])
    assert (z[1] == 0).all() and z.shape[0] == 2
    with pytest.raises(ValueError, match="on_invalid must be"):
        RDKitDescriptors(on_invalid="skip").fit(["CCO", "CCN"])


# ---- RDKit's log --------------------------------------------------------------------------------

_RDKIT_LINE = re.compile(r"\[\d\d:\d\d:\d\d\]|SMILES Parse Error|valence|WARNING|kekulize", re.I)


def test_no_rdkit_line_on_stderr_during_fit_and_log_state_restored(capfd):
    """RDKit prints parse errors and warnings from C++ to fd 2; a fit on SMILES that make it
    print (invalid ones, skipped; a lone [H], which makes RDKit warn when removing Hs) shows
    none, and leaves RDKit's log settings as they were (RDKit still prints afterwards)."""
    X, y, _ = _with_bad(SMILES + ["[H]", "[H][H]"], regression_target(SMILES + ["[H]", "[H][H]"]))
    strings = [i for i, s in enumerate(X) if isinstance(s, str)]
    X, y = [X[i] for i in strings], y[strings]
    status = rdBase.LogStatus()
    # the capture works: RDKit prints these when called directly
    Chem.MolFromSmiles("C1CC")
    Chem.MolFromSmiles("[H]")
    before = capfd.readouterr().err
    assert "SMILES Parse Error" in before and "WARNING" in before
    with pytest.warns(InvalidSmilesWarning):
        est = GMNetRegressor(**{**TINY, "max_epochs": 1, "augment": 1, "fingerprint": True},
                             on_invalid="skip").fit(X, y)
    assert np.isnan(est.predict(X)).sum() == len(X) - est.n_train_ - est.n_valid_  # NaN rows, as documented
    during = capfd.readouterr().err
    assert not [line for line in during.splitlines() if _RDKIT_LINE.search(line)], during
    assert rdBase.LogStatus() == status  # not left disabled, nor debug/info switched on
    Chem.MolFromSmiles("C1CC")
    assert "SMILES Parse Error" in capfd.readouterr().err

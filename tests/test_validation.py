"""scikit-learn does the validation: parameter constraints, random_state, and the one SMILES
coercion (``check_smiles_input``) shared by the estimators, the tokenizer and the splitters."""

import numpy as np
import pandas as pd
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from gmnet_sklearn import ChemBERTaClassifier, ChemBERTaRegressor, GMNetClassifier, GMNetRegressor
from gmnet_sklearn.estimators._base import _seed
from gmnet_sklearn.model_selection import scaffold_split
from gmnet_sklearn.model_selection.scaffold import _as_smiles_array
from gmnet_sklearn.tokenizer import SmilesTokenizer
from gmnet_sklearn.utils import check_smiles_input

from ._smiles import SMILES, regression_target

ESTIMATORS = [GMNetRegressor, GMNetClassifier, ChemBERTaRegressor, ChemBERTaClassifier]
Y = regression_target(SMILES)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("param,value", [
    ("lr", 0.0), ("batch_size", 0), ("max_epochs", 1.5), ("dropout", 1.0), ("warmup", 1.0),
    ("weight_decay", -1e-3), ("patience", 0), ("n_estimators", 0), ("augment", -1), ("tta", "2"),
    ("descriptors", 1), ("fingerprint", "yes"), ("optimizer", "sgd"), ("lr_schedule", "step"),
    ("valid_split", "kfold"), ("valid_size", 1.0), ("max_length", 2), ("on_invalid", "drop"),
    ("random_state", "0"), ("bucket_by_length", None),
])
def test_invalid_training_parameters_are_named_in_fit(cls, param, value):
    est = cls(**{param: value})  # __init__ only stores (scikit-learn convention)
    assert est.get_params()[param] is value
    with pytest.raises(InvalidParameterError, match=f"The '{param}' parameter of {cls.__name__} must be"):
        est.fit(SMILES, Y)


@pytest.mark.parametrize("cls,param,value", [
    (GMNetRegressor, "k", 2), (GMNetRegressor, "L", -1), (GMNetRegressor, "attention", "mha"),
    (GMNetRegressor, "adaptive", "no"), (GMNetRegressor, "activation", 3),
    (ChemBERTaRegressor, "intermediate_size", 0), (ChemBERTaRegressor, "attention_dropout", 1.0),
])
def test_invalid_architecture_parameters_are_named_in_fit(cls, param, value):
    with pytest.raises(InvalidParameterError, match=f"The '{param}' parameter of {cls.__name__} must be"):
        cls(**{param: value}).fit(SMILES, Y)


def test_every_constructor_parameter_has_a_constraint():
    # A parameter added without an entry would go unchecked: keep the tables complete.
    for cls in ESTIMATORS:
        assert set(cls._parameter_constraints) == set(cls().get_params()), cls.__name__


def test_seed_from_random_state():
    assert _seed(7) == 7 and _seed(np.int64(7)) == 7  # an int is the seed itself
    assert _seed(np.random.RandomState(0)) == np.random.RandomState(0).randint(2**31 - 1)
    state = np.random.get_state()  # numpy's global state is the session's: given back
    try:
        np.random.seed(3)
        first = _seed(None)
        np.random.seed(3)
        assert _seed(None) == first  # None: numpy's global RandomState, as in scikit-learn
    finally:
        np.random.set_state(state)


@pytest.mark.parametrize("X", [
    list(SMILES[:4]), tuple(SMILES[:4]), np.array(SMILES[:4]), np.array(SMILES[:4], dtype=object).reshape(-1, 1),
    pd.Series(SMILES[:4], index=[9, 8, 7, 6]), pd.DataFrame({"y": range(4), "SMILES": SMILES[:4]}),
    pd.DataFrame({"mol": SMILES[:4]}), [[s] for s in SMILES[:4]], (s for s in SMILES[:4]),
], ids=["list", "tuple", "array", "column", "series", "frame", "one-column frame", "rows", "generator"])
def test_one_smiles_coercion_for_every_input_kind(X):
    assert check_smiles_input(X) == SMILES[:4]


def test_a_frame_with_two_smiles_columns_is_refused_naming_them():
    # an exact name wins over one differing in case; two candidates are not guessed between
    assert check_smiles_input(pd.DataFrame({"Smiles": ["C", "N"], "smiles": ["O", "S"]})) == ["O", "S"]
    with pytest.raises(ValueError, match=r"2 columns named like 'smiles': \['Smiles', 'SMILES'\]"):
        check_smiles_input(pd.DataFrame({"Smiles": ["C", "N"], "SMILES": ["O", "S"]}))
    with pytest.raises(ValueError, match=r"2 columns named like 'smiles': \['smiles', 'smiles'\]"):
        check_smiles_input(pd.DataFrame([["C", "N"], ["O", "S"]], columns=["smiles", "smiles"]))


def test_the_estimators_tokenizer_and_splitter_share_the_coercion():
    frame = pd.DataFrame({"id": range(len(SMILES)), "smiles": SMILES})
    tok = SmilesTokenizer().fit(frame)
    assert tok.vocabulary_ == SmilesTokenizer().fit(SMILES).vocabulary_
    np.testing.assert_array_equal(tok.encode_batch(frame).lengths, tok.encode_batch(SMILES).lengths)
    for a, b in zip(scaffold_split(frame), scaffold_split(SMILES)):
        np.testing.assert_array_equal(a, b)
    assert _as_smiles_array(frame).tolist() == SMILES
    # the same errors from every entry point
    for call in (lambda X: check_smiles_input(X), lambda X: SmilesTokenizer().fit(X), scaffold_split,
                 lambda X: GMNetRegressor().fit(X, [1.0])):
        with pytest.raises(TypeError, match="got a single string"):
            call("CCO")
        with pytest.raises(ValueError, match=r"1-D \(one SMILES per row\), got an array of shape \(2, 2\)"):
            call(np.array([["C", "O"], ["N", "S"]]))
        with pytest.raises(ValueError, match="'smiles' column"):
            call(pd.DataFrame({"a": ["C"], "b": ["O"]}))
    with pytest.raises(ValueError, match="X is empty"):
        check_smiles_input([])
    assert check_smiles_input([], ensure_min_samples=0) == []
    with pytest.raises(TypeError, match="got int"):
        check_smiles_input(42)


TINY_FIT = dict(d_model=16, n_layers=1, n_heads=2, k=3, L=1, max_epochs=1, random_state=0,
                descriptors=False, fingerprint=False, forest=False)


def test_a_dataframes_other_columns_are_named_not_read_silently():
    """A DataFrame with a 'smiles' column and others lost the others without a word: in a
    ColumnTransformer given two SMILES columns, a transformer used one (a review)."""
    import warnings

    from gmnet_sklearn.fingerprints import MorganFingerprint

    frame = pd.DataFrame({"smiles": SMILES[:6], "solvent_smiles": ["O", "CO", "CCO", "O", "CO", "ClCCl"]})
    with pytest.warns(UserWarning, match=r"column\(s\) \['solvent_smiles'\] are not read, only its SMILES "
                                         r"column 'smiles'") as record:
        out = MorganFingerprint(n_bits=32).fit_transform(frame)
    assert len(record) == 1 and record[0].filename == __file__  # the user's line, once
    np.testing.assert_array_equal(out, MorganFingerprint(n_bits=32).transform(SMILES[:6]))
    with warnings.catch_warnings():  # a splitter reads the SMILES of the model's feature frame: nothing lost
        warnings.simplefilter("error")
        scaffold_split(frame, 0.5, 0.25, 0.25)
        check_smiles_input(frame[["smiles"]])


def test_pd_na_in_an_object_array_is_a_missing_label():
    """``df[tasks].to_numpy()`` of nullable columns holds pd.NA in an object array: accepted as a
    DataFrame, refused as "not a number" as an array (a review)."""
    from gmnet_sklearn.utils.targets import check_target
    from gmnet_sklearn.exceptions import MissingTargetWarning

    frame = pd.DataFrame({"a": pd.array([1, None, 0, 1], dtype="Int64"), "b": pd.array([0, 1, None, 1], dtype="Int64")})
    y = check_target(frame.to_numpy())
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, check_target(frame))
    y1 = list(Y[:29]) + [pd.NA]
    with pytest.warns(MissingTargetWarning, match=r"in 1 of 30 rows \(row 29\)"):
        est = GMNetRegressor(**TINY_FIT).fit(SMILES[:30], y1)
    assert est.n_train_ + est.n_valid_ == 30


def test_one_column_y_with_nan_is_one_task_and_warns():
    """A regressor's ``df[["logS"]]`` with NaN was masked without the warning a 1-D y gets,
    while the classifier refused the same y (a review)."""
    from gmnet_sklearn.utils.targets import warn_missing_targets
    from gmnet_sklearn.exceptions import MissingTargetWarning

    y = np.array([[1.0], [np.nan], [2.0]])
    with pytest.warns(MissingTargetWarning, match=r"in 1 of 3 rows \(row 1\)"):
        assert warn_missing_targets(y) == 1
    assert warn_missing_targets(np.array([[1.0, np.nan], [2.0, 3.0]])) == 0  # two tasks: on purpose


def test_featurisers_read_generators_once_and_refuse_what_is_no_string():
    """fit_transform on a generator failed ("X is empty": fit had consumed it), and an RDKit Mol
    or a number became an all-zero (NaN) row as "a SMILES RDKit cannot parse" (a review)."""
    from rdkit import Chem

    from gmnet_sklearn.descriptors import RDKitDescriptors
    from gmnet_sklearn.fingerprints import MorganFingerprint

    np.testing.assert_array_equal(MorganFingerprint(n_bits=64).fit_transform(s for s in SMILES[:5]),
                                  MorganFingerprint(n_bits=64).transform(SMILES[:5]))
    mols = [Chem.MolFromSmiles("c1ccccc1O"), "CCO", 1.5]
    for featuriser in (MorganFingerprint(on_invalid="zeros"), RDKitDescriptors(on_invalid="nan")):
        with pytest.raises(TypeError, match=r"2 item\(s\) are not strings, at rows 0 \(Mol\), 2 \(float\)"):
            featuriser.fit_transform(mols)
    # a missing value stays an unparsable row under on_invalid
    with pytest.warns(UserWarning, match=r"1 of 2 SMILES RDKit cannot parse get all-zero rows: rows 1 \(None\)"):
        assert MorganFingerprint(on_invalid="zeros").transform(["CCO", None]).sum(1)[1] == 0


def test_datetime_class_labels():
    """datetime64 labels failed ("validation labels ... are not among the training classes",
    with no validation set): tolist() made them dates (a review)."""
    labels = np.where(np.arange(30) % 2 == 0, np.datetime64("2020-01-01"), np.datetime64("2021-01-01"))
    est = GMNetClassifier(**TINY_FIT).fit(SMILES[:30], labels)
    assert est.classes_.dtype == labels.dtype and set(est.predict(SMILES[:4])) <= set(labels)


def test_datetime_class_labels_save_and_load(tmp_path):
    """A day's unit (datetime64[D]) fitted and predicted, but save failed: tolist() gave
    datetime.date, which JSON cannot hold (a review)."""
    from gmnet_sklearn.estimators import load_model

    for unit in ("D", "s", "ns"):
        labels = np.where(np.arange(30) % 2 == 0, np.datetime64("2020-01-01", unit), np.datetime64("2021-01-01", unit))
        est = GMNetClassifier(**TINY_FIT).fit(SMILES[:30], labels)
        loaded = load_model(est.save(tmp_path / unit))
        assert loaded.classes_.dtype == labels.dtype
        np.testing.assert_array_equal(loaded.classes_, est.classes_)
        np.testing.assert_array_equal(loaded.predict(SMILES[:6]), est.predict(SMILES[:6]))


# a mixed-scaffold set whose DeepChem-style internal split sends rows 14 and 15's scaffold groups to validation
MIXED = ["c1ccccc1C", "c1ccccc1CC", "c1ccccc1O", "c1ccccc1N", "c1ccccc1Cl", "c1ccccc1Br", "c1ccccc1CO", "c1ccccc1CN",
         "CCO", "CCN", "CCC", "CCCC", "CCCO", "OCCO", "c1ccncc1", "C1CCCCC1", "C1CCNCC1", "C1CCOC1", "c1ccoc1", "c1ccsc1"]


def test_a_one_d_y_whose_only_labels_the_split_sends_to_validation_trains_on_them():
    """A review: a 1-D y with NaN failed ("no observed values among the training rows", naming a
    y_valid never passed) where the same y as one column moved its labels back to training."""
    est = GMNetRegressor(**TINY_FIT)
    train, valid = est._internal_split(MIXED, 0)
    y = np.full(len(MIXED), np.nan)
    y[valid] = np.arange(1.0, len(valid) + 1)
    with pytest.warns(UserWarning):  # (the NaN rows, and the split left empty)
        one_d = GMNetRegressor(**TINY_FIT).fit(MIXED, y)
    with pytest.warns(UserWarning):
        column = GMNetRegressor(**TINY_FIT).fit(MIXED, y[:, None])
    assert one_d.n_train_ == column.n_train_ == len(MIXED)


def test_an_internal_split_leaving_one_molecule_in_training_trains_on_every_row():
    """A review: the descriptor scaling, fitted on the training part's copies of one molecule,
    failed saying the user's molecules do not vary."""
    with pytest.warns(UserWarning, match="leaves 3 training row\\(s\\) of one molecule; training on all rows"):
        est = GMNetRegressor(**{**TINY_FIT, "descriptors": True}).fit(["CCO"] * 3 + ["c1ccccc1"] * 2, [1.0, 1.1, 0.9, 2.0, 2.1])
    assert est.n_train_ == 5 and np.isfinite(est.predict(["CCO"])).all()
    # without descriptors nothing fails on one molecule: the split stands
    assert GMNetRegressor(**TINY_FIT).fit(["CCO"] * 3 + ["c1ccccc1"] * 2, [1.0, 1.1, 0.9, 2.0, 2.1]).n_train_ == 3


def test_targets_too_large_to_square_are_still_standardised():
    """A review: y near 1e160 overflowed np.nanstd (y_scale_ inf, inf predictions, the fit
    passing)."""
    y = np.linspace(1.0, 2.0, 30) * 1e160
    est = GMNetRegressor(**TINY_FIT, valid_split=None).fit(SMILES[:30], y)
    assert np.isfinite(est.y_scale_).all() and est.y_scale_[0] == pytest.approx(np.std(y / 1e160) * 1e160)
    assert np.isfinite(est.predict(SMILES[:3])).all()
    # (a column of zeros beside it; sums past float64's range)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        both = GMNetRegressor(**TINY_FIT, valid_split=None).fit(SMILES[:30], np.c_[y, np.zeros(30)])
    assert both.y_scale_[1] == 1.0 and np.isfinite(both.y_mean_).all()
    huge = GMNetRegressor(**TINY_FIT, valid_split=None).fit(SMILES[:30], np.linspace(1.0, 1.5, 30) * 1.1e308)
    assert np.isfinite(huge.y_mean_).all() and np.isfinite(huge.y_scale_).all()


def test_l_zero_is_refused():
    """A review: at L = 0 every token's harmonics are the constant one; the network could not fit
    its own training set, and the default forest blend hid it."""
    with pytest.raises(InvalidParameterError, match="'L' parameter of GMNetRegressor must be an int in the range "
                                                    "\\[1, inf\\)"):
        GMNetRegressor(L=0).fit(SMILES[:10], np.arange(10.0))


def test_y_valid_errors_name_y_valid():
    """A review: a number as y_valid failed in scikit-learn's "Expected sequence or array-like,
    got float", and a classifier's continuous y_valid in "Unknown label type", naming neither."""
    with pytest.raises(ValueError, match=r"y_valid must be 1-D or 2-D, got shape \(\)"):
        GMNetRegressor(**TINY_FIT).fit(SMILES[:20], np.arange(20.0), X_valid=["CCO"], y_valid=0.5)
    with pytest.raises(ValueError, match="X_valid has 2 SMILES and y_valid 3 labels"):
        GMNetRegressor(**TINY_FIT).fit(SMILES[:20], np.arange(20.0), X_valid=["CCO", "CCN"], y_valid=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="y_valid: Unknown label type: continuous"):
        GMNetClassifier(**TINY_FIT).fit(SMILES[:20], np.arange(20) % 2, X_valid=["CCO", "CCN"], y_valid=[0.5, 1])


def test_a_chemberta_position_table_too_small_names_its_parameter():
    with pytest.raises(ValueError, match="max_position_embeddings=1 must be at least pad_id \\+ 2"):
        ChemBERTaRegressor(d_model=16, n_layers=1, n_heads=2, intermediate_size=16, max_epochs=1,
                           max_position_embeddings=1).fit(SMILES[:10], np.arange(10.0))


def test_an_estimator_given_rdkit_mols_says_how_to_get_their_smiles():
    """A new user's review: Mol objects as X listed ten "not a string (Mol)" lines, no way out."""
    from rdkit import Chem

    with pytest.raises(TypeError, match=r"not a string \(Mol\)[\s\S]*an RDKit Mol: Chem.MolToSmiles\(mol\)"):
        GMNetRegressor(**TINY_FIT, valid_split=None).fit([Chem.MolFromSmiles(s) for s in SMILES[:5]], np.arange(5.0))


def test_numpy_integers_as_counts():
    """A review: tta=np.int64(2) failed in RDKit's randomiser, batch_size=np.int64(8) in torch's
    loader, though both pass the parameter checks (a value from a numpy grid)."""
    est = GMNetRegressor(**{**TINY_FIT, "tta": np.int64(2), "augment": np.int64(1), "batch_size": np.int64(8)})
    assert np.isfinite(est.fit(SMILES[:30], np.arange(30.0)).predict(SMILES[:3])).all()

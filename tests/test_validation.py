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

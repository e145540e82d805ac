"""The estimators' docstrings are numpydoc as scikit-learn writes it: one entry per signature
parameter, in order, with the signature's default, and an Attributes and a See Also section."""

from __future__ import annotations

import ast
import inspect
import re
import warnings

import pytest
from sklearn.externals._numpydoc.docscrape import NumpyDocString

from gmnet_sklearn import ChemBERTaClassifier, ChemBERTaRegressor, GMNetClassifier, GMNetRegressor

ESTIMATORS = [GMNetRegressor, GMNetClassifier, ChemBERTaRegressor, ChemBERTaClassifier]


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_parameters_follow_the_signature_with_its_defaults(cls):
    doc = cls.__doc__
    assert inspect.cleandoc(doc) == doc.rstrip("\n")  # written dedented: help() shows it as it is
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown section warns
        parsed = NumpyDocString(doc)
    signature = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    entries = parsed["Parameters"]
    assert [e.name for e in entries] == [p.name for p in signature]
    for entry, param in zip(entries, signature):
        default = re.search(r"default=(.+)$", entry.type)
        assert default, f"{entry.name}: no default in {entry.type!r}"
        value = ast.literal_eval(default.group(1))
        assert type(value) is type(param.default) and value == param.default, entry.name
        assert entry.desc and all(entry.desc), entry.name
        options = re.match(r"\{(.*)\}", entry.type)
        if options and isinstance(param.default, str):
            assert f'"{param.default}"' in options.group(1), entry.name
    assert parsed["Attributes"] and all(a.name.endswith("_") and a.desc for a in parsed["Attributes"])
    assert parsed["See Also"]


def test_task_specific_text_stays_with_its_task():
    for cls in (GMNetRegressor, ChemBERTaRegressor):
        assert cls.__doc__.count("normalize_y :") == 1 and "return_std" in cls.__doc__
    for cls in (GMNetClassifier, ChemBERTaClassifier):
        doc = cls.__doc__
        assert "normalize_y :" not in doc and "return_std" not in doc and "y_mean_" not in doc
        assert "classes_ :" in doc

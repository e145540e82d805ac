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


def _other_public_classes():
    from gmnet_sklearn import GMNetEmbedder, SmilesTokenizer, TrainingCurveDisplay
    from gmnet_sklearn.descriptors import RDKitDescriptors
    from gmnet_sklearn.fingerprints import MorganFingerprint
    from gmnet_sklearn.model_selection import ScaffoldKFold, ScaffoldSplit

    return [GMNetEmbedder, SmilesTokenizer, TrainingCurveDisplay, RDKitDescriptors, MorganFingerprint,
            ScaffoldKFold, ScaffoldSplit]


@pytest.mark.parametrize("cls", _other_public_classes(), ids=lambda c: c.__name__)
def test_the_other_public_classes_document_each_parameter_in_order(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parsed = NumpyDocString(inspect.getdoc(cls))
    signature = [p.name for p in inspect.signature(cls.__init__).parameters.values()
                 if p.name != "self" and p.kind is not p.VAR_KEYWORD]
    entries = parsed["Parameters"]
    assert [name for e in entries for name in e.name.split(", ")] == signature  # ("a, b : float": both)
    assert all(e.type and e.desc and all(e.desc) for e in entries), [e.name for e in entries if not e.desc]


@pytest.mark.parametrize("module", ["gmnet_sklearn.augment", "gmnet_sklearn.descriptors", "gmnet_sklearn.display",
                                    "gmnet_sklearn.embedder", "gmnet_sklearn.fingerprints", "gmnet_sklearn.forest",
                                    "gmnet_sklearn.tokenizer", "gmnet_sklearn.model_selection.scaffold",
                                    "gmnet_sklearn.datasets", "gmnet_sklearn.estimators", "gmnet_sklearn.pretrain",
                                    "gmnet_sklearn.metrics"])
def test_each_public_module_lists_what_it_exports(module):
    import importlib

    mod = importlib.import_module(module)
    assert mod.__all__ and all(hasattr(mod, name) for name in mod.__all__)
    # what the package re-exports from it is in its list
    package = importlib.import_module(module.rsplit(".", 1)[0])
    exported = {name for name in getattr(package, "__all__", []) if getattr(package, name, None) is not None}
    defined_here = {name for name in exported if getattr(getattr(package, name), "__module__", None) == module}
    assert defined_here <= set(mod.__all__), defined_here - set(mod.__all__)

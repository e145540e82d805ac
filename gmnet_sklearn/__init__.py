"""gmnet_sklearn: Chem-GMNet, a sphere-native transformer for molecules, as scikit-learn estimators."""

__version__ = "0.1.0"

# Estimators import torch and skorch; resolve them lazily so `import gmnet_sklearn` stays cheap
# and submodules (datasets, tokenizer) are usable on their own.
_LAZY = {
    "GMNetRegressor": "gmnet_sklearn.estimators",
    "GMNetClassifier": "gmnet_sklearn.estimators",
    "ChemBERTaRegressor": "gmnet_sklearn.estimators",
    "ChemBERTaClassifier": "gmnet_sklearn.estimators",
    "PAPER_PROTOCOL": "gmnet_sklearn.estimators",
    "CHEMBERTA_PAPER_PROTOCOL": "gmnet_sklearn.estimators",
    "MOSES_FINE_TUNING": "gmnet_sklearn.estimators",
    "load_model": "gmnet_sklearn.estimators",
    "GMNetEmbedder": "gmnet_sklearn.embedder",
    "TrainingCurveDisplay": "gmnet_sklearn.display",
    "SmilesTokenizer": "gmnet_sklearn.tokenizer",
    "fetch_moleculenet": "gmnet_sklearn.datasets",
    "scaffold_split": "gmnet_sklearn.model_selection",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gmnet_sklearn' has no attribute {name!r}")


def __dir__():  # dir() and tab completion list the lazily resolved names too
    return sorted({*globals(), *__all__})

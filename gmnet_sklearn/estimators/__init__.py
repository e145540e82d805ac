"""scikit-learn estimators on SMILES: Chem-GMNet and the same-shape ChemBERTa baseline."""

from ..exceptions import InvalidSmilesWarning
from ._base import SmilesNetBase
from .chemberta import ChemBERTaClassifier, ChemBERTaRegressor
from .gmnet import GMNetClassifier, GMNetRegressor
from ..utils.frozen import FrozenDict
from .presets import CHEMBERTA_PAPER_PROTOCOL, MOSES_FINE_TUNING, PAPER_PROTOCOL
from .snapshot import TrainingSnapshot

# the classes load_model builds from a folder's config.json: no others (read-only)
ESTIMATORS = FrozenDict({cls.__name__: cls for cls in (GMNetRegressor, GMNetClassifier, ChemBERTaRegressor, ChemBERTaClassifier)})


def load_model(path, device=None):
    """Load any estimator saved with ``est.save(path)`` (safetensors + JSON, no code execution)."""
    return SmilesNetBase.load(path, device=device)


__all__ = ["GMNetRegressor", "GMNetClassifier", "ChemBERTaRegressor", "ChemBERTaClassifier", "TrainingSnapshot",
           "load_model", "ESTIMATORS", "PAPER_PROTOCOL", "CHEMBERTA_PAPER_PROTOCOL", "MOSES_FINE_TUNING",
           "InvalidSmilesWarning"]

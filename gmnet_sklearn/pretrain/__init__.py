"""Pretraining on a SMILES corpus (``pretrain``; CLI ``gmnet-pretrain``): masked-LM, or regressing
RDKit's descriptors (``objective="mtr"``, ChemBERTa-2's MTR task).

The estimators start from its output with ``GMNetRegressor.from_pretrained(path)`` (or
``pretrained=path`` with matching shape parameters); see ``trainer.py`` for the run folder and
``models.py`` for the pretrained folder's safe format.
"""

from .checkpoint import RunInProgressError
from .models import DEFAULT_PARAMS, FAMILIES, load_mlm, read_config
from .trainer import pretrain

__all__ = ["pretrain", "load_mlm", "read_config", "DEFAULT_PARAMS", "FAMILIES", "RunInProgressError"]

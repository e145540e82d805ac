"""Scaffold splitting (DeepChem 2.8.0 ``ScaffoldSplitter``-exact) and scikit-learn CV splitters."""

from .scaffold import (
    MAX_SMILES_LENGTH,
    ScaffoldKFold,
    ScaffoldSplit,
    balanced_scaffold_split,
    murcko_scaffold,
    scaffold_groups,
    scaffold_split,
)

__all__ = [
    "MAX_SMILES_LENGTH",
    "ScaffoldKFold",
    "ScaffoldSplit",
    "balanced_scaffold_split",
    "murcko_scaffold",
    "scaffold_groups",
    "scaffold_split",
]

"""Baseline models compared against Chem-GMNet."""

from gmnet_sklearn.baselines.chemberta import ChemBERTa

__all__ = ["ChemBERTa"]

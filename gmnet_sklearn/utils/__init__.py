"""Input validation shared by the estimators, the tokenizer and the scaffold splitters."""

from .validation import check_smiles_input, mol_from_smiles

__all__ = ["check_smiles_input", "mol_from_smiles"]

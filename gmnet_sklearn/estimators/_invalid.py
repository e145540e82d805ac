"""Skipping the training rows whose SMILES cannot be used (the estimators' ``on_invalid="skip"``).

Real data sets hold SMILES RDKit rejects (BBBP 11, Tox21 8, HIV 7). With ``on_invalid="skip"``
``fit`` leaves those rows out, with their targets, before anything else happens (splits, the
vocabulary, descriptors, SMILES variants), so the fit equals a fit on the valid rows alone; one
:class:`InvalidSmilesWarning` names them, as MolPipeline's error filter does. A row is invalid for
exactly the reasons the tokenizer rejects it at predict time: not a string, characters outside
the SMILES grammar, RDKit rejects it, or more tokens than ``max_length``.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..exceptions import InvalidSmilesWarning
from ..tokenizer import SmilesTokenizer
from ..utils.messages import SHOWN_ROWS, short_repr
from ..utils.stacklevel import _caller_stacklevel
from ..utils.targets import warn_unscored_rows  # (the scorers' too: there)

__all__ = ["find_invalid_smiles", "skip_invalid_rows", "warn_unscored_rows"]



def find_invalid_smiles(smiles: list, max_length: int | None = None) -> dict[int, str]:
    """Position -> reason for every item the tokenizer rejects; empty when all are usable."""
    # Validity does not depend on the vocabulary (unknown tokens map to [UNK]), so an empty one
    # does; each distinct string is parsed once.
    probe = SmilesTokenizer().fit([])
    return probe.encode_batch(smiles, max_length=max_length, on_invalid="mask").errors


def skip_invalid_rows(smiles: list, y: np.ndarray, max_length: int | None = None, name: str = "X"):
    """``(smiles, y, rows)`` without the rows whose SMILES is invalid; ``rows`` are their
    positions (int64, ascending). Warns once naming them; raises if no row is left."""
    errors = find_invalid_smiles(smiles, max_length)
    rows = np.array(sorted(errors), dtype=np.int64)
    if rows.size == 0:
        return smiles, y, rows
    shown = "; ".join(f"[{r}] {short_repr(smiles[r])}: {errors[r]}" for r in rows[:SHOWN_ROWS])
    more = f"; ... ({rows.size - SHOWN_ROWS} more)" if rows.size > SHOWN_ROWS else ""
    if rows.size == len(smiles):
        left = ("nothing left to fit" if name == "X" else
                "nothing left to select the best epoch on (pass valid rows, or neither X_valid nor y_valid)")
        raise ValueError(f"all {len(smiles)} SMILES in {name} are invalid, {left}: {shown}{more}")
    warnings.warn(
        f"on_invalid='skip': left out {rows.size} of {len(smiles)} rows of {name} whose SMILES cannot be used "
        f"(their targets too): {shown}{more}",
        InvalidSmilesWarning,
        stacklevel=_caller_stacklevel(),
    )
    keep = np.setdiff1d(np.arange(len(smiles)), rows)
    return [smiles[i] for i in keep], y[keep], rows


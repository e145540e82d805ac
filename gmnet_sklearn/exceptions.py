"""Warnings of gmnet_sklearn (importing this module imports neither torch nor RDKit)."""

from __future__ import annotations

__all__ = ["InvalidSmilesWarning", "MissingTargetWarning", "UnknownTokenWarning"]


class InvalidSmilesWarning(UserWarning):
    """Rows whose SMILES cannot be used (RDKit rejects them, or the tokenizer does) were left
    out, or given placeholder rows, on request: ``on_invalid="skip"`` of the estimators and of the
    scaffold CV splitters, the rows ``score`` leaves out, ``MorganFingerprint(on_invalid="zeros")``
    and ``RDKitDescriptors(on_invalid="nan")``."""


class MissingTargetWarning(UserWarning):
    """A single-task ``y`` has missing values (NaN); those rows are masked in training."""


class UnknownTokenWarning(UserWarning):
    """SMILES hold tokens outside the model's vocabulary, which the network reads as one [UNK]
    token: at ``predict`` (and the embedder's ``transform``) with any vocabulary, at ``fit`` and
    in pretraining with a given one (``vocab_file``, ``pretrained``)."""

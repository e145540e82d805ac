"""SMILES enumeration: other valid SMILES of the same molecule (RDKit's randomised atom order).

Used by the estimators' ``augment`` (extra training variants, one drawn per molecule each epoch)
and ``tta`` (predictions averaged over variants). The variants come from RDKit's
``MolToRandomSmilesVect``, seeded, so a fit stays repeatable.
"""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["randomized_smiles"]


def _molecule_seed(random_state: int, smiles: str) -> int:
    """RDKit's seed for one SMILES's variants: from ``random_state`` and the string alone (without
    surrounding whitespace, which the tokenizer and RDKit ignore: "CCO " is "CCO"), never 0 (RDKit
    reads 0 as "unseeded")."""
    state = np.random.SeedSequence([random_state, zlib.crc32(smiles.strip().encode())]).generate_state(1)[0]
    return int(state) % (2**31 - 2) + 1


def randomized_smiles(smiles, n: int, random_state: int = 0, per_molecule: bool = False) -> list[list[str]]:
    """``n`` randomised SMILES per input SMILES (a list per input).

    Each variant parses to the same canonical molecule as its input. A molecule with fewer
    distinct orderings than ``n`` repeats some; a SMILES RDKit cannot parse gets ``n`` copies of
    itself (the tokenizer then decides what to do with it).

    The seeds: by default one stream over the inputs (a training set's variants, drawn in its
    order); with ``per_molecule`` each SMILES's own, from ``random_state`` and the SMILES, so its
    variants do not depend on the other inputs or their order (prediction: a molecule predicted
    alone, in a batch or shuffled gets the same answer).
    """
    from rdkit import Chem, rdBase

    from .utils import mol_from_smiles

    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = np.random.RandomState(random_state)
    out = []
    # RDKit's C++ log is blocked here and restored as the caller had it afterwards.
    with rdBase.BlockLogs():
        for s in smiles:
            mol = mol_from_smiles(s)
            if mol is None or n == 0:
                out.append([s] * n)
                continue
            # RDKit's seeded enumerator (MolToSmiles(doRandom=True) draws from an unseeded stream)
            # (a drawn 0, which RDKit would read as "unseeded", becomes the one value the draw never gives)
            seed = _molecule_seed(random_state, s) if per_molecule else int(rng.randint(2**31 - 1)) or 2**31 - 1
            variants = list(Chem.MolToRandomSmilesVect(mol, n, randomSeed=seed))
            out.append(variants)
    return out

"""A small, diverse set of SMILES for fast estimator tests (no data files needed)."""

import numpy as np

SMILES = [
    "CCO", "CCN", "CCC", "CCCC", "CCCCO", "CC(C)O", "CC(=O)O", "CC(=O)N", "CCOC(=O)C", "CCCl",
    "c1ccccc1", "Cc1ccccc1", "Oc1ccccc1", "Nc1ccccc1", "Clc1ccccc1", "c1ccc(O)cc1O", "c1ccncc1", "c1ccoc1",
    "c1ccsc1", "c1cc[nH]c1", "CC(=O)Nc1ccc(O)cc1", "CC(C)Cc1ccc(cc1)C(C)C(=O)O", "O=C(O)c1ccccc1O",
    "C1CCCCC1", "C1CCOC1", "C1CCNCC1", "OC1CCCCC1", "CC1=CC(=O)CCC1", "C=CC=C", "C#N", "CC#N", "OCCO",
    "NCCN", "CNC", "CN(C)C", "C[N+](=O)[O-]", "[NH4+].[Cl-]", "FC(F)(F)c1ccccc1", "Brc1ccccc1", "COc1ccccc1",
    "c1ccc2ccccc2c1", "c1ccc2[nH]ccc2c1", "O=C1CCCCC1", "CC(C)(C)O", "OC(=O)CCC(=O)O", "c1ccc(cc1)-c1ccccc1",
    "CCOCC", "CCS", "CSC", "O=S(=O)(O)O",
]


def regression_target(smiles, seed=0):
    """A learnable target: roughly the number of heavy atoms, with noise."""
    rng = np.random.RandomState(seed)
    return np.array([sum(ch.isalpha() and ch.isupper() or ch in "cnos" for ch in s) for s in smiles], float) + rng.normal(0, 0.1, len(smiles))


def class_target(smiles):
    return np.array([int("c" in s) for s in smiles])

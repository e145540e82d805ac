import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def moleculenet_dir() -> Path | None:
    """GMNET_DATA (folders, os.pathsep-separated: the moleculenet folder or its parent), else
    <repo>/../shared/data/moleculenet; None when absent."""
    cands = [Path(p) for p in os.environ.get("GMNET_DATA", "").split(os.pathsep) if p]
    cands.append(SHARED / "data" / "moleculenet")
    for c in cands:
        for d in (c, c / "moleculenet"):
            if d.is_dir() and any(d.glob("*.csv*")):
                return d
    return None


def vocab_file() -> Path | None:
    for cand in (os.environ.get("GMNET_TOKENIZER_VOCAB"), SHARED / "data" / "tokenizer" / "deepchem_smiles_vocab.txt"):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


@pytest.fixture
def moleculenet_path():
    path = moleculenet_dir()
    if path is None:
        pytest.skip("MoleculeNet files not found (set GMNET_DATA)")
    return path


@pytest.fixture
def deepchem_vocab():
    path = vocab_file()
    if path is None:
        pytest.skip("DeepChem vocabulary file not found (set GMNET_TOKENIZER_VOCAB)")
    return path


@pytest.fixture(autouse=True, scope="session")
def _small_forests():
    # The estimators' forest (forest=True, a default) has 500 trees: about a second of
    # scikit-learn's per-tree overhead in every fit, most of a tiny test fit's time. The tests
    # check how the forest is fitted, blended, saved and searched, not its accuracy, which
    # 25 trees exercise as well. Benchmarks, and tests that fit in another process, keep 500.
    # Session-wide, so the modules' fitted fixtures (set up before any function's) have it too.
    import gmnet_sklearn.forest

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gmnet_sklearn.forest, "N_TREES", 25)
        yield


# (descriptor names, SMILES) -> that SMILES' raw descriptor row, for the whole session
_DESCRIPTOR_ROWS: dict = {}


@pytest.fixture(autouse=True, scope="session")
def _descriptors_once_per_smiles():
    # RDKit's descriptors (about 7 ms a molecule) were most of what is left of a tiny test fit's
    # time, and the tests fit the same few SMILES hundreds of times: each valid SMILES is
    # computed once a session (rows are a function of the SMILES and the descriptor list).
    # SMILES RDKit rejects are not kept, so every test that passes one still goes through
    # RDKit's parser and its blocked log. Worker processes compute as before: joblib copies
    # this function into them with its cache, which they must not read (the tests of the
    # parallel path would compare the cache with itself).
    import numpy as np

    import gmnet_sklearn.descriptors as D

    compute = D._descriptor_rows
    owner = os.getpid()

    def rows_once(smiles):
        if not len(smiles) or os.getpid() != owner:
            return compute(smiles)
        names = tuple(D.descriptor_names())
        missing = [s for s in dict.fromkeys(smiles) if (names, s) not in _DESCRIPTOR_ROWS]
        fresh = {}
        if missing:
            rows, parsed = compute(missing)
            fresh = {s: (row, ok) for s, row, ok in zip(missing, rows, parsed)}
            _DESCRIPTOR_ROWS.update({(names, s): row for s, (row, ok) in fresh.items() if ok})
        got = [fresh[s] if s in fresh else (_DESCRIPTOR_ROWS[names, s], True) for s in smiles]
        return np.array([row for row, _ in got]), np.array([ok for _, ok in got], dtype=bool)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(D, "_descriptor_rows", rows_once)
        yield


@pytest.fixture(autouse=True)
def _few_threads():
    # The CI machine has 2 cores; oversubscription makes small-tensor tests slower, not faster.
    torch.set_num_threads(min(2, torch.get_num_threads()))
    yield

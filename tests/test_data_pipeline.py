"""The training input pipeline: encoded once, gathered per batch, length-bucketed and shuffled."""

import numpy as np
import torch

from gmnet_sklearn.estimators.data import BucketBatchSampler, BucketedLoader, EncodedSmilesDataset
from gmnet_sklearn.tokenizer import SmilesTokenizer

from ._smiles import SMILES


def dataset():
    tok = SmilesTokenizer().fit(SMILES)
    enc = tok.encode_batch(SMILES)
    return enc, EncodedSmilesDataset(enc, np.arange(len(SMILES), dtype=np.float32))


def test_collate_gathers_and_trims_padding():
    enc, ds = dataset()
    X, y = ds.collate([3, 0, 20])
    width = max(enc.lengths[[3, 0, 20]])
    assert X["input_ids"].shape == (3, width) and y.tolist() == [3.0, 0.0, 20.0]
    for row, i in enumerate([3, 0, 20]):
        n = enc.lengths[i]
        assert X["input_ids"][row, :n].tolist() == enc.ids[i].tolist()
        assert X["conj_flags"][row, :n].tolist() == enc.flags[i].tolist()
        assert X["attention_mask"][row].sum() == n and not X["attention_mask"][row, n:].any()


def test_bucketed_batches_cover_every_row_once_and_reshuffle():
    _, ds = dataset()
    sampler = BucketBatchSampler(ds.lengths, batch_size=8, seed=0, pool_batches=3)
    epochs = [list(sampler) for _ in range(2)]
    for batches in epochs:
        assert sorted(i for b in batches for i in b) == list(range(len(ds)))
        assert len(batches) == len(sampler)
    assert epochs[0] != epochs[1]  # a fresh order every epoch
    # Same seed, same sequence of epochs (reproducible runs).
    again = BucketBatchSampler(ds.lengths, batch_size=8, seed=0, pool_batches=3)
    assert [list(again) for _ in range(2)] == epochs


def test_bucketing_reduces_padding():
    _, ds = dataset()

    def padding(loader):
        total = 0
        for X, _ in loader:
            total += (~X["attention_mask"]).sum().item()
        return total

    torch.manual_seed(0)
    assert padding(BucketedLoader(seed=0, bucket=True)(ds, batch_size=8)) < padding(BucketedLoader(seed=0, bucket=False)(ds, batch_size=8))


def _variant_groups(n_molecules=40, seed=0):
    """Rows of ``n_molecules`` molecules, each with 1-4 rows (the molecule and its variants),
    shuffled as the estimators' dataset is not (to catch a picker that assumes contiguous groups)."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_molecules), rng.integers(1, 5, n_molecules))
    return torch.as_tensor(rng.permutation(groups))


def _epochs_of(sampler, n_epochs, batched):
    for _ in range(n_epochs):
        rows = [r for batch in sampler for r in batch] if batched else list(sampler)
        yield rows


def test_augmented_epochs_take_one_row_per_molecule_and_vary_the_variant():
    from gmnet_sklearn.estimators.data import GroupShuffleSampler

    groups = _variant_groups()
    lengths = torch.randint(5, 40, (len(groups),), generator=torch.Generator().manual_seed(1))
    samplers = {
        "bucketed": (BucketBatchSampler(lengths, 8, seed=0, groups=groups), True),
        "plain": (GroupShuffleSampler(groups, torch.Generator().manual_seed(0)), False),
    }
    sizes = torch.bincount(groups)
    for name, (sampler, batched) in samplers.items():
        assert len(sampler) == (5 if batched else 40), name
        drawn = torch.zeros(len(groups), dtype=torch.long)
        epochs = list(_epochs_of(sampler, 60, batched))
        for rows in epochs:
            # every molecule exactly once an epoch, whichever of its rows
            assert sorted(groups[rows].tolist()) == list(range(40)), name
            drawn[rows] += 1
        # over 60 epochs every row of a molecule with variants is drawn (all 1-4 of them: a
        # picker that always took the first row would leave the others at 0), about evenly
        assert (drawn > 0).all(), name
        expected = 60 / sizes[groups].double()
        assert ((drawn - expected).abs() < 5 * expected.sqrt() + 1).all(), name
        assert epochs[0] != epochs[1], name  # a new order and draw every epoch
    # seeded: the same draws again
    again = BucketBatchSampler(lengths, 8, seed=0, groups=groups)
    assert list(_epochs_of(again, 3, True)) == list(_epochs_of(BucketBatchSampler(lengths, 8, seed=0, groups=groups), 3, True))

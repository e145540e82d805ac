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

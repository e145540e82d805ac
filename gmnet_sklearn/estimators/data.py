"""Training input pipeline: encoded SMILES held as one padded matrix, length-bucketed batches.

Tokens and flags are computed once per distinct SMILES per fit (by the tokenizer) and kept here as
tensors; a batch is a row gather trimmed to its longest member, so no per-item Python work runs in
the training loop.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ..tokenizer import EncodedBatch


class EncodedSmilesDataset(Dataset):
    """Items are row indices; `collate` turns a list of them into model inputs and targets.

    ``order`` (optional) permutes the rows, e.g. sorted by length for inference and validation,
    which keeps padding small without changing which rows are seen.
    """

    def __init__(self, encoded: EncodedBatch, y: np.ndarray | None = None, order: np.ndarray | None = None,
                 device: str | torch.device = "cpu", descriptors: np.ndarray | None = None,
                 groups: np.ndarray | None = None):
        ids, flags, _ = encoded.padded()
        # Token matrix, flags and targets live on the training device, so batches are gathered
        # there (no host-to-device copy per step); lengths stay on the host too, so choosing a
        # batch's width never synchronises with the device.
        self.device = torch.device(device)
        self.ids = torch.as_tensor(ids, device=self.device)
        self.flags = torch.as_tensor(flags, device=self.device)  # int8 (1/8 of int64's memory); a batch's as long
        self.lengths = torch.as_tensor(encoded.lengths)
        self._lengths_dev = self.lengths.to(self.device)
        self.y = None if y is None else torch.as_tensor(y, device=self.device)
        self.order = None if order is None else torch.as_tensor(order)
        # Molecule-level features (e.g. scaled RDKit descriptors), one row per item.
        self.descriptors = None if descriptors is None else torch.as_tensor(descriptors, dtype=torch.float32,
                                                                            device=self.device)
        # Rows that are variants of one molecule (SMILES enumeration) share a group id; the
        # training sampler then draws one row per group each epoch.
        self.groups = None if groups is None else torch.as_tensor(groups, dtype=torch.int64)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> int:
        return int(self.order[i]) if self.order is not None else i

    def collate(self, rows: list[int]):
        idx = torch.as_tensor(rows)
        width = int(self.lengths[idx].max()) if len(rows) else 1
        dev_idx = idx.to(self.device, non_blocking=True)
        mask = torch.arange(width, device=self.device)[None, :] < self._lengths_dev[dev_idx][:, None]
        X = {"input_ids": self.ids[dev_idx, :width], "conj_flags": self.flags[dev_idx, :width].long(),
             "attention_mask": mask}
        if self.descriptors is not None:
            X["descriptors"] = self.descriptors[dev_idx]
        y = self.y[dev_idx] if self.y is not None else torch.zeros(len(rows), device=self.device)
        return X, y


class BucketBatchSampler(Sampler):
    """Shuffled batches of similar length.

    Each epoch: shuffle all rows, cut into pools of ``pool_batches`` batches, sort each pool by
    length, cut into batches, shuffle the batch order. Padding stays small and every epoch still
    sees a fresh random order (seeded, so runs are reproducible).
    """

    def __init__(self, lengths: torch.Tensor, batch_size: int, seed: int, pool_batches: int = 50,
                 groups: torch.Tensor | None = None):
        self.lengths = lengths
        self.batch_size = int(batch_size)
        self.pool = self.batch_size * pool_batches
        self.generator = torch.Generator().manual_seed(int(seed))
        self.picker = GroupPicker(groups) if groups is not None else None

    def __len__(self) -> int:
        n = len(self.lengths) if self.picker is None else self.picker.n_groups
        return (n + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        if self.picker is None:
            perm = torch.randperm(len(self.lengths), generator=self.generator)
        else:
            rows = self.picker.draw(self.generator)
            perm = rows[torch.randperm(len(rows), generator=self.generator)]
        batches = []
        for start in range(0, len(perm), self.pool):
            pool = perm[start : start + self.pool]
            pool = pool[torch.argsort(self.lengths[pool], stable=True)]
            batches.extend(pool[i : i + self.batch_size].tolist() for i in range(0, len(pool), self.batch_size))
        for b in torch.randperm(len(batches), generator=self.generator).tolist():
            yield batches[b]


class GroupPicker:
    """One row per group, drawn uniformly each epoch (the SMILES variants of one molecule)."""

    def __init__(self, groups: torch.Tensor):
        order = torch.argsort(groups, stable=True)
        _, counts = torch.unique_consecutive(groups[order], return_counts=True)
        self.order, self.counts = order, counts
        self.starts = torch.cumsum(counts, 0) - counts
        self.n_groups = len(counts)

    def draw(self, generator: torch.Generator) -> torch.Tensor:
        u = torch.rand(self.n_groups, generator=generator, dtype=torch.float64)
        offset = (u * self.counts).long().clamp_max(self.counts - 1)
        return self.order[self.starts + offset]


class GroupShuffleSampler(Sampler):
    """Plain shuffled rows, one per group each epoch (``bucket_by_length=False`` with variants)."""

    def __init__(self, groups: torch.Tensor, generator: torch.Generator):
        self.picker, self.generator = GroupPicker(groups), generator

    def __len__(self) -> int:
        return self.picker.n_groups

    def __iter__(self):
        rows = self.picker.draw(self.generator)
        yield from rows[torch.randperm(len(rows), generator=self.generator)].tolist()


class BucketedLoader:
    """skorch ``iterator_train``: a DataLoader over bucketed batches (picklable, seeded).

    skorch builds it once per fit; its shuffling generator (``generator_``, advanced every epoch)
    is kept so a training snapshot can save it, and ``resume_state`` (set when resuming) starts
    the next loader from a saved state instead of from ``seed``.
    """

    def __init__(self, seed: int = 0, bucket: bool = True):
        self.seed, self.bucket = seed, bucket
        self.generator_ = None
        self.resume_state = None

    def _generator(self) -> torch.Generator:
        generator = torch.Generator().manual_seed(int(self.seed))
        if self.resume_state is not None:
            generator.set_state(self.resume_state)
            self.resume_state = None
        self.generator_ = generator
        return generator

    def __call__(self, dataset: EncodedSmilesDataset, batch_size: int = 32, **_ignored) -> DataLoader:
        if self.bucket:
            sampler = BucketBatchSampler(dataset.lengths, batch_size, self.seed, groups=dataset.groups)
            sampler.generator = self._generator()
            return DataLoader(dataset, batch_sampler=sampler, collate_fn=dataset.collate)
        if dataset.groups is not None:
            return DataLoader(dataset, batch_size=batch_size, sampler=GroupShuffleSampler(dataset.groups, self._generator()),
                              collate_fn=dataset.collate)
        return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=self._generator(),
                          collate_fn=dataset.collate)

    def __getstate__(self):
        # the generator is live state of one fit (a snapshot saves it), not part of the fitted model
        return {**self.__dict__, "generator_": None, "resume_state": None}


def sequential_loader(dataset: EncodedSmilesDataset, batch_size: int = 32, **_ignored) -> DataLoader:
    """skorch ``iterator_valid``: fixed order (the dataset's ``order``), no shuffling. (Each pass
    draws a base seed from torch's global generator, as every DataLoader does: a fit's draws,
    part of its seeded results, stay as they were.)"""
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=dataset.collate)


def inference_loader(dataset: EncodedSmilesDataset, batch_size: int = 32) -> DataLoader:
    """``sequential_loader`` for ``predict`` and the embedder: its base seed comes from a generator
    of its own, so predicting leaves the caller's torch random stream (and the dropout of a
    seeded fit running in another thread) as it was."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=dataset.collate,
                      generator=torch.Generator())

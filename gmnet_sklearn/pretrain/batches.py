"""Which rows make each pretraining step's batch: a pure function of the step number.

An epoch visits the shards of the encoded corpus in a seeded random order; within a shard the
rows are shuffled, sorted by length inside pools of ``pool_batches`` batches (little padding) and
cut into batches whose order is shuffled again. Seeds are derived from (seed, epoch, shard), so
the data position of step ``s`` needs nothing but ``s``: a resumed run reads exactly the batches
the uninterrupted one would, and only the current shard is ever in memory.
"""

from __future__ import annotations

import numpy as np
import torch


class BatchPlan:
    def __init__(self, shard_sizes: list[int], batch_size: int, seed: int, bucket: bool = True, pool_batches: int = 50):
        self.shard_sizes = [int(n) for n in shard_sizes]
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.bucket = bool(bucket)
        self.pool_batches = int(pool_batches)
        self.shard_batches = [-(-n // self.batch_size) for n in self.shard_sizes]
        self.steps_per_epoch = sum(self.shard_batches)
        if self.steps_per_epoch == 0:
            raise ValueError("the encoded corpus holds no valid SMILES")
        self._memo = (None, None)

    def shard_order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.shard_sizes))

    def position(self, step: int) -> dict:
        """Where step ``step`` (0-based) reads: epoch, shard (and its rank in the epoch), batch."""
        epoch, rest = divmod(int(step), self.steps_per_epoch)
        for rank, shard in enumerate(self.shard_order(epoch)):
            if rest < self.shard_batches[shard]:
                return {"epoch": epoch, "shard_rank": rank, "shard": int(shard), "batch": int(rest)}
            rest -= self.shard_batches[shard]
        raise AssertionError("unreachable")

    def shard_batches_rows(self, epoch: int, shard: int, lengths: np.ndarray) -> list[np.ndarray]:
        key = (epoch, shard)
        if self._memo[0] == key:
            return self._memo[1]
        rng = np.random.default_rng([self.seed, epoch, shard, 1])
        order = rng.permutation(len(lengths))
        if self.bucket:
            pool = self.batch_size * self.pool_batches
            order = np.concatenate([p[np.argsort(lengths[p], kind="stable")]
                                    for p in np.split(order, range(pool, len(order), pool))]) if len(order) else order
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        batches = [batches[i] for i in rng.permutation(len(batches))]
        self._memo = (key, batches)
        return batches


def collate(ids: np.ndarray, flags: np.ndarray, offsets: np.ndarray, rows: np.ndarray, pad_id: int):
    """Right-padded ``(input_ids, conj_flags, attention_mask)`` tensors of the rows of a shard."""
    starts, lengths = offsets[rows], offsets[rows + 1] - offsets[rows]
    width = int(lengths.max())
    pos = np.arange(width)[None, :]
    mask = pos < lengths[:, None]
    index = np.where(mask, starts[:, None] + pos, 0)
    return (torch.as_tensor(np.where(mask, ids[index], pad_id)), torch.as_tensor(np.where(mask, flags[index], 0)),
            torch.as_tensor(mask))


__all__ = ["BatchPlan", "collate"]

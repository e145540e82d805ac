"""Learning-rate warm-up and decay as a skorch callback, stepped every training batch.

skorch's ``LRScheduler`` wraps a torch scheduler whose state would have to be saved and restored
next to the optimizer's, and which it rebuilds from ``len(history)`` (epochs, not batches) on a
resumed fit. Here the factor is a pure function of the number of training batches done, which
the history already holds, so a fit resumed from a ``TrainingSnapshot`` goes on at exactly the
learning rate the uninterrupted fit would have used.
"""

from __future__ import annotations

import math

from skorch.callbacks import Callback

SCHEDULES = ("cosine", "linear", "constant")


def lr_factor(step: int, total: int, warmup: int, kind: str) -> float:
    """Multiplier of the base learning rate at 0-based ``step`` of ``total``: linear warm-up over
    ``warmup`` steps from 1/warmup to 1, then cosine or linear decay to 0 at ``total`` (or flat)."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if kind == "linear":
        return 1.0 - progress
    raise ValueError(f"unknown schedule {kind!r}; choose from {SCHEDULES}")


class WarmupDecay(Callback):
    """Set every parameter group's lr to ``base_lr * lr_factor(step, ...)`` (times the group's
    ``lr_scale``, where layer-wise decay gave it one) before each training batch; ``total_steps``
    = batches per epoch x max_epochs, ``warmup`` a fraction of it. The epoch's last learning rate
    (the head's) goes into the history as ``lr``."""

    def __init__(self, base_lr: float, total_steps: int, warmup: float = 0.1, kind: str = "cosine"):
        self.base_lr = base_lr
        self.total_steps = total_steps
        self.warmup = warmup
        self.kind = kind

    def on_train_begin(self, net, **kwargs):
        self.step_ = None  # counted at the first batch, after a TrainingSnapshot has restored the history
        self.warmup_steps_ = int(round(self.warmup * self.total_steps))

    def on_batch_begin(self, net, training=False, **kwargs):
        if not training:
            return
        if self.step_ is None:  # batches already trained (a resumed fit's history holds them)
            self.step_ = sum(1 for row in net.history for b in row["batches"] if "train_loss" in b)
        lr = self.base_lr * lr_factor(self.step_, self.total_steps, self.warmup_steps_, self.kind)
        for group in net.optimizer_.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)  # layer-wise decay keeps each group's factor
        self.lr_ = lr

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.step_ += 1

    def on_epoch_end(self, net, **kwargs):
        if hasattr(self, "lr_"):
            net.history.record("lr", self.lr_)
